// File descriptor helpers internal to core's sources: an owner (and, from rpcie/fd.hpp, the
// bounded wait).
#pragma once

#include <unistd.h>

#include "rpcie/fd.hpp"

namespace rpcie {

class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }
  // close(2) can report a deferred write error: callers that wrote check it.
  int close() noexcept {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace rpcie
