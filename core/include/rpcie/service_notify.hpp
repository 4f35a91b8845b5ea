// A daemon's reports to its service manager (systemd's notify protocol, sd_notify(3)):
// readiness, a one-line status, watchdog pings, reloads and the stop.
//
// Contract:
//  - from_environment() reads $NOTIFY_SOCKET ("/path" or "@abstract"), $WATCHDOG_USEC and
//    $WATCHDOG_PID once. Without $NOTIFY_SOCKET, or with one that is not a usable AF_UNIX
//    address, every call is a no-op (the latter logged once at warn). Reports are
//    best effort: a send that fails (manager gone, queue full) is dropped, logged once at
//    debug, and never blocks or fails the daemon.
//  - The watchdog is on when $WATCHDOG_USEC is a positive number and $WATCHDOG_PID is
//    unset or names this process. alive() then sends WATCHDOG=1 when half the interval has
//    passed since the last ping was due, and nothing otherwise: called at least every few
//    hundred ms, it pings twice per interval on average.
//  - What a ping proves is the caller's choice of thread: call alive() only from a thread
//    whose progress shows that the daemon serves (rpcie-exportd: its accept loop, between
//    two accepts; rpcie-hostd: the thread that has just had an answer from its own control
//    socket). Never call it from a timer that runs whatever the daemon does: a hung
//    daemon must stop pinging so that the manager restarts it.
//  - status() sends STATUS=text when the text differs from the last one sent, at most
//    once per kStatusInterval; a change within that interval is sent by the next status()
//    or alive() call after it (the caller's loop calls alive() often).
//  - Every member may be called from any thread (one lock inside).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "rpcie/fd.hpp"

namespace rpcie {

class ServiceNotifier {
 public:
  static constexpr std::chrono::milliseconds kStatusInterval{1000};

  // A notifier that does nothing (no manager).
  ServiceNotifier() = default;
  static ServiceNotifier from_environment();
  // For tests: the same from given values (empty `socket`: disabled; `watchdog_usec` 0: no
  // watchdog). `pid_matches`: whether $WATCHDOG_PID named this process (or was unset).
  static ServiceNotifier make(std::string_view socket, std::uint64_t watchdog_usec, bool pid_matches);

  ServiceNotifier(ServiceNotifier&& other) noexcept;
  ServiceNotifier& operator=(ServiceNotifier&& other) noexcept;

  bool enabled() const noexcept { return static_cast<bool>(fd_); }
  // Half of $WATCHDOG_USEC: how often alive() pings; zero when the watchdog is off.
  std::chrono::microseconds watchdog_interval() const noexcept { return ping_every_; }

  void ready();      // READY=1 (again after a reload)
  void reloading();  // RELOADING=1 with MONOTONIC_USEC=, before a reload is applied
  void stopping();   // STOPPING=1, as the daemon starts to shut down
  void status(std::string_view text);
  void alive();

 private:
  using Clock = std::chrono::steady_clock;
  bool send(const std::string& message);  // with the lock held
  void status_flush(Clock::time_point now);

  Fd fd_;
  std::string address_;  // sockaddr_un.sun_path bytes ('\0' first for an abstract name)
  std::chrono::microseconds ping_every_{0};
  std::mutex lock_;
  Clock::time_point last_ping_{};
  Clock::time_point last_status_{};
  std::string status_sent_, status_wanted_;
};

}  // namespace rpcie
