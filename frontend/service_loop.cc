// See service_loop.hpp for the contract.
#include "service_loop.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>

#include <algorithm>
#include <cstring>

#include "rpcie/control.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/log.hpp"

namespace rpcie::hostd {

std::string hostd_status_text(const nlohmann::json& answer) {
  std::size_t attached = 0, restoring = 0;
  const auto it = answer.find("attachments");
  if (it != answer.end() && it->is_array()) {
    for (const auto& e : *it) {
      const bool is_restoring = e.is_object() && e.contains("state") && e["state"] == "restoring";
      (is_restoring ? restoring : attached) += 1;
    }
  }
  std::string text = std::to_string(attached) + (attached == 1 ? " device attached" : " devices attached");
  if (restoring > 0) text += ", " + std::to_string(restoring) + " being restored";
  return text;
}

Result<std::unique_ptr<ServiceLoop>> ServiceLoop::start(ServiceNotifier& notifier, std::string control_path,
                                                        std::function<void()> on_hangup) {
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  Fd fd(::signalfd(-1, &hup, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd) return fail(errno, "signalfd for SIGHUP");
  std::unique_ptr<ServiceLoop> loop(
      new ServiceLoop(notifier, std::move(control_path), std::move(on_hangup), std::move(fd)));
  loop->thread_ = std::thread([l = loop.get()] { l->run(); });
  return loop;
}

ServiceLoop::ServiceLoop(ServiceNotifier& notifier, std::string control_path, std::function<void()> on_hangup,
                         Fd signals)
    : notifier_(notifier),
      control_path_(std::move(control_path)),
      on_hangup_(std::move(on_hangup)),
      signals_(std::move(signals)),
      ask_every_(kAskEvery) {
  // Two asks to each ping, so that one ask late by a slice does not miss a ping.
  const auto half_ping = std::chrono::duration_cast<std::chrono::milliseconds>(notifier.watchdog_interval() / 2);
  if (half_ping.count() > 0) ask_every_ = std::max(std::chrono::milliseconds(10), std::min(ask_every_, half_ping));
}

ServiceLoop::~ServiceLoop() {
  stop_.store(true);
  stop_posted_.post();
  if (thread_.joinable()) thread_.join();
}

void ServiceLoop::hangups_take() {
  signalfd_siginfo si{};
  bool hangup = false;
  while (::read(signals_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) hangup = true;
  if (hangup && on_hangup_) on_hangup_();
}

void ServiceLoop::ask() {
  auto answer = control::call(control_path_, {{"op", "status"}}, Deadline::after(kAskTimeout));
  if (!answer) {
    RPCIE_LOG_ONCE(LogLevel::warn, "hostd", "service watchdog: own control socket did not answer: {} (no ping)",
                   answer.error().describe());
    return;
  }
  notifier_.status(hostd_status_text(*answer));
  notifier_.alive();
}

void ServiceLoop::run() {
  auto next_ask = Deadline::Clock::now();
  while (!stop_.load()) {
    if (notifier_.enabled() && Deadline::Clock::now() >= next_ask) {
      ask();
      next_ask = Deadline::Clock::now() + ask_every_;
    }
    const auto slice = stop_posted_ ? kIdleSlice : kSlice;
    const auto wait =
        notifier_.enabled()
            ? std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(next_ask - Deadline::Clock::now()),
                         std::chrono::milliseconds(0), slice)
            : slice;
    pollfd p[2] = {{signals_.get(), POLLIN, 0}, {stop_posted_.fd(), POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(wait.count())) > 0 && p[0].revents != 0) hangups_take();
  }
}

}  // namespace rpcie::hostd
