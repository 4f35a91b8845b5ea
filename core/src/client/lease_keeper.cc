#include "lease_keeper.hpp"

#include <poll.h>

#include <algorithm>
#include <string>
#include <variant>

namespace rpcie::client {

namespace {
// While the attachment resumes: how often the keeper looks whether it is over.
constexpr auto kResumingPause = std::chrono::milliseconds(50);
}  // namespace

std::chrono::milliseconds LeaseKeeper::interval(std::chrono::milliseconds lease) {
  return std::max(lease / 3, std::chrono::milliseconds(50));
}

void LeaseKeeper::start() {
  worker_.start("rpcie-lease", [this] { run(); });
}

LeaseKeeper::LeaseKeeper(Socket& socket, std::chrono::milliseconds lease, ReplyRouter& router)
    : socket_(&socket), lease_(lease), router_(router) {}

void LeaseKeeper::stop() {
  wake_.post();
  worker_.stop();
}

bool LeaseKeeper::idle_wait(std::chrono::milliseconds every) {
  // Between heartbeats the exporter sends nothing on this connection: the socket turning
  // readable, or reporting an error or a hang-up, means it died (a reset: a cut link), and
  // the heartbeat that finds out goes at once instead of up to a third of a lease later.
  int fd = -1;
  {
    std::lock_guard sg(socket_lock_);
    fd = socket_->fd();
  }
  pollfd p[2] = {{fd, POLLIN | POLLRDHUP, 0}, {wake_.fd(), POLLIN, 0}};
  const int n = wake_ ? 2 : 1;
  // Only stop() writes the eventfd, and it does so before the worker's stop flag is set: a
  // thread that looked at the flag just before would otherwise send a heartbeat and wait a
  // lease for its echo (seen under ThreadSanitizer: stop() took 30 s).
  return ::poll(p, n, static_cast<int>(every.count())) > 0 && n == 2 && (p[1].revents & POLLIN) != 0;
}

void LeaseKeeper::socket_set(Socket& socket) {
  std::lock_guard sg(socket_lock_);
  socket_ = &socket;
}

void LeaseKeeper::run() {
  std::uint64_t seq = 0;
  const auto every = interval(lease_);
  while (!worker_.stopping()) {
    if (router_.resuming()) {
      // The resume brings a new connection (socket_set); the old one may poll as hung up.
      std::unique_lock g(worker_.lock());
      worker_.cv().wait_for(g, kResumingPause, [&] { return worker_.stopping(); });
      continue;
    }
    if (idle_wait(every) || worker_.stopping() || router_.failure()) return;
    if (router_.resuming()) continue;
    std::lock_guard sg(socket_lock_);
    if (worker_.stopping()) return;
    auto deadline = Deadline::after(lease_);
    auto sent = socket_->message_send(proto::Heartbeat{++seq}, 0, deadline);
    auto echo = sent ? socket_->message_recv(deadline) : Result<OwnedMessage>(tl::unexpected(sent.error()));
    if (!echo || !std::holds_alternative<proto::Heartbeat>(echo->decoded.message)) {
      std::string why = !echo ? echo.error().describe()
                              : std::string("unexpected ") + proto::msg_type_name(echo->decoded.header.type);
      router_.link_lost(Error{ErrorDomain::posix, ENOTCONN, "exporter lost (heartbeat): " + why});
      continue;
    }
    heartbeats_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace rpcie::client
