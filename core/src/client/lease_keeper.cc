#include "lease_keeper.hpp"

#include <poll.h>

#include <algorithm>
#include <condition_variable>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "rpcie/event_fd.hpp"
#include "worker.hpp"

namespace rpcie::client {

namespace {
using Clock = LeaseKeeper::Clock;
// A keeper whose attachment resumes, or whose socket someone else holds, is looked at again
// after this.
constexpr auto kRecheck = std::chrono::milliseconds(50);
// The longest sleep with nothing due (without an eventfd to end it: kSliceNoWake).
constexpr auto kSlice = std::chrono::seconds(60);
constexpr auto kSliceNoWake = std::chrono::seconds(1);

Error heartbeat_lost(const std::string& why) {
  return Error{ErrorDomain::posix, ENOTCONN, "exporter lost (heartbeat): " + why};
}
}  // namespace

// The process's heartbeat thread and the keepers it serves (lease_keeper.hpp).
class LeaseHub {
 public:
  LeaseHub() {
    worker_.start("rpcie-lease", [this] { run(); });
  }
  ~LeaseHub() {
    worker_.stop([this] { wake_.post(); });
  }
  LeaseHub(const LeaseHub&) = delete;
  LeaseHub& operator=(const LeaseHub&) = delete;

  // The process's hub, started with its first keeper; it ends with the last one's stop().
  static std::shared_ptr<LeaseHub> acquire() {
    static std::mutex lock;
    static std::weak_ptr<LeaseHub> current;
    std::lock_guard g(lock);
    auto hub = current.lock();
    if (!hub) {
      hub = std::make_shared<LeaseHub>();
      current = hub;
    }
    return hub;
  }

  void add(LeaseKeeper& k) {
    std::lock_guard g(lock_);
    k.next_due_ = Clock::now() + k.every_;
    keepers_.push_back(&k);
    wake_.post();
  }

  // Returns once the thread no longer uses `k`: at its next pass, or once the echo in flight
  // came or its deadline passed — within a lease and kIoBound, by construction of the pass.
  void remove(LeaseKeeper& k) {
    std::unique_lock g(lock_);
    if (std::find(keepers_.begin(), keepers_.end(), &k) == keepers_.end()) return;
    leaving_.push_back(&k);
    wake_.post();
    changed_.wait(g, [&] { return std::find(keepers_.begin(), keepers_.end(), &k) == keepers_.end(); });
  }

 private:
  struct Lost {
    LeaseKeeper* keeper;
    Error error;
  };

  void run();
  // Lets go of the leaving keepers that have no echo in flight.
  void leavers_release_locked();
  // Fills fds_/polled_ with what to watch and returns when the thread must wake at the latest.
  Clock::time_point watch_locked(Clock::time_point now);
  // After the poll: echoes, hang-ups, echo deadlines; then the heartbeats due, together.
  void pass_locked(Clock::time_point now, std::vector<Lost>& lost);
  static void echo_take(LeaseKeeper& k, std::vector<Lost>& lost);
  static void heartbeat_send(LeaseKeeper& k, Clock::time_point now, std::vector<Lost>& lost);
  bool leaving(const LeaseKeeper* k) const { return std::find(leaving_.begin(), leaving_.end(), k) != leaving_.end(); }

