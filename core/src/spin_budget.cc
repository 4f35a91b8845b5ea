// The process-wide spin budget (spin_budget.hpp).
#include "spin_budget.hpp"

#include "rpcie/log.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace rpcie {
namespace {

std::atomic<int> spinning{0};

}  // namespace

int spin_budget_from(const char* env, int cpus, bool* env_ignored, Spinner kind) noexcept {
  if (env_ignored) *env_ignored = false;
  if (env != nullptr) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && errno == 0 && n >= 0 && n <= 4096) return static_cast<int>(n);
    if (env_ignored) *env_ignored = true;
  }
  // Less one CPU for spinners that hold theirs: the threads that do the work a spinner
  // waits for (a device's handler, a FUSE request, the peer daemon on a shared machine)
  // need one to run on. A yielding spinner hands its CPU to them when they want it.
  return std::max(1, kind == Spinner::yielding ? cpus : cpus - 1);
}

int spin_budget(Spinner kind) noexcept {
  struct Budgets {
    int steady;
    int yielding;
  };
  static const Budgets budgets = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    const int cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    const char* env = std::getenv("RPCIE_SPIN_THREADS");
    bool ignored = false;
    const Budgets b{spin_budget_from(env, cpus, &ignored), spin_budget_from(env, cpus, nullptr, Spinner::yielding)};
    if (ignored)
      RPCIE_LOG_WARN("core",
                     "RPCIE_SPIN_THREADS='{}' is not a whole number from 0 to 4096: ignored, {} spinning thread(s), "
                     "{} where they yield while contended",
                     log_escape(env), b.steady, b.yielding);
    return b;
  }();
  return kind == Spinner::yielding ? budgets.yielding : budgets.steady;
}

bool SpinSlot::take(Spinner kind) noexcept {
  if (held_) return true;
  const int budget = spin_budget(kind);
  int n = spinning.load(std::memory_order_relaxed);
  while (n < budget) {
    if (spinning.compare_exchange_weak(n, n + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
      held_ = true;
      return true;
    }
  }
  return false;
}

void SpinSlot::release() noexcept {
  if (!held_) return;
  spinning.fetch_sub(1, std::memory_order_release);
  held_ = false;
}

}  // namespace rpcie
