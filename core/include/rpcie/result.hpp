// rpcie::Result — the error type of every fallible rpcie call.
//
// Contract:
//  - Functions that can fail return Result<T> and are [[nodiscard]] by type.
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

template <class T>
using Result = tl::expected<T, Error>;

// Shorthands that read well at the return site: `return fail(EPROTO, "bad magic");`
inline tl::unexpected<Error> fail(int errno_code, std::string message) {
  return tl::unexpected<Error>(Error{ErrorDomain::posix, errno_code, std::move(message)});
}
// `rc` is a libfabric return value (negative or positive FI_E* code).
tl::unexpected<Error> fail_fabric(long rc, std::string_view what);

// The mapping used by Error::to_errno for libfabric codes; exposed for tests.
int fabric_code_to_errno(int fi_code) noexcept;

}  // namespace rpcie
