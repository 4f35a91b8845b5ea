// A spinner that yields while contended (spin_yield.hpp).
#include "spin_yield.hpp"

#include <sched.h>
#include <sys/resource.h>

namespace rpcie {

SpinYield& SpinYield::this_thread() noexcept {
  thread_local SpinYield state;
  return state;
}

bool SpinYield::after_poll(Clock::time_point now) noexcept {
  const bool yield = contended(now, [] {
    rusage u{};
    return ::getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nivcsw : -1L;
  });
  if (yield) {
    ::sched_yield();
    ++yields_;
  }
  return yield;
}

}  // namespace rpcie
