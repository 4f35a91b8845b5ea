// rpcie::Result — the error type of every fallible rpcie call.
//
// Contract:
//  - Functions that can fail return Result<T>, which is [[nodiscard]]: a dropped result is a
//    compile error under -Werror; `(void)` says on purpose.
//  - RPCIE_TRY / RPCIE_TRY_ASSIGN propagate an error to the caller (below).
//  - No exceptions cross a module boundary and none are thrown on data paths.
//  - An Error keeps the code in its original domain: errno values stay errno values,
//    libfabric's own codes (>= FI_ERRNO_OFFSET, 256) stay libfabric codes. Only the edges
//    (CLI exit, FUSE reply, log line) call to_errno(): libfabric codes >= 256 are not
//    errno values and must never be handed to strerror() or a kernel reply as they are.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace rpcie {

enum class ErrorDomain {
  posix,   // code is a positive errno value
  fabric,  // code is a positive libfabric value (FI_E*; may be >= 256)
};

struct [[nodiscard]] Error {
  ErrorDomain domain = ErrorDomain::posix;
  int code = 0;         // always positive
  std::string message;  // human-readable context, no trailing newline

  // errno equivalent, for the edges. Total: every code maps to some errno value.
  int to_errno() const noexcept;
  // "message: strerror-text" for logs and CLI output.
  std::string describe() const;
};

// tl::expected<T, Error> that may not be dropped. Converts from tl::expected and from
// tl::unexpected<Error> (fail(), RPCIE_TRY).
template <class T>
class [[nodiscard]] Result : public tl::expected<T, Error> {
 public:
  using tl::expected<T, Error>::expected;
  Result(const tl::expected<T, Error>& other) : tl::expected<T, Error>(other) {}
  Result(tl::expected<T, Error>&& other) : tl::expected<T, Error>(std::move(other)) {}
};

// Propagation, for a function that returns any Result:
//   RPCIE_TRY(expr);                  expr's error is returned; its value (if any) dropped
//   RPCIE_TRY_ASSIGN(auto x, expr);   x is expr's value, or expr's error is returned (this
//                                     declares x in the enclosing block: not an if's bare body)
#define RPCIE_TRY(expr)                                                                                                \
  do {                                                                                                                 \
    if (auto rpcie_try_ = (expr); !rpcie_try_) return ::tl::unexpected<::rpcie::Error>(std::move(rpcie_try_).error()); \
  } while (0)
#define RPCIE_TRY_CAT2_(a, b) a##b
#define RPCIE_TRY_CAT_(a, b) RPCIE_TRY_CAT2_(a, b)
#define RPCIE_TRY_ASSIGN(lhs, expr) RPCIE_TRY_ASSIGN_(RPCIE_TRY_CAT_(rpcie_try_, __LINE__), lhs, expr)
#define RPCIE_TRY_ASSIGN_(tmp, lhs, expr)                                    \
  auto tmp = (expr);                                                         \
  if (!tmp) return ::tl::unexpected<::rpcie::Error>(std::move(tmp).error()); \
  lhs = std::move(*tmp)

// Shorthands that read well at the return site: `return fail(EPROTO, "bad magic");`
inline tl::unexpected<Error> fail(int errno_code, std::string message) {
  return tl::unexpected<Error>(Error{ErrorDomain::posix, errno_code, std::move(message)});
}
// `rc` is a libfabric return value (negative or positive FI_E* code).
tl::unexpected<Error> fail_fabric(long rc, std::string_view what);

// The mapping used by Error::to_errno for libfabric codes; exposed for tests.
int fabric_code_to_errno(int fi_code) noexcept;

}  // namespace rpcie
