// Which sanitizer this translation unit is built with, for the few places that must behave
// differently under one: ThreadSanitizer cannot see ordering made by the kernel (a pipe,
// /dev/fuse) or by another process, and under any sanitizer every call is several times
// slower, so timing claims mean nothing there. gcc says so with __SANITIZE_*__, clang with
// __has_feature.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define RPCIE_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RPCIE_THREAD_SANITIZER 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define RPCIE_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RPCIE_ADDRESS_SANITIZER 1
#endif
#endif

namespace rpcie {

#ifdef RPCIE_THREAD_SANITIZER
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#ifdef RPCIE_ADDRESS_SANITIZER
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace rpcie
