// How a spinning thread shares its CPU (private to core/src): it yields after every poll
// while the scheduler keeps taking its CPU for other threads, and spins without a system
// call otherwise.
//
// Why: a thread that busy-polls a CQ holds its CPU until a tick or a wake-up preempts it,
// and the threads that do the work it waits for (the caller's reader, a FUSE request, a
// second device's receiver, the peer daemon on the same host) queue behind it. On 2 CPUs,
// with hostd and rpcie-exportd each spinning for one device, two devices together read at a
// quarter of what one did (scripts/bench-scaling: ~33,000 reads/s for one, ~8,000 for two).
// A sched_yield() after each poll hands the CPU to a thread that waits for it, and returns
// at once when none does, but costs a system call per poll (shm's MMIO read: 1.8 -> 2.3 us
// at the median when every poll yields), so a spinner yields only while it is contended.
//
// It tells from its own involuntary context switches (getrusage RUSAGE_THREAD), read at
// most once per kProbeEvery of spinning: when kContendedLooks looks in a row each find a
// new one, other threads keep wanting this CPU, and the thread yields after every poll until
// kQuietFor has passed without that. One preemption (a kernel worker, a timer) does not
// start it. A yield that handed the CPU over counts as an involuntary switch too, so
// lasting contention keeps the thread yielding.
//
// Channels whose ChannelOptions::yield_when_contended is set (the daemons') use it: an
// application's spinner that yielded to its own process's other thread waited behind it
// (docs/performance.md, "A spinner that yields while contended").
//
// Thread-safety: a SpinYield belongs to one thread. Errors: none (when getrusage fails the
// thread spins without yielding).
#pragma once

#include <chrono>
#include <cstdint>

namespace rpcie {

class SpinYield {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kProbeEvery = std::chrono::microseconds(50);
  static constexpr int kContendedLooks = 2;
  static constexpr auto kQuietFor = std::chrono::milliseconds(2);

  // The calling thread's state: it carries from one wait to the next, as contention does.
  static SpinYield& this_thread() noexcept;

  // After a poll that found nothing, before the next, at `now`: yields the CPU when
  // contended. True when it yielded (the caller's clock reading is stale then).
  bool after_poll(Clock::time_point now) noexcept;
  // How often after_poll() yielded on this thread.
  std::uint64_t yields() const noexcept { return yields_; }

  // The rule, with the thread's involuntary context switches so far given by `switches`
  // (called at most once per kProbeEvery; negative when it cannot tell): whether to yield
  // at `now`.
  template <class Switches>
  bool contended(Clock::time_point now, Switches&& switches) noexcept {
    if (now >= next_probe_) {
      next_probe_ = now + kProbeEvery;
      const long n = switches();
      if (seen_ >= 0 && n > seen_) {  // a failed read (-1) is never more than a count
        if (++looks_ >= kContendedLooks) yield_until_ = now + kQuietFor;
      } else {
        looks_ = 0;
      }
      seen_ = n;
    }
    return now < yield_until_;
  }

 private:
  Clock::time_point next_probe_{};
  Clock::time_point yield_until_{};
  long seen_ = -1;  // switches at the last look; -1: none yet
  int looks_ = 0;   // looks in a row that found a new switch
  std::uint64_t yields_ = 0;
};

}  // namespace rpcie
