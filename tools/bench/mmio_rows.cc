#include "mmio_rows.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace rpcie::bench {

CommandChild::~CommandChild() {
  if (to_ >= 0) ::close(to_);  // end of input: the child leaves its loop
  if (from_ >= 0) ::close(from_);
  if (pid_ <= 0) return;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

Result<void> CommandChild::start(const std::vector<std::string>& argv, int cpu) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return fail(errno, "pipe");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    return fail(errno, "pipe");
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) return fail(errno, "fork");
  if (pid_ == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    // Nothing else of the bench (its fabric sockets and event descriptors) goes along.
    ::syscall(SYS_close_range, 3L, ~0L, 0L);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ::sched_setaffinity(0, sizeof set, &set);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_ = in[1];
  from_ = out[0];
  return {};
}

Result<void> CommandChild::open(const std::string& device_dir) {
  RPCIE_TRY(answer("open " + device_dir + "\n"));
  return {};
}

Result<void> CommandChild::scratch_open(const std::string& device_dir) {
  RPCIE_TRY(answer("scratch " + device_dir + "\n"));
  return {};
}

Result<double> CommandChild::run(const std::string& workload, std::size_t operations,
                                 std::vector<double>& operation_seconds) {
  RPCIE_TRY_ASSIGN(const std::string line, answer(workload + " " + std::to_string(operations) + "\n"));
  RPCIE_TRY_ASSIGN(const std::string each, bytes_read(operations * sizeof(float), workload));
  for (std::size_t i = 0; i < operations; ++i) {
    float seconds = 0;
    std::memcpy(&seconds, each.data() + i * sizeof(float), sizeof(float));
    operation_seconds.push_back(seconds);
  }
  return std::strtod(line.c_str(), nullptr);
}

Result<void> CommandChild::more_read(std::string& into, std::size_t most, Clock::time_point deadline,
                                     const std::string& waiting_for) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  pollfd p{from_, POLLIN, 0};
  if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
    return fail(ETIMEDOUT, "rpcie-bench-mmio: no " + waiting_for);
  char buffer[65536];
  const ssize_t n = ::read(from_, buffer, std::min(sizeof buffer, most));
  if (n <= 0) return fail(EIO, "rpcie-bench-mmio ended while waiting for " + waiting_for);
  into.append(buffer, static_cast<std::size_t>(n));
  return {};
}

Result<std::string> CommandChild::bytes_read(std::size_t length, const std::string& workload) {
  std::string bytes = std::move(rest_);
  rest_.clear();
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (bytes.size() < length) RPCIE_TRY(more_read(bytes, length - bytes.size(), deadline, "samples for " + workload));
  if (bytes.size() > length) return fail(EPROTO, "rpcie-bench-mmio: more samples than operations");
  return bytes;
}

// Sends one command line and returns the answer line; EIO for "error ...", ETIMEDOUT after 60 s.
Result<std::string> CommandChild::answer(const std::string& command) {
  const std::string workload = command.substr(0, command.find(' '));
  if (::write(to_, command.data(), command.size()) != static_cast<ssize_t>(command.size()))
    return fail(errno, "rpcie-bench-mmio: send command");
  std::string line;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (line.find('\n') == std::string::npos) RPCIE_TRY(more_read(line, 256, deadline, "answer to " + workload));
  rest_ = line.substr(line.find('\n') + 1);  // what came after the line: samples
  line.resize(line.find('\n'));
  if (line.rfind("error ", 0) == 0) return fail(EIO, "rpcie-bench-mmio: " + line.substr(6));
  return line;
}

std::vector<Workload> mmio_workloads(CommandChild& mapped, CommandChild& plain) {
  auto in = [](CommandChild& child, const char* workload) {
    return slice_run_sampled([&child, workload](std::size_t operations, std::vector<double>& samples) {
      return child.run(workload, operations, samples);
    });
  };
  std::vector<Workload> rows;
  rows.push_back({.name = "map_load",
                  .size = 4,
                  .unit = Unit::microseconds,
                  .warmup_operations = 16,
                  .baseline = in(mapped, "pread_load"),
                  .subject = in(mapped, "map_load"),
                  .baseline_is = "pread",
                  .subject_is = "mmap"});
  rows.push_back({.name = "map_store",
                  .size = 4,
                  .unit = Unit::microseconds,
                  .warmup_operations = 16,
                  .baseline = in(plain, "fault_floor"),
                  .subject = in(mapped, "map_store"),
                  .baseline_is = "fault floor",
                  .subject_is = "mmap"});
  rows.push_back({.name = "map_burst",
                  .size = 1000,
                  .unit = Unit::microseconds,
                  .warmup_operations = 2,
                  .baseline = in(mapped, "pwrite_burst"),
                  .subject = in(mapped, "map_burst"),
                  .baseline_is = "pwrite",
                  .subject_is = "mmap"});
  rows.push_back({.name = "map_memcpy",
                  .size = 4096,
                  .unit = Unit::microseconds,
                  .warmup_operations = 2,
                  .baseline = in(mapped, "pwrite_memcpy"),
                  .subject = in(mapped, "map_memcpy"),
                  .baseline_is = "pwrite",
                  .subject_is = "mmap"});
  rows.push_back({.name = "plain",
                  .size = 0,
                  .unit = Unit::microseconds,
                  .warmup_operations = 64,
                  .baseline = in(plain, "plain"),
                  .subject = in(mapped, "plain"),
                  .baseline_is = "alone",
                  .subject_is = "run"});
  return rows;
}

}  // namespace rpcie::bench
