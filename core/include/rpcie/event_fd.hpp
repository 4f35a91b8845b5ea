// EventFd: a wake-up another thread can poll(2) for beside its other descriptors (an
// eventfd(2) counter). post() makes fd() readable until drain(); posts before a drain count
// as one wake-up. Thread-safety: post() from any thread (async-signal-safe); drain() from the
// thread that polls. An EventFd that could not be made (no descriptors left) is invalid:
// post() does nothing and a poll on fd() -1 ignores it, so its waiter runs to its deadline.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "rpcie/fd.hpp"

namespace rpcie {

class EventFd {
 public:
  EventFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  int fd() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  void post() const noexcept {
    const std::uint64_t one = 1;
    if (fd_) (void)!::write(fd_.get(), &one, sizeof one);
  }
  void drain() const noexcept {
    std::uint64_t n = 0;
    if (fd_) (void)!::read(fd_.get(), &n, sizeof n);
  }

 private:
  Fd fd_;
};

}  // namespace rpcie
