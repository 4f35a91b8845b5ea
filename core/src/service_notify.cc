// See service_notify.hpp for the contract.
//
// The notify protocol is spoken directly (one datagram of "KEY=VALUE\n" lines to the
// AF_UNIX socket $NOTIFY_SOCKET names) rather than through libsystemd's sd_notify: the
// protocol is small and documented as stable (sd_notify(3), "notify socket"), and the
// daemons keep one fewer shared library, which their hardened units would have to map.
#include "rpcie/service_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "rpcie/log.hpp"

namespace rpcie {

namespace {

std::string_view env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string_view(v) : std::string_view();
}

// A decimal number that is the whole of `text`, or 0.
std::uint64_t number_parse(std::string_view text) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() ? v : 0;
}

std::uint64_t monotonic_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace

ServiceNotifier ServiceNotifier::from_environment() {
  const auto pid_text = env("WATCHDOG_PID");
  const bool pid_matches = pid_text.empty() || number_parse(pid_text) == static_cast<std::uint64_t>(::getpid());
  return make(env("NOTIFY_SOCKET"), number_parse(env("WATCHDOG_USEC")), pid_matches);
}

ServiceNotifier ServiceNotifier::make(std::string_view socket, std::uint64_t watchdog_usec, bool pid_matches) {
  ServiceNotifier n;
  if (socket.empty()) return n;
  sockaddr_un sa{};
  // '@' names an abstract socket (a leading NUL byte); anything else must be an absolute path.
  if ((socket.front() != '/' && socket.front() != '@') || socket.size() >= sizeof sa.sun_path || socket.size() < 2) {
    RPCIE_LOG_ONCE(LogLevel::warn, "notify", "NOTIFY_SOCKET '{}' is not a socket path or @name: not notifying", socket);
    return n;
  }
  n.address_ = std::string(socket);
  if (n.address_.front() == '@') n.address_.front() = '\0';
  n.fd_ = Fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!n.fd_) {
    RPCIE_LOG_ONCE(LogLevel::warn, "notify", "no socket for the service manager: {}", std::strerror(errno));
    return n;
  }
  if (watchdog_usec > 0 && pid_matches) n.ping_every_ = std::chrono::microseconds(watchdog_usec / 2);
  return n;
}

ServiceNotifier::ServiceNotifier(ServiceNotifier&& other) noexcept { *this = std::move(other); }

ServiceNotifier& ServiceNotifier::operator=(ServiceNotifier&& other) noexcept {
  if (this == &other) return *this;
  std::scoped_lock g(lock_, other.lock_);
  fd_ = std::move(other.fd_);
  address_ = std::move(other.address_);
  ping_every_ = other.ping_every_;
  last_ping_ = other.last_ping_;
  last_status_ = other.last_status_;
  status_sent_ = std::move(other.status_sent_);
  status_wanted_ = std::move(other.status_wanted_);
  return *this;
}

bool ServiceNotifier::send(const std::string& message) {
  if (!fd_) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, address_.data(), address_.size());
  // An abstract name's length is all there is of it: no terminating NUL counted.
  const auto len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size() + (address_.front() == '\0' ? 0 : 1));
  const ssize_t n = ::sendto(fd_.get(), message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&sa), len);
  if (n < 0) {
    RPCIE_LOG_ONCE(LogLevel::debug, "notify", "a report to the service manager was dropped: {}", std::strerror(errno));
    return false;
  }
  return true;
}

void ServiceNotifier::ready() {
  std::lock_guard g(lock_);
  (void)send("READY=1\n");
}

void ServiceNotifier::reloading() {
  std::lock_guard g(lock_);
  // systemd (Type=notify-reload and newer Type=notify) wants the clock with RELOADING=1.
  (void)send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec()) + "\n");
}

void ServiceNotifier::stopping() {
  std::lock_guard g(lock_);
  (void)send("STOPPING=1\n");
}

void ServiceNotifier::status(std::string_view text) {
  std::lock_guard g(lock_);
  if (!fd_) return;
  status_wanted_.assign(text);
  for (char& c : status_wanted_)
    if (c == '\n') c = ' ';  // one line: a newline would end the STATUS= field
  status_flush(Clock::now());
}

void ServiceNotifier::status_flush(Clock::time_point now) {
  if (status_wanted_ == status_sent_) return;
  if (last_status_ != Clock::time_point{} && now - last_status_ < kStatusInterval) return;
  last_status_ = now;
  status_sent_ = status_wanted_;
  (void)send("STATUS=" + status_sent_ + "\n");
}

void ServiceNotifier::alive() {
  std::lock_guard g(lock_);
  if (!fd_) return;
  const auto now = Clock::now();
  status_flush(now);
  if (ping_every_.count() == 0 || now - last_ping_ < ping_every_) return;
  // From the time the ping was due, so that the caller's loop period (a ping goes out at its
  // first call past the due time) does not stretch the interval; after a long gap, from now.
  last_ping_ = now - last_ping_ < 2 * ping_every_ ? last_ping_ + ping_every_ : now;
  (void)send("WATCHDOG=1\n");
}

}  // namespace rpcie
