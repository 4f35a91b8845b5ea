// File descriptors for any part of rpcie: an owner, and a bounded wait for one that polls a
// socket of its own (core's bootstrap and control sockets, rpcie-exportd's connections).
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

// An owned file descriptor, closed on destruction. Move-only; not thread-safe itself.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // close(2) can report a deferred write error: callers that wrote check it.
  int close() noexcept { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_ = -1;
};

// Waits until `fd` has `events` (or an error or hang-up, which poll(2) always reports),
// retrying on EINTR. ETIMEDOUT at the deadline, the poll errno otherwise; `what` names the
// wait in errors ("deadline passed receiving on ...").
inline Result<void> fd_wait(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, deadline.remaining_ms());
    if (rc > 0) return {};
    if (rc == 0) return fail(ETIMEDOUT, std::string("deadline passed ") + what);
    if (errno != EINTR) return fail(errno, std::string("poll while ") + what);
  }
}

}  // namespace rpcie
