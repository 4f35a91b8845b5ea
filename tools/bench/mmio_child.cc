// rpcie-bench-mmio: the program rpcie-bench --frontend drives for its mapped-BAR rows. It runs
// under `rpcie run` (and, for the `plain` row's baseline, without), reads commands
// "WORKLOAD OPERATIONS" on stdin and answers the seconds they took ("error TEXT" if one
// failed), one line each, until end of input. After a line of seconds come the seconds of
// each operation, OPERATIONS native `float`s (binary: one clock read per operation).
//   rpcie-bench-mmio
// The first command is "open EDU_DEVICE_DIR" (answered "0"): the bench starts this program
// before it opens its own fabric endpoints, so that no fork copies them. "scratch
// MEMBAR_DEVICE_DIR" (answered "0") opens the register BAR resource4 of a membar,scratch=on.
// Workloads, on edu's liveness register (BAR0 0x04, 4 bytes):
//   map_load / pread_load      one load through the mapping / one 4-byte pread of resource0
//   map_burst / pwrite_burst   1000 stores then one load, through the mapping / by pwrite and pread
// and on membar's scratch BAR4 (plain registers, after "scratch"):
//   map_memcpy / pwrite_memcpy glibc memcpy of 4 KiB into the mapping / 512 8-byte pwrites
//                              of resource4 (a register file takes one access per call),
//                              then one 4-byte load (mapping / pread) so that every store
//                              was performed
//   map_store / fault_floor    one posted 4-byte store through the mapping (liveness) / the
//                              least any trap-and-emulate pays per access: a SIGSEGV on a
//                              PROT_NONE page of this program's own, answered by its own
//                              handler that skips the hand-decoded 7-byte MOV (no decoder,
//                              no device); fault_floor runs without `rpcie run`
//   plain                      what a program does that never touches a BAR: open, fstat,
//                              close of /proc/self/stat and an anonymous mmap/munmap
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::uint64_t kLiveness = 0x04;
constexpr int kBurst = 1000;
constexpr std::size_t kCopy = 4096;

// glibc's memcpy, through a pointer the compiler cannot see through (no inlined copy).
void* (*volatile copy)(void*, const void*, std::size_t) = std::memcpy;

int bar_fd = -1;
volatile std::uint8_t* bar = nullptr;
int scratch_fd = -1;
std::uint8_t* scratch = nullptr;  // a mapping of resource4: every access is trapped
std::uint8_t copy_source[kCopy];

// The bytes stored by operation `i`: its first four bytes say which operation it was.
void copy_source_fill(std::uint32_t i) {
  for (std::size_t k = 0; k < kCopy; ++k) copy_source[k] = static_cast<std::uint8_t>(k * 7 + 1);
  std::memcpy(copy_source, &i, sizeof i);
}

bool map_memcpy(std::uint32_t i) {
  copy_source_fill(i);
  copy(scratch, copy_source, kCopy);
  return *reinterpret_cast<volatile std::uint32_t*>(scratch) == i;
}

// A register file takes one access per pwrite (at most 8 bytes): 512 of them.
bool pwrite_memcpy(std::uint32_t i) {
  copy_source_fill(i);
  for (std::size_t at = 0; at < kCopy; at += 8)
    if (pwrite(scratch_fd, copy_source + at, 8, static_cast<off_t>(at)) != 8) return false;
  std::uint32_t v = 0;
  return pread(scratch_fd, &v, 4, 0) == 4 && v == i;
}

// fault_floor: `movl $imm32, 4(%reg)` is C7 /0 disp8 imm32, 7 bytes with a legacy register.
constexpr long kFloorMovLength = 7;
volatile std::uint8_t* floor_page = nullptr;

void floor_skip(int, siginfo_t*, void* context) {
  static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP] += kFloorMovLength;
}

bool fault_floor() {
  if (floor_page == nullptr) {
    struct sigaction sa {};
    sa.sa_sigaction = floor_skip;
    sa.sa_flags = SA_SIGINFO;
    void* p = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || sigaction(SIGSEGV, &sa, nullptr) != 0) return false;
    floor_page = static_cast<volatile std::uint8_t*>(p);
  }
  // "a" (rax): no REX prefix, so the instruction is exactly kFloorMovLength bytes.
  __asm__ volatile("movl $1, 4(%0)" : : "a"(floor_page) : "memory");
  return true;
}

bool bar_map() {
  if (bar != nullptr) return true;
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, bar_fd, 0);
  if (p == MAP_FAILED) return false;
  bar = static_cast<volatile std::uint8_t*>(p);
  return true;
}

