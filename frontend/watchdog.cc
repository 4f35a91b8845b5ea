#include "watchdog.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "rpcie/log.hpp"

namespace rpcie::hostd {

Watchdog::Watchdog(std::chrono::milliseconds timeout, Expire expire) : timeout_(timeout), expire_(std::move(expire)) {}

Watchdog::~Watchdog() { stop(); }

void Watchdog::start() {
  thread_ = std::thread([this] { run(); });
}

void Watchdog::stop() {
  {
    std::lock_guard g(lock_);
    stop_ = true;
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::uint64_t Watchdog::track(fuse_req_t req, Clock::time_point since) {
  std::lock_guard g(lock_);
  const auto ticket = next_ticket_++;
  pending_.emplace(ticket, Pending{req, since});
  if (since + timeout_ < asleep_until_) changed_.notify_all();
  return ticket;
}

bool Watchdog::untrack(std::uint64_t ticket) {
  std::lock_guard g(lock_);
  return pending_.erase(ticket) == 1;
}

std::size_t Watchdog::expire_due(Clock::time_point now) {
  const auto limit = now - timeout_;
  std::vector<fuse_req_t> late;
  {
    std::lock_guard g(lock_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.since <= limit) {
        late.push_back(it->second.req);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto req : late) {
    RPCIE_LOG_WARN("hostd", "request older than the timeout ({} ms): answered EIO", timeout_.count());
    expire_(req);
  }
  return late.size();
}

void Watchdog::run() {
  // An idle hostd tracks nothing: the thread sleeps until a request is, or a minute at most.
  constexpr auto kIdle = std::chrono::minutes(1);
  std::unique_lock g(lock_);
  while (!stop_) {
    asleep_until_ = Clock::now() + kIdle;
    for (const auto& [ticket, p] : pending_) asleep_until_ = std::min(asleep_until_, p.since + timeout_);
    changed_.wait_until(g, asleep_until_);
    asleep_until_ = Clock::time_point::max();  // awake: track() need not notify
    g.unlock();
    (void)expire_due(Clock::now());
    g.lock();
  }
}

}  // namespace rpcie::hostd
