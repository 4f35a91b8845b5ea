// rpcie-hostd's side of the service manager: SIGHUP, and the watchdog and status reports
// (rpcie/service_notify.hpp), on one thread of their own.
//
// Contract:
//  - SIGHUP must be blocked in every thread of the process before start() (main blocks it
//    before any thread exists): the loop takes it with a signalfd and calls `on_hangup`
//    on its thread. Nothing else in the process sees SIGHUP.
//  - While the notifier is enabled the loop asks the daemon's own control socket for its
//    status, at least every kAskEvery and at twice the watchdog's ping rate. An answer
//    proves that hostd serves: the control socket accepts and the attach manager answers
//    (its locks are free). Only then does it call notifier.alive() (WATCHDOG=1 at the
//    watchdog's rate) and set STATUS= to "N devices attached" (devices in the tree; the
//    state file's devices still being restored are named apart). A daemon whose control
//    side hangs stops pinging, and the service manager restarts it. Each ask has a deadline
//    (kAskTimeout), so the loop itself never hangs on it.
//  - The destructor stops the loop and joins it at once (an eventfd ends the loop's sleep;
//    without one, within kSlice). Between asks the loop sleeps until the next is due, or
//    kIdleSlice when the notifier is off: an idle daemon is not woken for nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "rpcie/event_fd.hpp"
#include "rpcie/fd.hpp"
#include "rpcie/result.hpp"
#include "rpcie/service_notify.hpp"

namespace rpcie::hostd {

class ServiceLoop {
 public:
  static constexpr std::chrono::milliseconds kSlice{200};
  static constexpr std::chrono::milliseconds kIdleSlice{60'000};
  static constexpr std::chrono::milliseconds kAskEvery{1000};
  static constexpr std::chrono::milliseconds kAskTimeout{2000};

  // `notifier` and `control_path` (the daemon's control socket) must outlive the loop.
  static Result<std::unique_ptr<ServiceLoop>> start(ServiceNotifier& notifier, std::string control_path,
                                                    std::function<void()> on_hangup);
  ~ServiceLoop();
  ServiceLoop(const ServiceLoop&) = delete;
  ServiceLoop& operator=(const ServiceLoop&) = delete;

 private:
  ServiceLoop(ServiceNotifier& notifier, std::string control_path, std::function<void()> on_hangup, Fd signals);
  void run();
  void hangups_take();
  void ask();

  ServiceNotifier& notifier_;
  const std::string control_path_;
  const std::function<void()> on_hangup_;
  Fd signals_;  // signalfd of SIGHUP
  std::chrono::milliseconds ask_every_;
  std::atomic<bool> stop_{false};
  EventFd stop_posted_;  // the destructor posts it after setting stop_
  std::thread thread_;
};

// The status line for a control "status" answer: "N devices attached" (", M being restored").
std::string hostd_status_text(const nlohmann::json& status_answer);

}  // namespace rpcie::hostd
