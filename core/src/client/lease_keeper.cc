#include "lease_keeper.hpp"

#include <algorithm>
#include <string>
#include <variant>

namespace rpcie::client {

std::chrono::milliseconds LeaseKeeper::interval(std::chrono::milliseconds lease) {
  return std::max(lease / 3, std::chrono::milliseconds(50));
}

void LeaseKeeper::start() {
  worker_.start([this] { run(); });
}

void LeaseKeeper::stop() { worker_.stop(); }

void LeaseKeeper::run() {
  std::uint64_t seq = 0;
  const auto every = interval(lease_);
  while (!worker_.stopping()) {
    {
      std::unique_lock g(worker_.lock());
      worker_.cv().wait_for(g, every, [&] { return worker_.stopping(); });
    }
    if (worker_.stopping() || router_.failure()) return;
    std::lock_guard sg(socket_lock_);
    if (worker_.stopping()) return;
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
