// A bounded wait on a file descriptor, for any part of rpcie that polls a socket of its own
// (core's bootstrap and control sockets, rpcie-exportd's connections).
#pragma once

#include <poll.h>

#include <cerrno>
#include <string>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

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
