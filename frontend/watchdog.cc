#include "watchdog.hpp"

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
    stop_changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::uint64_t Watchdog::track(fuse_req_t req, Clock::time_point since) {
  std::lock_guard g(lock_);
  const auto ticket = next_ticket_++;
  pending_.emplace(ticket, Pending{req, since});
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
  std::unique_lock g(lock_);
  while (!stop_) {
    stop_changed_.wait_for(g, std::chrono::milliseconds(100));
    g.unlock();
    (void)expire_due(Clock::now());
    g.lock();
  }
}

}  // namespace rpcie::hostd
