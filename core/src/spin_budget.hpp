// How many threads of this process may busy-poll a CQ at once (private to core/src): the
// CPUs the process may run on, less one, at least one; RPCIE_SPIN_THREADS=N (0 to 4096)
// sets it instead (0: no thread spins, every wait sleeps; a value that is not such a number
// is ignored). Spinners that yield while contended (SpinYield: the daemons') may use every
// CPU instead: they give way to the threads doing the work, which is what the CPU left over
// was for (on 2 CPUs, two devices read at 27,500-30,000 reads/s with a spinner per CPU in
// each daemon, 21,300-24,800 with one: docs/performance.md, "A spinner that yields while
// contended"). Every Channel of the process shares the budget, so a daemon with many
// attachments never has more spinning threads than it has CPUs to spin on: past the budget,
// a waiter sleeps on its CQ wait fd (or backs off) and is woken by the provider, instead of
// taking a CPU from the threads doing the work. Without it, on 2 CPUs, two attachments of
// one exporter, each with a request thread spinning 2 ms after every request, cut two
// readers' MMIO reads/s to 3,400 where one reader of one device made 13,800.
//
// Thread-safety: a SpinSlot belongs to the thread that created it; the count is atomic.
#pragma once

namespace rpcie {

// What kind of thread spins: one that holds its CPU whatever else wants it (an
// application's), or one that yields while contended (ChannelOptions::yield_when_contended).
enum class Spinner { steady, yielding };

class SpinSlot {
 public:
  SpinSlot() = default;
  ~SpinSlot() { release(); }
  SpinSlot(const SpinSlot&) = delete;
  SpinSlot& operator=(const SpinSlot&) = delete;

  // True when this thread may spin: it holds a slot already, or took a free one (fewer are
  // taken in all than `kind`'s budget).
  bool take(Spinner kind = Spinner::steady) noexcept;
  // Gives the slot back (before sleeping); harmless when none is held.
  void release() noexcept;

 private:
  bool held_ = false;
};

// The budget of `kind`: fixed at first use, from RPCIE_SPIN_THREADS and sched_getaffinity.
int spin_budget(Spinner kind = Spinner::steady) noexcept;
// The rule behind it: `env` (RPCIE_SPIN_THREADS, nullptr when unset) when it is a whole
// number from 0 to 4096, else `cpus` less one for steady spinners and `cpus` for yielding
// ones, at least one; `env_ignored` (if given) tells whether `env` was set but not such a
// number (spin_budget() logs a warning then).
int spin_budget_from(const char* env, int cpus, bool* env_ignored = nullptr, Spinner kind = Spinner::steady) noexcept;

}  // namespace rpcie