volatile std::uint32_t& liveness() { return *reinterpret_cast<volatile std::uint32_t*>(bar + kLiveness); }

bool pread_load() {
  std::uint32_t v = 0;
  return pread(bar_fd, &v, 4, kLiveness) == 4;
}

bool pwrite_store(std::uint32_t v) { return pwrite(bar_fd, &v, 4, kLiveness) == 4; }

bool plain() {
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool ok = fstat(fd, &st) == 0;
  close(fd);
  void* p = mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  static_cast<volatile char*>(p)[0] = 1;
  return munmap(p, 65536) == 0 && ok;
}

// Opens and maps resource4 of a membar,scratch=on device.
bool scratch_open(const char* dir) {
  scratch_fd = open((std::string(dir) + "/resource4").c_str(), O_RDWR | O_CLOEXEC);
  if (scratch_fd < 0) return false;
  void* p = mmap(nullptr, kCopy, PROT_READ | PROT_WRITE, MAP_SHARED, scratch_fd, 0);
  if (p == MAP_FAILED) return false;
  scratch = static_cast<std::uint8_t*>(p);
  return true;
}

// One operation of `workload`; false on failure (or an unknown workload).
bool operation(const std::string& workload, std::uint32_t i) {
  if (workload == "map_load") {
    [[maybe_unused]] const std::uint32_t value = liveness();  // one 4-byte load (a failure is logged)
    return true;
  }
  if (workload == "pread_load") return pread_load();
  if (workload == "map_store") {
    liveness() = i;
    return true;
  }
  if (workload == "fault_floor") return fault_floor();
  if (workload == "map_burst") {
    for (int k = 0; k < kBurst; ++k) liveness() = i + static_cast<std::uint32_t>(k);
    return liveness() == ~(i + kBurst - 1);  // edu's liveness register reads the inverse
  }
  if (workload == "pwrite_burst") {
    for (int k = 0; k < kBurst; ++k)
      if (!pwrite_store(i + static_cast<std::uint32_t>(k))) return false;
    std::uint32_t v = 0;
    return pread(bar_fd, &v, 4, kLiveness) == 4 && v == ~(i + kBurst - 1);
  }
  if (workload == "map_memcpy") return map_memcpy(i);
  if (workload == "pwrite_memcpy") return pwrite_memcpy(i);
  if (workload == "plain") return plain();
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 || argv[0] == nullptr) {
    std::fprintf(stderr, "usage: rpcie-bench-mmio (commands on stdin)\n");
    return 2;
  }
  char dir[4096];
  if (std::scanf("open %4095s", dir) != 1) return 2;
  bar_fd = open((std::string(dir) + "/resource0").c_str(), O_RDWR | O_CLOEXEC);
  std::printf(bar_fd < 0 ? "error open resource0: %s\n" : "0\n", std::strerror(errno));
  std::fflush(stdout);
  if (bar_fd < 0) return 1;
  char workload[64], argument[4096];
  while (std::scanf("%63s %4095s", workload, argument) == 2) {
    const std::string name(workload);
    if (name == "scratch") {
      std::printf(scratch_open(argument) ? "0\n" : "error scratch %s: %s\n", argument, std::strerror(errno));
      std::fflush(stdout);
      continue;
    }
    const unsigned long operations = std::strtoul(argument, nullptr, 10);
    if (name.find("memcpy") != std::string::npos && scratch == nullptr) {
      std::printf("error %s: no scratch BAR opened\n", workload);
      std::fflush(stdout);
      continue;
    }
    if (name.rfind("map_", 0) == 0 && !bar_map()) {
      std::printf("error mmap resource0: %s\n", std::strerror(errno));
      std::fflush(stdout);
      continue;
    }
    std::vector<float> each;
    each.reserve(operations);
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    bool ok = true;
    for (unsigned long i = 0; i < operations && ok; ++i) {
      ok = operation(name, static_cast<std::uint32_t>(i));
      const auto now = std::chrono::steady_clock::now();
      each.push_back(std::chrono::duration<float>(now - last).count());
      last = now;
    }
    const double seconds = std::chrono::duration<double>(last - t0).count();
    if (ok) {
      std::printf("%.9f\n", seconds);
      std::fwrite(each.data(), sizeof(float), each.size(), stdout);
    } else {
      std::printf("error %s failed\n", workload);
    }
    std::fflush(stdout);
  }
  return 0;
}
