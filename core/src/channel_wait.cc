// Channel's waiting policy: the idle poll's calibration, sleeping on the CQ wait fd or
// backing off, message_wait, progress_idle, and ProgressThread (rpcie/channel.hpp).
#include <poll.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "channel_wait.hpp"
#include "local_doorbell.hpp"

namespace rpcie {

void Channel::busy_poll_calibrate_locked() {
  // What an idle poll of this CQ costs, near its worst: four times the 99.9th percentile of
  // 2000 polls (nothing can be pending yet), at least 2 us and at most 50 us.
  constexpr std::size_t kPolls = 2000;
  std::vector<Deadline::Clock::duration> took(kPolls);
  for (auto& t : took) {
    auto t0 = Deadline::Clock::now();
    (void)poll_locked();
    t = Deadline::Clock::now() - t0;
  }
  std::nth_element(took.begin(), took.begin() + kPolls * 999 / 1000, took.end());
  busy_poll_ = std::clamp<Deadline::Clock::duration>(4 * took[kPolls * 999 / 1000], std::chrono::microseconds(2),
                                                     std::chrono::microseconds(50));
}

void Channel::wake() noexcept {
  if (fabric_->wait_fd() >= 0) (void)fi_cq_signal(fabric_->cq());
}

Result<void> Channel::progress() {
  std::lock_guard g(lock_);
  return poll_locked();
}

Result<void> Channel::post_retry_locked(std::optional<Deadline::Clock::time_point>& first_refusal) {
  // A full send queue drains within microseconds of polling: spin. A refusal that lasts is
  // rxm setting up its connection on first use, which waits for the peer's own progress; a
  // sender spinning meanwhile (a syscall per try) takes a CPU the peer may need. Seen under
  // strace on 2 cores: an exporter's first send refused for the whole 5 s of its deadline.
  constexpr auto kSpin = std::chrono::microseconds(200);
  constexpr auto kPause = std::chrono::microseconds(100);
  const auto now = Deadline::Clock::now();
  if (!first_refusal) first_refusal = now;
  RPCIE_TRY(poll_locked());
  if (now - *first_refusal > kSpin) std::this_thread::sleep_for(kPause);
  return {};
}

bool Channel::idle_sleep(Deadline deadline, int& idle_round, const std::function<bool()>& recheck) {
  // Called without the lock. Sleep on the CQ wait fd when the provider has one; otherwise
  // back off exponentially up to backoff_max, asleep on the fabric's doorbell where it has
  // one. Returns true when it saw work pending.
  if (fabric_->wait_fd() >= 0) {
    if (!fabric_->cq_trywait()) return true;
    // fi_trywait resets the fd's signal: a wake() that came before it is gone, and only the
    // condition its caller set first (wake()'s contract) says it came. Looked at after the
    // trywait, no wake-up is lost, and an idle waiter needs no short slices to find one
    // (each slice a wake-up: 50 a second per attachment, docs/performance.md "Scaling").
    if (recheck()) return true;
    // The long sleep only once the channel has been quiet a while: with data in flight the
    // wait fd has been known to miss an event (rxm's large messages, tcp's RMA: libfabric
    // issues 4247, 3219), and the short cap bounds what such a miss costs.
    const auto quiet_since = Deadline::Clock::time_point(Deadline::Clock::duration(warm_until_.load()));
    const int cap = Deadline::Clock::now() < quiet_since + kWaitFdBusyWindow ? kWaitFdSliceBusyMs : kWaitFdSliceMaxMs;
    pollfd p{fabric_->wait_fd(), POLLIN, 0};
    return ::poll(&p, 1, std::min(deadline.remaining_ms(), cap)) > 0;
  }
  // Sleeps this short mean nothing with the default timer slack (50 us added to each).
  thread_local const bool slack_set = ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0) == 0;
  (void)slack_set;
  auto sleep = std::chrono::microseconds(1) * (1 << std::min(idle_round, 16));
  const bool warm = Deadline::Clock::now().time_since_epoch().count() < warm_until_.load(std::memory_order_relaxed);
  sleep = std::min(sleep, warm ? options_.backoff_warm : options_.backoff_max);
  sleep = std::min(sleep, std::chrono::duration_cast<std::chrono::microseconds>(deadline.remaining()));
  ++idle_round;
  if (auto* bell = fabric_->doorbell()) {
    // Announce, look once more, then sleep on the doorbell, which the peer rings after each
    // post: work that needs this side's progress (a small RMA write aimed at it, a message)
    // then waits for a wake-up rather than for the end of the back-off.
    const auto word = bell->sleep_announce();
    bool work;
    {
      std::lock_guard g(lock_);
      const auto before = completions_;
      work = !poll_locked() || completions_ != before;  // a failure is the caller's to see
    }
    const bool rung = !work && bell->sleep(word, sleep);
    bell->sleep_end();
    return work || rung;
  }
  std::this_thread::sleep_for(sleep);
  return false;
}

Result<bool> Channel::message_wait(Deadline deadline, const std::function<bool()>& cancel, bool spin) {
  Deadline::Clock::time_point spin_end{Deadline::Clock::duration(activity_until_.load(std::memory_order_relaxed))};
  if (!spin) spin_end = std::min(spin_end, Deadline::Clock::now() + kBackgroundSpin);
  bool cancelled = false;
  auto ready = [&] {
    if (message_ready_locked()) return true;
    cancelled = cancel && cancel();
    return cancelled;
  };
  auto r = poll_until(ready, deadline, spin_end, true,
                      spin ? std::nullopt : std::optional<std::chrono::microseconds>(kBackgroundSpin));
  if (!r) return tl::unexpected(r.error());
  if (*r && !cancelled) {
    // A message is activity: the caller handles it and comes back for the next one, which
    // in a request stream is close behind. Keep spinning for that one (a background
    // receiver only briefly).
    activity_until_.store(
        (Deadline::Clock::now() + (spin ? options_.spin : kBackgroundSpin)).time_since_epoch().count(),
        std::memory_order_relaxed);
    idle_round_.store(0, std::memory_order_relaxed);
    warm_extend(Deadline::Clock::now());
    return true;
  }
  return false;
}

Result<void> Channel::progress_idle(Deadline deadline) {
  // Carry the spin window over from the previous call: a ProgressThread calls this in short
  // slices, and restarting the spin each time would keep an idle thread spinning.
  Deadline::Clock::time_point spin_end{Deadline::Clock::duration(activity_until_.load(std::memory_order_relaxed))};
  auto r = poll_until([] { return false; }, deadline, spin_end, true);
  if (!r) return tl::unexpected(r.error());
  return {};
}

// --- ProgressThread ---

struct ProgressThread::State {
  Channel& channel;
  std::atomic<bool> stop{false};
  std::thread thread;
  explicit State(Channel& c) : channel(c) {}
};

ProgressThread::ProgressThread(Channel& channel) : state_(std::make_unique<State>(channel)) {
  state_->thread = std::thread([s = state_.get()] {
    while (!s->stop.load(std::memory_order_relaxed)) {
      // Short slices so that stop is noticed promptly; a failed channel has nothing left
      // to progress, so the thread just idles until it is stopped.
      auto r = s->channel.progress_idle(Deadline::after(std::chrono::milliseconds(20)));
      if (!r) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

ProgressThread::~ProgressThread() {
  state_->stop = true;
  state_->thread.join();
}

}  // namespace rpcie