  std::mutex lock_;                  // everything below but the thread's own vectors
  std::condition_variable changed_;  // a keeper left the list
  std::vector<LeaseKeeper*> keepers_;
  std::vector<LeaseKeeper*> leaving_;  // remove() asked; still on keepers_
  EventFd wake_;                       // add(), remove() and the destructor post it: the poll ends
  std::vector<pollfd> fds_;            // the thread's: wake_, then one per polled_ keeper
  std::vector<LeaseKeeper*> polled_;
  Worker worker_;  // declared last: stopped (joined) before the members above go
};

void LeaseHub::run() {
  std::vector<Lost> lost;
  std::unique_lock g(lock_);
  while (!worker_.stopping()) {
    leavers_release_locked();
    const auto wake_at = watch_locked(Clock::now());
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake_at - Clock::now()).count();
    g.unlock();
    (void)::poll(fds_.data(), fds_.size(), static_cast<int>(std::clamp<long long>(ms, 0, 60'000)));
    wake_.drain();
    g.lock();
    pass_locked(Clock::now(), lost);
    if (lost.empty()) continue;
    // Without the lock: a resume or a failure listener may call back into the attachment.
    // remove() waits meanwhile (a keeper leaves the list only at the top of a pass).
    g.unlock();
    for (auto& l : lost) l.keeper->router_.link_lost(l.error);
    lost.clear();
    g.lock();
  }
}

void LeaseHub::leavers_release_locked() {
  bool left = false;
  std::erase_if(leaving_, [&](LeaseKeeper* k) {
    if (k->echo_hold_.owns_lock()) return false;
    std::erase(keepers_, k);
    left = true;
    return true;
  });
  if (left) changed_.notify_all();
}

Clock::time_point LeaseHub::watch_locked(Clock::time_point now) {
  auto wake_at = now + (wake_ ? Clock::duration(kSlice) : Clock::duration(kSliceNoWake));
  fds_.assign(1, pollfd{wake_.fd(), POLLIN, 0});
  polled_.clear();
  for (auto* k : keepers_) {
    int fd = -1;
    if (k->echo_hold_.owns_lock()) {
      // An echo is awaited, failed attachment, resume or leaving keeper alike: its socket is
      // held until the echo comes or its deadline passes.
      fd = k->socket_->fd();
      wake_at = std::min(wake_at, k->echo_by_);
    } else if (leaving(k) || k->router_.failure()) {
      continue;
    } else if (k->router_.resuming()) {
      // The resume brings a new connection (socket_set); the old one may poll as hung up.
      k->next_due_ = now + k->every_;
      wake_at = std::min(wake_at, now + kRecheck);
      continue;
    } else {
      std::unique_lock sl(k->socket_lock_, std::try_to_lock);
      if (!sl) {
        wake_at = std::min(wake_at, now + kRecheck);
        continue;
      }
      fd = k->socket_->fd();
      wake_at = std::min(wake_at, k->next_due_);
    }
    // Between heartbeats the exporter sends nothing on this connection: readable, or an
    // error or a hang-up, means it died (a reset: a cut link).
    fds_.push_back(pollfd{fd, POLLIN | POLLRDHUP, 0});
    polled_.push_back(k);
  }
  return wake_at;
}

void LeaseHub::pass_locked(Clock::time_point now, std::vector<Lost>& lost) {
  for (std::size_t i = 0; i < polled_.size(); ++i) {
    LeaseKeeper& k = *polled_[i];
    const bool readable = fds_[i + 1].revents != 0;
    if (k.echo_hold_.owns_lock()) {
      if (readable) {
        echo_take(k, lost);
      } else if (now >= k.echo_by_) {
        k.echo_hold_.unlock();
        lost.push_back({&k, heartbeat_lost("no echo within the lease")});
      }
    } else if (readable) {
      k.next_due_ = now;  // the heartbeat that finds out what happened goes at once
    }
  }
  // Everyone's heartbeats due soon go with the first one due: the keepers of one lease fall
  // into step, and the thread wakes once per interval for all of them.
  const auto sendable = [&](const LeaseKeeper* k) {
    return !k->echo_hold_.owns_lock() && !leaving(k) && !k->router_.failure() && !k->router_.resuming();
  };
  const bool due = std::any_of(keepers_.begin(), keepers_.end(),
                               [&](const LeaseKeeper* k) { return k->next_due_ <= now && sendable(k); });
  if (!due) return;
  for (auto* k : keepers_)
    if (k->next_due_ <= now + k->every_ / 4 && sendable(k)) heartbeat_send(*k, now, lost);
}

void LeaseHub::echo_take(LeaseKeeper& k, std::vector<Lost>& lost) {
  auto echo = k.socket_->message_recv(Deadline::after(LeaseKeeper::kIoBound));
  k.echo_hold_.unlock();
  if (!echo) {
    lost.push_back({&k, heartbeat_lost(echo.error().describe())});
    return;
  }
  if (!std::holds_alternative<proto::Heartbeat>(echo->decoded.message)) {
    lost.push_back({&k, heartbeat_lost(std::string("unexpected ") + proto::msg_type_name(echo->decoded.header.type))});
    return;
  }
  k.heartbeats_.fetch_add(1, std::memory_order_relaxed);
}

void LeaseHub::heartbeat_send(LeaseKeeper& k, Clock::time_point now, std::vector<Lost>& lost) {
  std::unique_lock sl(k.socket_lock_, std::try_to_lock);
  if (!sl) return;  // detach's goodbye or a resume has the socket: looked at again next pass
  k.next_due_ = now + k.every_;
  auto sent = k.socket_->message_send(proto::Heartbeat{++k.seq_}, 0, Deadline::after(LeaseKeeper::kIoBound));
  if (!sent) {
    lost.push_back({&k, heartbeat_lost(sent.error().describe())});
    return;
  }
  k.echo_hold_ = std::move(sl);
  k.echo_by_ = now + k.lease_;
}

// --- LeaseKeeper ---

std::chrono::milliseconds LeaseKeeper::interval(std::chrono::milliseconds lease) {
  return std::max(lease / 3, std::chrono::milliseconds(50));
}

LeaseKeeper::LeaseKeeper(Socket& socket, std::chrono::milliseconds lease, ReplyRouter& router)
    : socket_(&socket), lease_(lease), every_(interval(lease)), router_(router) {}

void LeaseKeeper::start() {
  hub_ = LeaseHub::acquire();
  hub_->add(*this);
}

void LeaseKeeper::stop() {
  if (!hub_) return;
  hub_->remove(*this);
  hub_.reset();  // the last keeper's stop ends the thread
}

void LeaseKeeper::socket_set(Socket& socket) {
  std::lock_guard sg(socket_lock_);
  socket_ = &socket;
}

}  // namespace rpcie::client
