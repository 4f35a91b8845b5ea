#include "common.hpp"

#include <sched.h>

#include "rpcie/log.hpp"

namespace rpcie::tools {

bool cpu_pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    RPCIE_LOG_WARN("tools", "cannot pin to cpu {}", cpu);
    return false;
  }
  return true;
}

}  // namespace rpcie::tools
