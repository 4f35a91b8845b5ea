#include "rpcie/thread_sched.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace rpcie {

namespace {

// struct sched_attr of sched_setattr(2), first version (glibc 2.36 has no wrapper for it).
struct SchedAttr {
  std::uint32_t size = sizeof(SchedAttr);
  std::uint32_t policy = SCHED_OTHER;
  std::uint64_t flags = 0;
  std::int32_t nice = 0;
  std::uint32_t priority = 0;
  std::uint64_t runtime = 0;  // SCHED_OTHER: the time slice in ns (Linux 6.12+; 0: the default)
  std::uint64_t deadline = 0;
  std::uint64_t period = 0;
};

}  // namespace

void thread_name(const char* name) noexcept { (void)::prctl(PR_SET_NAME, name); }

Result<void> thread_background() {
  sched_param none{};
  if (::sched_setscheduler(0, SCHED_BATCH, &none) != 0) return fail(errno, "SCHED_BATCH for a background thread");
  return {};
}

Result<void> thread_responsive(int nice) {
  if (nice < -20 || nice > 19) return fail(EINVAL, "nice " + std::to_string(nice) + " is not from -20 to 19");
  SchedAttr attr;
  attr.nice = nice;
  attr.runtime = static_cast<std::uint64_t>(std::chrono::nanoseconds(kResponsiveSlice).count());
  int rc = static_cast<int>(::syscall(SYS_sched_setattr, 0, &attr, 0));
  if (rc != 0 && errno == EINVAL) {
    // A kernel that refuses a slice for SCHED_OTHER still takes the nice value.
    attr.runtime = 0;
    rc = static_cast<int>(::syscall(SYS_sched_setattr, 0, &attr, 0));
  }
  if (rc != 0) return fail(errno == EPERM ? EACCES : errno, "nice " + std::to_string(nice) + " for a data thread");
  return {};
}

}  // namespace rpcie
