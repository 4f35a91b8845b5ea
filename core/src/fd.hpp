// File descriptor helpers internal to core's sources: an owner, and a bounded wait.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

// Waits until `fd` has `events`, retrying on EINTR. ETIMEDOUT at the deadline; `what` names
// the wait in errors ("deadline passed receiving on ...").
inline Result<void> fd_wait(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, deadline.remaining_ms());
    if (rc > 0) return {};
    if (rc == 0) return fail(ETIMEDOUT, std::string("deadline passed ") + what);
    if (errno != EINTR) return fail(errno, std::string("poll while ") + what);
  }
}

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
