// rpcie-bench --frontend's mapped-BAR rows (issue 11): a program under `rpcie run`
// (rpcie-bench-mmio) loads and stores edu's registers through a mapping of resource0, beside
// the same accesses by pread/pwrite of the file, in the same process:
//   map_load    4 B register load through the mapping          vs a 4 B pread        (us)
//   map_burst   1000 register stores and one load (mapping)    vs pwrite x1000+pread (us)
//   map_memcpy  memcpy of 4 KiB into membar's scratch BAR4 and one load (mapping)
//                                                              vs 512 8 B pwrites+pread (us)
//   plain       open/fstat/close + mmap/munmap, under rpcie run vs without it         (us)
// The program times each operation too (percentiles of single operations).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "driver.hpp"
#include "rpcie/result.hpp"

namespace rpcie::bench {

// A program answering "WORKLOAD OPERATIONS" lines with the seconds they took. The destructor
// ends it (closes its input; SIGKILL if it has not exited within 2 s).
class CommandChild {
 public:
  CommandChild() = default;
  CommandChild(const CommandChild&) = delete;
  CommandChild& operator=(const CommandChild&) = delete;
  ~CommandChild();
  // Starts argv pinned to `cpu`.
  Result<void> start(const std::vector<std::string>& argv, int cpu);
  // Has the program open EDU_DEVICE_DIR's resource0 (its first command).
  Result<void> open(const std::string& device_dir);
  // Has the program open and map MEMBAR_DEVICE_DIR's resource4 (a membar,scratch=on).
  Result<void> scratch_open(const std::string& device_dir);
  // Seconds `operations` of `workload` took, and the seconds of each appended to
  // `operation_seconds`; EIO with the child's message if it failed, ETIMEDOUT after 60 s.
  Result<double> run(const std::string& workload, std::size_t operations, std::vector<double>& operation_seconds);

 private:
  // Sends `command`; returns the answer line. Bytes read past its newline stay in `rest_`.
  Result<std::string> answer(const std::string& command);
  // `length` bytes of what follows the answer line (rest_ first), within 60 s.
  Result<std::string> bytes_read(std::size_t length, const std::string& workload);
  // Appends what the child wrote (at most `most` bytes), waiting until `deadline`
  // (ETIMEDOUT, naming `waiting_for`); EIO once the child is gone.
  using Clock = std::chrono::steady_clock;
  Result<void> more_read(std::string& into, std::size_t most, Clock::time_point deadline,
                         const std::string& waiting_for);
  std::string rest_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

// The rows above: `mapped` runs under rpcie run, `plain` without it.
std::vector<Workload> mmio_workloads(CommandChild& mapped, CommandChild& plain);

}  // namespace rpcie::bench
