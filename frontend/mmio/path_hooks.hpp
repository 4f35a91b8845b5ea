// What the file-name hooks of librpcie-mmio.so share (path_hooks.cc: open, stat, access,
// readlink...; listing_hooks.cc: directory listings): libc's own definitions, and the
// rewriting of a name, absolute or relative to a directory descriptor, per sysfs_paths.hpp.
// Not for the SIGSEGV handler; thread-safe.
#pragma once

#include <limits.h>

#include <atomic>

namespace rpcie::mmio {

// The next definition of `name` after ours (libc's), looked up once into `cache`.
void* symbol_next(const char* name, std::atomic<void*>& cache) noexcept;

// The directory `dirfd` stands for (AT_FDCWD: the working directory), into `out`; false when
// it cannot be told (errno kept either way).
bool fd_dir_path(int dirfd, char* out, std::size_t size) noexcept;

// The name to use instead of `path` (relative ones against `dirfd`, AT_FDCWD for the
// working directory), in `buffer`, or `path` itself. A relative path costs a memchr unless
// one of its components is an rpcie address.
const char* path_mapped_at(int dirfd, const char* path, char (&buffer)[PATH_MAX]) noexcept;

// Whether `dirfd` is a descriptor of /sys/bus/pci/devices (errno kept).
bool fd_is_devices_dir(int dirfd) noexcept;

}  // namespace rpcie::mmio

// Function types spelled out: decltype(&::open) carries libc's attributes, which a template
// argument drops (with a warning). `name##_next` is the cache, a std::atomic<void*>.
#define RPCIE_NEXT(name, Fn) reinterpret_cast<Fn>(rpcie::mmio::symbol_next(#name, name##_next))
