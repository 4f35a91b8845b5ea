#include "lease_keeper.hpp"

#include <algorithm>
#include <string>
#include <variant>

namespace rpcie::client {

std::chrono::milliseconds LeaseKeeper::interval(std::chrono::milliseconds lease) {
  return std::max(lease / 3, std::chrono::milliseconds(50));
}

void LeaseKeeper::start() {
  thread_ = std::thread([this] { run(); });
}

void LeaseKeeper::stop() {
  {
    std::lock_guard g(lock_);
    stop_.store(true);
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::run() {
  std::uint64_t seq = 0;
  const auto every = interval(lease_);
  while (!stop_.load()) {
    {
      std::unique_lock g(lock_);
      cv_.wait_for(g, every, [&] { return stop_.load(); });
    }
    if (stop_.load() || router_.failure()) return;
    std::lock_guard sg(socket_lock_);
    if (stop_.load()) return;
    auto deadline = Deadline::after(lease_);
    auto sent = socket_.message_send(proto::Heartbeat{++seq}, 0, deadline);
    auto echo = sent ? socket_.message_recv(deadline) : Result<OwnedMessage>(tl::unexpected(sent.error()));
    if (!echo || !std::holds_alternative<proto::Heartbeat>(echo->decoded.message)) {
      std::string why = !echo ? echo.error().describe()
                              : std::string("unexpected ") + proto::msg_type_name(echo->decoded.header.type);
      (void)router_.fail(Error{ErrorDomain::posix, ENOTCONN, "exporter lost (heartbeat): " + why});
      return;
    }
    heartbeats_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace rpcie::client
