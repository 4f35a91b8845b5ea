// How a Channel waits (private to core/src): poll_until and wait_until, the templates
// behind every wait — busy-poll while data moves, then sleep on the CQ wait fd or back off —
// defined here because channel.cc and channel_wait.cc both instantiate them. The rest of
// the waiting policy (idle_sleep, message_wait, progress_idle, ProgressThread) is in
// channel_wait.cc; contract in rpcie/channel.hpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "rpcie/channel.hpp"
#include "spin_budget.hpp"
#include "spin_yield.hpp"

namespace rpcie {

template <class Ready>
Result<bool> Channel::poll_until(Ready&& ready, Deadline deadline, Deadline::Clock::time_point spin_end, bool carry,
                                 std::optional<std::chrono::microseconds> spin_for) {
  // Busy-poll while there is activity within the last options_.spin; sleep otherwise.
  // Activity is a completion, the wait fd reporting work, or a slow poll: with manual
  // progress the provider moves data inside fi_cq_read, so a transfer in flight (a large
  // write being pushed out, a peer's reads and writes streaming through a pure RMA target)
  // keeps the poller busy before any completion is due, and backing off would stall the
  // transfer itself. "Slow" is relative to what an idle poll of this CQ costs (busy_poll_,
  // calibrated at creation: tcp's idle fi_cq_read takes 0.35 us at the median but over 4 us
  // once in a thousand); a poll longer than kBusyPollMax was preempted, not busy.
  //
  // A slow poll is often a cold cache after a sleep, or a vCPU the hypervisor took away
  // for a moment, not data: taken as activity it restarted or prolonged the full spin of
  // idle threads (3-30 % of a core on a loaded VM). So a slow poll only keeps the thread
  // spinning for kProbation more; only a completion (or the wait fd) buys the full spin.
  // A pure RMA target (no completions of its own) stays awake that way while its peer
  // streams: the next request arrives within microseconds of the last one served.
  //
  // A background receiver (spin_for given) counts only the messages it receives: the
  // completions of sends that other threads post (a stream of posted writes) are not work
  // for it, and spinning on them, on a CPU the sender may share, takes the sender's time.
  constexpr auto kBusyPollMax = std::chrono::microseconds(200);
  const bool background = spin_for.has_value();
  const auto spin = spin_for.value_or(options_.spin);
  const auto probation = std::min<std::chrono::microseconds>(std::chrono::microseconds(100), spin);
  std::uint64_t seen = 0;
  int idle_round = carry ? idle_round_.load(std::memory_order_relaxed) : 0;
  // One clock read per poll: a poll's start is the previous poll's end (a spinning thread
  // that read the clock twice per poll spent a fifth of its time there, seen with perf on shm).
  auto t0 = Deadline::Clock::now();
  // Spinning takes one of the process's spin slots; a thread that finds none free sleeps as
  // an idle one does, and is woken by the wait fd or its peer's doorbell (spin_budget.hpp).
  SpinSlot slot;
  // The first poll after a long sleep finds cold caches (and a vCPU just woken): its
  // slowness says nothing about data moving. Taken as activity, every idle wake-up of an
  // exporter's data thread spun ~150 polls on probation (docs/performance.md, "Scaling").
  constexpr auto kColdAfter = std::chrono::milliseconds(1);
  bool cold = false;
  // A daemon's spinner that keeps being preempted yields after each poll: the threads that
  // want its CPU are often the ones doing the work it waits for (spin_yield.hpp).
  SpinYield* spin_yield = options_.yield_when_contended ? &SpinYield::this_thread() : nullptr;
  for (bool first = true;; first = false) {
    std::uint64_t completions;
    {
      std::lock_guard g(lock_);
      auto r = poll_locked();
      if (!r) return tl::unexpected(r.error());
      if (ready()) return true;
      completions = background ? stats_.messages_received : completions_;
    }
    auto now = Deadline::Clock::now();
    const auto took = now - t0;
    const bool slow = !background && !cold && took > busy_poll_ && took < kBusyPollMax;
    cold = false;
    if (first) {
      seen = completions;
    } else if (completions != seen) {
      seen = completions;
      spin_end = now + spin;
      idle_round = 0;
      warm_extend(now);
    } else if (slow) {
      // The back-off restarts only for a slow poll while already awake (data moving): an
      // isolated one after a sleep would otherwise shorten the next sleeps, make their
      // polls cold and slow in turn, and keep an idle thread busy.
      if (now < spin_end) idle_round = 0;
      spin_end = std::max(spin_end, now + probation);
    }
    if (now >= deadline.when()) break;
    t0 = now;
    if (now < spin_end && slot.take(spin_yield ? Spinner::yielding : Spinner::steady)) {
      if (spin_yield && spin_yield->after_poll(now)) t0 = Deadline::Clock::now();
      continue;
    }
    slot.release();
    const auto recheck = [&] {
      std::lock_guard g(lock_);
      return aborted_.load() || ready();
    };
    if (idle_sleep(deadline, idle_round, recheck)) spin_end = Deadline::Clock::now() + spin;
    t0 = Deadline::Clock::now();
    cold = t0 - now > kColdAfter;
  }
  activity_until_.store(spin_end.time_since_epoch().count(), std::memory_order_relaxed);
  if (carry) idle_round_.store(idle_round, std::memory_order_relaxed);
  return false;
}

template <class Ready>
Result<void> Channel::wait_until(Ready&& ready, Deadline deadline, const char* what) {
  // A new wait starts with a spin: what it waits for is usually close.
  auto r = poll_until(std::forward<Ready>(ready), deadline, Deadline::Clock::now() + options_.spin);
  if (!r) return tl::unexpected(r.error());
  if (!*r) return fail(ETIMEDOUT, std::string("deadline passed waiting for ") + what);
  return {};
}

}  // namespace rpcie
