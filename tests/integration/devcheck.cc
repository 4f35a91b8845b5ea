// rpcie-devcheck: drives an rpcie-exportd through the client API and checks behaviour
// (data by checksum, errors by errno, ordering). Used by the integration scripts; each
// subcommand prints "ok: ..." lines and exits 0, or prints "FAIL: ..." and exits 1.
//
//   rpcie-devcheck [common] edu EXPORT          liveness, factorial+irq, DMA both ways, rules 1-4
//   rpcie-devcheck [common] posted EXPORT       1000 posted writes then a read (edu), 5 bursts;
//                 [--gap-ms N] [--limit R] [--outliers K]   N ms before each (0); all but
//                                             K (0) of them <= R round trips (100), each
//                                             carried by <= 300 messages (batched)
//   rpcie-devcheck [common] push EXPORT         streaming DMA (window_push) on edu: mirror export
//                                               -> the device reads what was pushed; on-demand
//                                               export -> no effect, the device reads the window
//   rpcie-devcheck [common] membar EXPORT SIZE  bulk write/read with checksums (copy and zero-copy)
//   rpcie-devcheck [common] errors EXPORT       bad widths/offsets/BARs -> EINVAL, unknown export -> ENOENT
//   rpcie-devcheck [common] hostile EXPORT      raw protocol: bad requests answered with errors, garbage dropped
//   rpcie-devcheck [common] busy EXPORT         expects the attach to fail with EBUSY "attached by"
//   rpcie-devcheck [common] hold EXPORT SECONDS attach, print "attached", hold (for kill tests)
//   rpcie-devcheck [common] reattach EXPORT     attach, detach, attach again at once
//   rpcie-devcheck [common] badmac              a frame with a bad MAC is dropped, the connection lives on
//   rpcie-devcheck [common] list                prints exports as "NAME STATE HOLDER"
//   rpcie-devcheck [common] attachfail EXPORT ERRNO TEXT   the attach must fail so
//   rpcie-devcheck [common] postedfail EXPORT   read-only device: refused posted write reported next
//   rpcie-devcheck [common] linkloss EXPORT     prints "attached", then expects the link to die
//   rpcie-devcheck [common] resume EXPORT SECONDS  prints "attached", then works for SECONDS
//                                             while the link is cut: expects it resumed
//   rpcie-devcheck [common] dmaresume EXPORT    prints "started" with a device-to-host DMA due
//                                             (a delayed edu): the link is cut meanwhile; the
//                                             bytes must be in the window at its interrupt
//   rpcie-devcheck [common] barresume EXPORT GO  prints "attached", writes the memory BAR once
//                                             the file GO exists (the link down), expects the
//                                             bytes there after the resumption
// common: -r HOST[:PORT] --psk-file FILE [--name NAME] [--provider P] [--window SIZE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "rpcie/client.hpp"
#include "rpcie/client_protocol.hpp"
#include "rpcie/edu_registers.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/process.hpp"
#include "rpcie/sanitizer.hpp"
#include "rpcie/session.hpp"
#include "rpcie/units.hpp"

namespace {

using namespace std::chrono_literals;
using rpcie::Deadline;
using rpcie::client::Attachment;

int g_failures = 0;

// Timing claims are reported, not checked, unless RPCIE_TIMING_CHECKS=1: on a shared
// two-core machine the pre-restructure code measured 190-970 round trips for the same
// "1000 posted writes + read" whose claim is 100, depending on what else ran (a flaky check is
// a failing one). What always fails is deterministic: data, and the count of replies (posted
// writes are never acknowledged one by one). The speed itself is rpcie-bench's to measure.
// Never checked under sanitizers (every call is several times slower).
constexpr bool kTimingCheckable = !rpcie::kThreadSanitizer && !rpcie::kAddressSanitizer;
bool timing_checked() {
  const char* v = std::getenv("RPCIE_TIMING_CHECKS");
  return kTimingCheckable && v != nullptr && std::string(v) == "1";
}

#define CHECK_THAT(cond, ...)                                      \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::printf("FAIL: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                    \
      std::printf("\n");                                           \
      std::fflush(stdout);                                         \
      ++g_failures;                                                \
    }                                                              \
  } while (0)

// Prints "ok" for a group of checks when none of them failed since the previous group.
void ok(const char* what) {
  static int failures_seen = 0;
  if (g_failures == failures_seen) std::printf("ok: %s\n", what);
  failures_seen = g_failures;
  std::fflush(stdout);
}

Deadline soon() { return Deadline::after(5s); }

struct Common {
  std::string host;
  std::uint16_t port = rpcie::kDefaultPort;
  rpcie::client::ClientOptions options;
  std::size_t window = 1u << 20;
};

rpcie::SessionOptions session_options(const Common& c) {
  rpcie::SessionOptions so;
  so.provider = c.options.provider;
  return so;
}

// Core's HostBuffer (an anonymous mapping) stands in for hostd's shared-memory file.
rpcie::HostBuffer buffer_or_die(std::size_t n) {
  auto b = rpcie::HostBuffer::create(n);
  if (!b) {
    std::printf("FAIL: window of %zu bytes: %s\n", n, b.error().describe().c_str());
    std::exit(1);
  }
  return std::move(*b);
}
struct Window {
  explicit Window(std::size_t n) : buffer(buffer_or_die(n)), base(buffer.data()), size(n) {}
  rpcie::client::DmaWindow view() const { return {base, size}; }
  rpcie::HostBuffer buffer;
  std::uint8_t* base;
  std::size_t size;
};

std::unique_ptr<Attachment> attach_or_die(const Common& c, const std::string& name, Window& w) {
  auto a = Attachment::open(c.host, c.port, name, c.options, w.view(), soon());
  if (!a) {
    std::printf("FAIL: attach %s: %s\n", name.c_str(), a.error().describe().c_str());
    std::exit(1);
  }
  return std::move(*a);
}

// Each thread's scheduling of a process (/proc/PID/task/*/schedstat: time on a CPU, time
// runnable but waiting for one, slices), so that a slow burst says who ran and who waited.
struct ThreadTimes {
  struct One {
    std::string name;
    std::uint64_t run_ns = 0, wait_ns = 0, slices = 0;
  };
  std::map<int, One> threads;

  // `pid`: 0 for this process.
  static ThreadTimes now(int pid = 0) {
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
  // The kernel's softirq threads (ksoftirqd/N): on a CPU shared with a busy process, the
  // network stack's deferred work (a veth's packets) waits in them for a CPU too. Found once
  // (a scan of /proc before every burst would cool the caches the burst uses).
  static ThreadTimes softirq() {
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
  // The threads that ran or waited since `before`, one line each.
  std::string since(const ThreadTimes& before) const {
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
};

std::uint64_t fnv(const std::uint8_t* p, std::size_t n) {
  return rpcie::proto::checksum_fnv1a(std::span<const std::uint8_t>(p, n));
}

void random_fill(std::uint8_t* p, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(rng());
}

// --- edu ------------------------------------------------------------------------------
using namespace rpcie::edu;  // the register map

std::uint64_t rd(Attachment& a, std::uint64_t off, unsigned width = 4) {
  auto v = a.mmio_read(0, off, width, soon());
  CHECK_THAT(v.has_value(), "mmio_read %#llx: %s", static_cast<unsigned long long>(off),
             v ? "" : v.error().describe().c_str());
  return v ? *v : ~0ULL;
}
void wr(Attachment& a, std::uint64_t off, std::uint64_t value, unsigned width = 4, Deadline deadline = soon()) {
  auto r = a.mmio_write(0, off, width, value, deadline);
  CHECK_THAT(r.has_value(), "mmio_write %#llx: %s", static_cast<unsigned long long>(off),
             r ? "" : r.error().describe().c_str());
}

// Programs and starts one DMA through edu; returns the interrupt count before the start.
std::uint64_t edu_dma_start(Attachment& a, std::uint64_t src, std::uint64_t dst, std::uint64_t count, bool to_host,
                            bool irq) {
  wr(a, kRegDmaSrc, src, 8);
  wr(a, kRegDmaDst, dst, 8);
  wr(a, kRegDmaCount, count, 8);
  const std::uint64_t seen = a.interrupt_count(0);
  wr(a, kRegDmaCmd, 1 | (to_host ? 2 : 0) | (irq ? 4 : 0), 8);
  return seen;
}

// One DMA through edu, completion seen by interrupt (irq=true) or by polling the command
// register (irq=false). Returns with the interrupt acknowledged.
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

int edu_check(const Common& c, const std::string& name) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  CHECK_THAT(a->device().vendor == kVendor && a->device().device == kDevice, "identity %04x:%04x", a->device().vendor,
             a->device().device);
  auto cfg = a->config_read(0, 4, soon());
  CHECK_THAT(cfg && *cfg == 0x11e81234, "config vendor/device %#x", cfg ? *cfg : 0);
  auto cls = a->config_read(8, 4, soon());
  CHECK_THAT(cls && (*cls >> 8) == 0x00ff00 && (*cls & 0xff) == 0x10, "config class/revision %#x", cls ? *cls : 0);
  CHECK_THAT(rd(*a, kRegId) == 0x010000ed, "ID register");
  ok("identity and config space");

  // Rule 2: a read right after a posted write sees it.
  for (std::uint32_t v : {0x12345678u, 0u, 0xdeadbeefu}) {
    wr(*a, kRegLiveness, v);
    CHECK_THAT(rd(*a, kRegLiveness) == (~v & 0xffffffffu), "liveness of %#x", v);
  }
  ok("liveness: each read sees the write before it");

  // Factorial with interrupt.
  wr(*a, kRegStatus, 0x80);
  std::uint64_t seen = a->interrupt_count(0);
  wr(*a, kRegFactorial, 10);
  auto n = a->interrupt_wait(0, seen, soon());
  CHECK_THAT(n && *n == seen + 1, "factorial interrupt count");
  CHECK_THAT(rd(*a, kRegFactorial) == 3628800, "10! reads back");
  CHECK_THAT((rd(*a, kRegIrqStatus) & 1) == 1, "factorial interrupt bit");
  wr(*a, kRegIrqAck, 1);
  CHECK_THAT(rd(*a, kRegIrqStatus) == 0, "acknowledged");
  ok("factorial with interrupt");

  // DMA host -> device -> host, several rounds, completion by interrupt and by polling.
  // Rule 3: the bytes are written into the window right before the doorbell; rule 4: the
  // bytes are checked right after the interrupt or the read that shows completion, with no
  // further round trip.
  for (int round = 0; round < 6; ++round) {
    const bool irq = round % 2 == 0;
    const std::uint64_t src = 0x1000 * (1 + round), dst = (c.window / 2) + 0x1000 * round;
    random_fill(w.base + src, 4096, 1000 + round);
    const auto sum = fnv(w.base + src, 4096);
    std::memset(w.base + dst, 0, 4096);
    edu_dma(*a, src, kDmaBufferAddress, 4096, false, irq);
    edu_dma(*a, kDmaBufferAddress, dst, 4096, true, irq);
    CHECK_THAT(fnv(w.base + dst, 4096) == sum, "round %d (%s): window holds the DMAed bytes on completion", round,
               irq ? "irq" : "poll");
  }
  ok("DMA both directions; data in the window when the interrupt / completion read arrives");

  // Partial transfer at an odd place inside the buffer.
  random_fill(w.base + 0x9000, 100, 7);
  edu_dma(*a, 0x9000, kDmaBufferAddress + 0x123, 100, false, true);
  std::memset(w.base + 0xa000, 0, 200);
  edu_dma(*a, kDmaBufferAddress + 0x123, 0xa000, 100, true, true);
  CHECK_THAT(std::memcmp(w.base + 0x9000, w.base + 0xa000, 100) == 0, "partial DMA");
  CHECK_THAT(w.base[0xa000 + 100] == 0, "DMA wrote past its count");
  ok("partial DMA");

  // A DMA that runs past the window's end is not performed, in either direction: not even
  // its part inside the window (the exporter logs the EFAULT; exportd.sh checks that), and
  // the device keeps working.
  random_fill(w.base + 0xb000, 4096, 8);
  edu_dma(*a, 0xb000, kDmaBufferAddress, 4096, false, true);  // the device buffer: known bytes
  std::vector<std::uint8_t> tail(w.base + c.window - 16, w.base + c.window);
  for (auto& b : tail) b = static_cast<std::uint8_t>(~b);
  std::memcpy(w.base + c.window - 16, tail.data(), tail.size());
  edu_dma(*a, kDmaBufferAddress, c.window - 16, 4096, true, true);  // device -> host, past the end
  CHECK_THAT(std::memcmp(w.base + c.window - 16, tail.data(), tail.size()) == 0,
             "an out-of-window DMA to the host wrote the window's last 16 bytes");
  edu_dma(*a, c.window - 16, kDmaBufferAddress, 4096, false, true);  // host -> device, past the end
  std::memset(w.base + 0xc000, 0, 4096);
  edu_dma(*a, kDmaBufferAddress, 0xc000, 4096, true, true);
  CHECK_THAT(std::memcmp(w.base + 0xb000, w.base + 0xc000, 4096) == 0,
             "an out-of-window DMA from the host changed the device buffer");
  CHECK_THAT(rd(*a, kRegId) == 0x010000ed, "device alive after an out-of-window DMA");
  ok("out-of-window DMA not performed in either direction (window and device bytes unchanged), device alive");

  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  auto after = a->mmio_read(0, kRegId, 4, soon());
  CHECK_THAT(!after && after.error().code == ENOTCONN, "use after detach gives ENOTCONN");
  ok("detach");
  return g_failures ? 1 : 0;
}

// Streaming DMA: ClientOptions::window_push. On a mirror export the device reads exactly the
// bytes pushed (as they were at the push, not what the window holds later: nothing is pulled
// before the doorbell), pushes and posted writes keep their order, large pushes go one-sided.
// On an on-demand export the push does nothing and the device reads the window itself.
int push_check(Common c, const std::string& name) {
  c.options.window_push = true;
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  const bool mirror = a->device().mirror;
  auto push = [&](std::uint64_t at, std::uint64_t n) {
    auto r = a->window_push(at, n, soon());
    CHECK_THAT(r.has_value(), "window_push %#llx+%llu: %s", static_cast<unsigned long long>(at),
               static_cast<unsigned long long>(n), r ? "" : r.error().describe().c_str());
  };
  // Device buffer -> window [dst, +n), then compare with `want`.
  auto device_matches = [&](std::uint64_t dst, const std::vector<std::uint8_t>& want, const char* what) {
    std::memset(w.base + dst, 0, want.size());
    edu_dma(*a, kDmaBufferAddress, dst, want.size(), true, true);
    CHECK_THAT(std::memcmp(w.base + dst, want.data(), want.size()) == 0, "%s (%s export)", what,
               mirror ? "mirror" : "on-demand");
  };

  // Rounds of push + doorbell: the device has the pushed bytes when its interrupt arrives.
  for (int round = 0; round < 4; ++round) {
    const std::uint64_t src = 0x2000 * (1 + round);
    random_fill(w.base + src, 4096, 500 + round);
    std::vector<std::uint8_t> want(w.base + src, w.base + src + 4096);
    push(src, 4096);
    edu_dma(*a, src, kDmaBufferAddress, 4096, false, true);
    device_matches(kDmaBufferAddress + 0x1000 * round, want, "pushed bytes reach the device");
  }
  ok("push then doorbell: the device reads the pushed bytes (4 rounds)");

  // What the device reads is the window as it was at the push: bytes changed afterwards
  // without a push do not reach a mirror (and do reach an on-demand device, which reads live).
  const std::uint64_t src = 0x20000;
  random_fill(w.base + src, 4096, 77);
  std::vector<std::uint8_t> pushed(w.base + src, w.base + src + 4096);
  push(src, 4096);
  random_fill(w.base + src, 4096, 78);
  std::vector<std::uint8_t> later(w.base + src, w.base + src + 4096);
  edu_dma(*a, src, kDmaBufferAddress, 4096, false, true);
  device_matches(0x50000, mirror ? pushed : later, "the device reads the bytes of the push, not later ones");
  ok(mirror ? "mirror: the device sees the window as pushed, nothing pulled"
            : "on-demand: push has no effect, the device reads the window");

  // Order: a push after a doorbell does not overtake it; the next doorbell finds it. The
  // doorbell is the last of several writes in a row, so it waits in the batch when the push
  // comes. `len` bytes at `at` are pushed twice around it (a 2 KiB DMA reads each time);
  // `writes_ahead` register writes before the doorbell keep the exporter busy meanwhile.
  // (Mirror only: an on-demand device reads whatever the window holds when the DMA runs.)
  auto order_check = [&](std::uint64_t at, std::uint64_t len, std::uint32_t writes_ahead, std::uint64_t check_at,
                         const char* what) {
    random_fill(w.base + at, len, 90);
    std::vector<std::uint8_t> both(w.base + at, w.base + at + 2048);
    push(at, len);
    for (std::uint32_t i = 0; i < writes_ahead; ++i) wr(*a, kRegLiveness, i);
    wr(*a, kRegDmaSrc, at, 8);
    wr(*a, kRegDmaDst, kDmaBufferAddress, 8);
    wr(*a, kRegDmaCount, 2048, 8);
    std::uint64_t seen = a->interrupt_count(0);
    wr(*a, kRegDmaCmd, 1 | 4, 8);
    random_fill(w.base + at, len, 91);
    both.insert(both.end(), w.base + at, w.base + at + 2048);
    push(at, len);
    auto n = a->interrupt_wait(0, seen, soon());
    CHECK_THAT(n.has_value(), "first DMA interrupt (%s): %s", what, n ? "" : n.error().describe().c_str());
    wr(*a, kRegIrqAck, 0x100);
    seen = a->interrupt_count(0);
    wr(*a, kRegDmaDst, kDmaBufferAddress + 2048, 8);
    wr(*a, kRegDmaCmd, 1 | 4, 8);
    n = a->interrupt_wait(0, seen, soon());
    CHECK_THAT(n.has_value(), "second DMA interrupt (%s): %s", what, n ? "" : n.error().describe().c_str());
    wr(*a, kRegIrqAck, 0x100);
    device_matches(check_at, both, what);
  };
  if (mirror) {
    order_check(src, 2048, 1, 0x60000, "two pushes in messages around a doorbell keep their order");
    ok("push / doorbell / push / doorbell keep their order");
    // Too large for a message: one-sided writes into the mirror, which must not land before
    // the device has performed the doorbell ahead of them.
    order_check(0x40000, 16 << 10, 1000, 0x68000, "two one-sided pushes around a doorbell keep their order");
    ok("one-sided push / doorbell / push / doorbell keep their order");
  }

  // Either side of what travels inside a message (8 KiB): the last 4 KiB of each push reach
  // the device.
  for (std::uint64_t len : {std::uint64_t{8192}, std::uint64_t{8193}}) {
    const std::uint64_t at = 0x30000;
    random_fill(w.base + at, len, static_cast<std::uint32_t>(len));
    std::vector<std::uint8_t> tail(w.base + at + len - 4096, w.base + at + len);
    push(at, len);
    edu_dma(*a, at + len - 4096, kDmaBufferAddress, 4096, false, true);
    device_matches(0x58000, tail, len == 8192 ? "an 8 KiB push (in the message)" : "an 8 KiB + 1 push (one-sided)");
  }
  ok("pushes of 8 KiB and 8 KiB + 1 (message and one-sided)");

  // Larger than what travels inside a message: a one-sided write into the mirror.
  const std::uint64_t big = 0x80000, big_len = 64 << 10;
  random_fill(w.base + big, big_len, 123);
  std::vector<std::uint8_t> tail(w.base + big + big_len - 4096, w.base + big + big_len);
  push(big, big_len);
  std::memset(w.base + big + big_len - 4096, 0xee, 4096);  // after the push: must not be seen in mirror mode
  if (!mirror) std::memcpy(w.base + big + big_len - 4096, tail.data(), 4096);
  edu_dma(*a, big + big_len - 4096, kDmaBufferAddress, 4096, false, true);
  device_matches(0x70000, tail, "a 64 KiB push (one-sided) reaches the device");
  ok("64 KiB push, one-sided");

  // Bad ranges: EINVAL, and the attachment lives on.
  for (auto [at, len] :
       {std::pair<std::uint64_t, std::uint64_t>{c.window - 8, 16}, {c.window + 1, 0}, {~std::uint64_t{0}, 2}}) {
    auto r = a->window_push(at, len, soon());
    CHECK_THAT(!r && r.error().code == EINVAL, "push %#llx+%llu outside the window: %s",
               static_cast<unsigned long long>(at), static_cast<unsigned long long>(len),
               r ? "accepted" : r.error().describe().c_str());
  }
  CHECK_THAT(rd(*a, kRegId) == 0x010000ed, "device alive after refused pushes");
  const auto pushed_total = a->stats().window_bytes_pushed;
  CHECK_THAT(pushed_total == (mirror ? 4 * 4096 + 4096 + 2 * 2048 + 2 * (16 << 10) + 8192 + 8193 + big_len : 0u),
             "bytes pushed counted: %llu", static_cast<unsigned long long>(pushed_total));
  ok("pushes outside the window refused (EINVAL)");
  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  return g_failures ? 1 : 0;
}

// `gap`: the pause before each burst; `limit`: round trips a burst may take (timing checks),
// except `outliers` of the five.
// `peer_pid`: the exporter's process (0: unknown), whose threads a slow burst reports too.
int posted_check(const Common& c, const std::string& name, std::chrono::milliseconds gap, double limit, int outliers,
                 int peer_pid) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  // The cost of one round trip, measured here (median of 50).
  std::vector<double> rtt;
  for (int i = 0; i < 50; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    (void)rd(*a, kRegLiveness);
    rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(rtt.begin(), rtt.end());
  const double one = rtt[rtt.size() / 2];
  // Five bursts: data and reply counts checked in each, the time with RPCIE_TIMING_CHECKS=1
  // against `limit` round trips in all but `outliers` of them. A batching fault makes every
  // burst slow (each write alone: 250-700 round trips) and sends ~1000 messages; the
  // scheduler of this 2-core VM makes a burst slow now and then (a writer that lost its CPU
  // for a few ms: posting 2.8-8 ms instead of 0.3 ms; a read whose reply waited ~5 ms), and
  // in about one quiet suite run of five it did so in two bursts of five. The suite runs them
  // back to back against 100 with two outliers allowed, the median (14-26 measured), and
  // checks every burst's message count. Issue 13 point 4's target, 30 in every run with
  // bursts 20 ms apart and a busy third process on one of the CPUs, is measured by
  // tests/integration/posted_load.sh: about one burst in 80 still goes over (a writer the
  // busy process kept off its CPU for a tick; shm's cold first bursts at 30-36). A slow
  // burst lists each thread's time on a CPU and waiting for one, the exporter's and the
  // kernel's softirq threads' too: who was kept waiting. On this VM the first message after
  // a pause costs 50-100 us by itself (its AEAD seal alone 30-50 us: a cold core).
  const double kLimit = limit;
  constexpr std::uint64_t kMessagesMax = 300;
  double worst = 0;
  int over = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const auto replies_before = a->channel_stats().messages_received;
    const auto sent_before = a->channel_stats().messages_sent;
    // With a gap (20 ms, as a driver's bursts come): a process that asks for more than its
    // share of a CPU it shares with a busy one is preempted for whole time slices (~3 ms, a
    // hundred round trips) whatever it does; one that sleeps between bursts is not.
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
    // No clock read per write: one costs ~60 ns here, a third of what is measured.
    const auto sched_before = ThreadTimes::now();
    const auto peer_before = peer_pid ? ThreadTimes::now(peer_pid) : ThreadTimes{};
    const auto softirq_before = ThreadTimes::softirq();
    // One deadline for the burst, as a driver's operation has one: a clock read per write
    // (~35 ns on this VM) would be the application's cost, not the library's.
    auto t0 = std::chrono::steady_clock::now();
    const Deadline burst = Deadline::after(5s);
    for (std::uint32_t i = 1; i <= 1000; ++i) wr(*a, kRegLiveness, i + 1000 * attempt, 4, burst);
    const double posting = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    const std::uint64_t last = rd(*a, kRegLiveness);
    const double took = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    const auto replies = a->channel_stats().messages_received - replies_before;
    // How the writes left: a batching fault shows as ~1000 messages, not the time alone.
    const auto sent = a->channel_stats().messages_sent - sent_before;
    CHECK_THAT(last == (~(1000u + 1000 * attempt) & 0xffffffffu), "the read sees the last write (got %#llx)",
               static_cast<unsigned long long>(last));
    CHECK_THAT(replies == 1, "1000 posted writes + 1 read took %llu replies (posted writes are not acknowledged)",
               static_cast<unsigned long long>(replies));
    std::printf(
        "1000 posted writes + read: %.0f us (posting %.0f us) = %.1f round trips of %.1f us, %llu reply, %llu "
        "messages sent\n",
        took, posting, took / one, one, static_cast<unsigned long long>(replies),
        static_cast<unsigned long long>(sent));
    if (took > kLimit * one) {
      ++over;
      std::printf("%s", ThreadTimes::now().since(sched_before).c_str());
      if (peer_pid) std::printf(" exporter:\n%s", ThreadTimes::now(peer_pid).since(peer_before).c_str());
      std::printf(" kernel:\n%s", ThreadTimes::softirq().since(softirq_before).c_str());
    }
    worst = std::max(worst, took / one);
    // Batching itself, burst by burst: 13-155 messages measured, quiet or with the writer
    // preempted; 1000 when each write leaves alone. Timed builds only (a sanitizer's slower
    // writes fill fewer per batch window).
    CHECK_THAT(!timing_checked() || sent <= kMessagesMax,
               "burst %d: 1000 posted writes left in %llu messages (max %llu)", attempt + 1,
               static_cast<unsigned long long>(sent), static_cast<unsigned long long>(kMessagesMax));
  }
  CHECK_THAT(!timing_checked() || over <= outliers,
             "%d of 5 bursts took over %.0f round trips (worst %.1f; %d allowed)", over, kLimit, worst, outliers);
  if (!timing_checked())
    std::printf("timing reported, not checked (RPCIE_TIMING_CHECKS=1 checks it): worst %.1f round trips\n", worst);
  else if (over <= outliers)
    std::printf("ok: 1000 posted writes and a read within %.0f round trips in %d of 5 bursts (worst %.1f)\n", kLimit,
                5 - over, worst);
  return g_failures ? 1 : 0;
}

int membar_check(const Common& c, const std::string& name, std::size_t size) {
  Window w(std::max<std::size_t>(c.window, 4u << 20));
  auto a = attach_or_die(c, name, w);
  const auto* bar = a->device().bar_find(0);
  CHECK_THAT(bar && bar->size >= size && bar->kind == rpcie::proto::BarKind::memory, "membar BAR0");
  std::vector<std::uint8_t> data(size), back(size, 0);
  random_fill(data.data(), size, 42);
  auto wr_ok = a->bar_write(0, 0, data, Deadline::after(60s));
  CHECK_THAT(wr_ok.has_value(), "bar_write: %s", wr_ok ? "" : wr_ok.error().describe().c_str());
  auto rd_ok = a->bar_read(0, 0, back, Deadline::after(60s));
  CHECK_THAT(rd_ok.has_value(), "bar_read: %s", rd_ok ? "" : rd_ok.error().describe().c_str());
  CHECK_THAT(fnv(data.data(), size) == fnv(back.data(), size), "checksum after a %zu-byte write/read", size);
  // MMIO reads see the bulk data (same memory).
  std::uint64_t v = 0;
  std::memcpy(&v, data.data() + 4096, 8);
  auto m = a->mmio_read(0, 4096, 8, soon());
  CHECK_THAT(m && *m == v, "mmio read of bulk-written data");
  ok("membar bulk write/read through the staging buffer, checksum equal");
  // bar_write_fill: the caller fills the staging buffer piece by piece, each byte asked for
  // once and in order (as hostd's spliced writes need); an error from the fill ends the write.
  {
    const std::uint64_t at = 4099;  // unaligned
    const std::size_t n = std::min<std::size_t>(size - at, 9u << 20);
    std::vector<std::uint8_t> fresh(n);
    random_fill(fresh.data(), n, 44);
    std::uint64_t expected_at = 0, pieces = 0;
    bool in_order = true;
    auto filled = a->bar_write_fill(
        0, at, n,
        [&](std::uint64_t from, std::span<std::uint8_t> piece) -> rpcie::Result<void> {
          in_order = in_order && from == expected_at && !piece.empty();
          std::memcpy(piece.data(), fresh.data() + from, piece.size());
          expected_at = from + piece.size();
          ++pieces;
          return {};
        },
        Deadline::after(60s));
    CHECK_THAT(filled.has_value(), "bar_write_fill: %s", filled ? "" : filled.error().describe().c_str());
    CHECK_THAT(in_order && expected_at == n, "bar_write_fill asked for every byte once, in order (%llu pieces)",
               static_cast<unsigned long long>(pieces));
    std::vector<std::uint8_t> seen(n);
    rd_ok = a->bar_read(0, at, seen, Deadline::after(60s));
    CHECK_THAT(rd_ok && fnv(seen.data(), n) == fnv(fresh.data(), n), "checksum after bar_write_fill");
    auto refused = a->bar_write_fill(
        0, 0, 16,
        [](std::uint64_t, std::span<std::uint8_t>) -> rpcie::Result<void> { return rpcie::fail(EPIPE, "source gone"); },
        soon());
    CHECK_THAT(!refused && refused.error().code == EPIPE, "a fill that fails ends bar_write_fill with its error");
    rd_ok = a->bar_read(0, 0, std::span(seen.data(), 16), soon());
    CHECK_THAT(rd_ok && std::memcmp(seen.data(), data.data(), 16) == 0, "a failed fill wrote nothing");
    ok("membar bar_write_fill: pieces in order, checksum equal; a failing fill writes nothing and returns its error");
  }
  // Zero-copy from / into the window, at an unaligned offset.
  random_fill(w.base, 1u << 20, 43);
  const auto sum = fnv(w.base, 1u << 20);
  auto z = a->bar_write_from_window(0, 12345, 0, 1u << 20, soon());
  CHECK_THAT(z.has_value(), "bar_write_from_window: %s", z ? "" : z.error().describe().c_str());
  std::memset(w.base + (2u << 20), 0, 1u << 20);
  z = a->bar_read_into_window(0, 12345, 2u << 20, 1u << 20, soon());
  CHECK_THAT(z.has_value(), "bar_read_into_window: %s", z ? "" : z.error().describe().c_str());
  CHECK_THAT(fnv(w.base + (2u << 20), 1u << 20) == sum, "zero-copy checksum");
  ok("membar zero-copy write/read, checksum equal");
  auto oob = a->bar_write(0, bar ? bar->size - 8 : 0, std::span(data.data(), 16), soon());
  CHECK_THAT(!oob && oob.error().code == EINVAL, "write past the BAR end is EINVAL");
  ok("membar range check");
  // A burst of posted writes of every width, more than one batch holds, in order: a later
  // write to the same place wins; with one bad write in it, none is queued.
  std::vector<Attachment::PostedWrite> burst;
  for (std::uint64_t i = 0; i < 600; ++i) {
    const unsigned width = 1u << (i % 4);
    burst.push_back(
        {0, width, 8192 + i * 8, (0x0102030405060708ull * (i + 1)) & (width == 8 ? ~0ull : (1ull << (8 * width)) - 1)});
  }
  burst.push_back({0, 8, 8192, 0xfeedface});  // overwrites the first
  auto sent = a->mmio_write_burst(burst, soon());
  CHECK_THAT(sent.has_value(), "mmio_write_burst: %s", sent ? "" : sent.error().describe().c_str());
  bool burst_ok = true;
  for (std::size_t i = 1; i < 600; ++i) {
    auto got = a->mmio_read(0, burst[i].offset, burst[i].width, soon());
    burst_ok = burst_ok && got && *got == burst[i].value;
  }
  auto first = a->mmio_read(0, 8192, 8, soon());
  CHECK_THAT(burst_ok && first && *first == 0xfeedface, "the burst's writes read back, the last write to 8192 wins");
  std::vector<Attachment::PostedWrite> bad{{0, 8, 8192, 1}, {0, 8, 8193, 2}};
  auto refused = a->mmio_write_burst(bad, soon());
  first = a->mmio_read(0, 8192, 8, soon());
  CHECK_THAT(!refused && refused.error().code == EINVAL && first && *first == 0xfeedface,
             "a burst with an unaligned write is EINVAL and queues nothing");
  ok("membar: a burst of 601 posted writes arrives in order; a bad burst queues nothing");
  return g_failures ? 1 : 0;
}

int errors_check(const Common& c, const std::string& name) {
  Window w(c.window);
  auto missing = Attachment::open(c.host, c.port, "no-such-export", c.options, w.view(), soon());
  CHECK_THAT(!missing && missing.error().code == ENOENT, "unknown export: %s",
             missing ? "attached?!" : missing.error().describe().c_str());
  auto a = attach_or_die(c, name, w);
  struct Bad {
    std::uint8_t bar;
    std::uint64_t offset;
    unsigned width;
  };
  for (Bad b : {Bad{0, 1, 4}, Bad{0, 0, 3}, Bad{0, 0, 16}, Bad{0, 1u << 20, 4}, Bad{0, (1u << 20) - 2, 4}, Bad{1, 0, 4},
                Bad{6, 0, 4}, Bad{0, ~0ULL - 3, 4}}) {
    auto r = a->mmio_read(b.bar, b.offset, b.width, soon());
    CHECK_THAT(!r && r.error().code == EINVAL, "mmio_read bar %u off %#llx width %u: %s", b.bar,
               static_cast<unsigned long long>(b.offset), b.width, r ? "succeeded" : r.error().describe().c_str());
    auto wv = a->mmio_write(b.bar, b.offset, b.width, 0, soon());
    CHECK_THAT(!wv && wv.error().code == EINVAL, "mmio_write bar %u off %#llx width %u", b.bar,
               static_cast<unsigned long long>(b.offset), b.width);
  }
  auto big = a->mmio_write(0, kRegLiveness, 4, 0x100000000ULL, soon());
  CHECK_THAT(!big && big.error().code == EINVAL, "value wider than the access");
  for (auto [off, width] : {std::pair{4095, 2}, std::pair{4096, 1}, std::pair{1, 2}, std::pair{0, 8}}) {
    auto r = a->config_read(static_cast<std::uint16_t>(off), static_cast<unsigned>(width), soon());
    CHECK_THAT(!r && r.error().code == EINVAL, "config_read %d/%d", off, width);
  }
  // The device decides for legal widths: edu reads all-ones at an undefined offset and on a
  // width its spec does not define.
  CHECK_THAT(rd(*a, 0x10) == 0xffffffffu, "undefined edu offset reads all-ones");
  CHECK_THAT(rd(*a, kRegLiveness, 2) == 0xffff, "2-byte edu register read is all-ones");
  CHECK_THAT(rd(*a, kRegId) == 0x010000ed, "still alive");
  ok("bad widths, offsets and BARs are EINVAL; the device decides for legal ones");
  return g_failures ? 1 : 0;
}

int hostile_check(const Common& c, const std::string& name) {
  // Speaks the protocol below the client API: attach by hand, then send requests the API
  // would never send.
  Window w(c.window);
  auto sock = rpcie::client::exporter_connect(c.host, c.port, c.options, soon());
  CHECK_THAT(sock.has_value(), "connect: %s", sock ? "" : sock.error().describe().c_str());
  if (!sock) return 1;
  auto s = sock->message_send(rpcie::proto::AttachRequest{name, w.size}, 1, soon());
  auto reply = s ? sock->message_recv(soon()) : tl::unexpected(s.error());
  CHECK_THAT(reply && std::holds_alternative<rpcie::proto::AttachReply>(reply->decoded.message), "attach reply");
  if (!reply) return 1;
  std::vector<rpcie::LocalRegion> regions{{0, w.base, w.size}};
  auto session = rpcie::Session::connect_over(std::move(*sock), session_options(c), regions, soon());
  CHECK_THAT(session.has_value(), "session: %s", session ? "" : session.error().describe().c_str());
  if (!session) return 1;
  auto& ch = (*session)->channel();
  // The exporter's warm-up ping, then its verdict on the bootstrap connection.
  auto ping = ch.message_recv(soon());
  CHECK_THAT(ping && std::holds_alternative<rpcie::proto::Ping>((*ping)->message), "warm-up ping");
  (void)ch.message_send(rpcie::proto::Pong{}, 0, soon());
  auto verdict = (*session)->bootstrap().message_recv(soon());
  CHECK_THAT(verdict && std::holds_alternative<rpcie::proto::WriteAck>(verdict->decoded.message), "attach verdict");
  auto ask = [&](const rpcie::proto::Message& m, std::uint64_t rid) -> rpcie::Result<rpcie::proto::Decoded> {
    auto sent = ch.message_send(m, rid, soon());
    if (!sent) return tl::unexpected(sent.error());
    auto got = ch.message_recv(soon());
    if (!got) return tl::unexpected(got.error());
    return **got;
  };
  auto status_of = [](const rpcie::proto::Decoded& d) -> int {
    if (auto* r = std::get_if<rpcie::proto::ReadReply>(&d.message)) return r->status;
    if (auto* a = std::get_if<rpcie::proto::WriteAck>(&d.message)) return a->status;
    if (auto* e = std::get_if<rpcie::proto::ErrorMsg>(&d.message)) return e->code;
    return -1;
  };
  // Out of range for the device (the codec allows them): the exporter answers EINVAL.
  auto r1 = ask(rpcie::proto::MmioRead{0, 4, 1u << 20}, 10);
  CHECK_THAT(r1 && r1->header.request_id == 10 && status_of(*r1) == EINVAL, "mmio_read past the BAR -> EINVAL");
  auto r2 = ask(rpcie::proto::MmioRead{3, 4, 0}, 11);
  CHECK_THAT(r2 && status_of(*r2) == EINVAL, "mmio_read of a BAR that does not exist -> EINVAL");
  // A posted write that fails is answered with an error carrying its request id.
  auto r3 = ask(rpcie::proto::MmioWrite{0, 4, 1u << 20, 0}, 12 | (1ULL << 63));
  CHECK_THAT(r3 && r3->header.request_id == (12 | (1ULL << 63)) && status_of(*r3) == EINVAL,
             "failed posted write -> error with its id");
  // A message that has no business on the data path.
  auto r4 = ask(rpcie::proto::ListRequest{}, 13);
  CHECK_THAT(r4 && std::holds_alternative<rpcie::proto::ErrorMsg>(r4->message) && status_of(*r4) == EPROTO,
             "list_request on the data path -> EPROTO error");
  // Window bytes the exporter cannot take (on-demand: no mirror; mirror: past the window's
  // end; the attach did not ask to push either way): refused with EINVAL under the id, and
  // the posted write after them is still performed, as posted writes are.
  const std::uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto r6 = ask(rpcie::proto::WindowPush{w.size - 4, bytes, {{0, 4, kRegLiveness, 0x5a5a5a5a}}}, 15 | (1ULL << 63));
  CHECK_THAT(r6 && r6->header.request_id == (15 | (1ULL << 63)) && status_of(*r6) == EINVAL,
             "window_push the exporter cannot take -> EINVAL with its id (%d)", r6 ? status_of(*r6) : -1);
  auto r7 = ask(rpcie::proto::MmioRead{0, 4, kRegLiveness}, 16);
  CHECK_THAT(r7 && std::get_if<rpcie::proto::ReadReply>(&r7->message) &&
                 std::get<rpcie::proto::ReadReply>(r7->message).value == 0xa5a5a5a5,
             "the write after refused window bytes was performed");
  // Garbage bytes: dropped by the exporter, which keeps serving.
  std::vector<std::uint8_t> garbage(100, 0xab);
  auto g = ch.bytes_send(garbage, soon());
  CHECK_THAT(g.has_value(), "garbage sent");
  auto r5 = ask(rpcie::proto::MmioRead{0, 4, kRegId}, 14);
  CHECK_THAT(r5 && r5->header.request_id == 14 && std::get_if<rpcie::proto::ReadReply>(&r5->message) &&
                 std::get<rpcie::proto::ReadReply>(r5->message).value == 0x010000ed,
             "the exporter still answers after garbage");
  ok("hostile data-path input answered with errors; exporter keeps serving");
  return g_failures ? 1 : 0;
}

// An attach that must fail with `code` and a message containing `text`.
int attachfail_check(const Common& c, const std::string& name, int code, const std::string& text) {
  Window w(c.window);
  auto a = Attachment::open(c.host, c.port, name, c.options, w.view(), soon());
  CHECK_THAT(!a && a.error().code == code && a.error().message.find(text) != std::string::npos,
             "attach %s: expected errno %d with '%s', got %s", name.c_str(), code, text.c_str(),
             a ? "success" : a.error().describe().c_str());
  if (!a && !g_failures) std::printf("ok: refused: %s\n", a.error().describe().c_str());
  return g_failures ? 1 : 0;
}

// A read-only device (pci-sysfs bound to a host driver): a posted write is refused at the
// device and the next access reports it (EPERM), once; reads of the BAR are refused too.
int postedfail_check(const Common& c, const std::string& name) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  const auto* bar = a->device().bars.empty() ? nullptr : &a->device().bars.front();
  CHECK_THAT(bar && bar->readonly, "the export's BARs are read-only");
  if (!bar) return 1;
  auto vendor = a->config_read(0, 2, soon());
  CHECK_THAT(vendor && *vendor == a->device().vendor, "config read of the vendor id");
  auto posted = a->mmio_write(bar->bar, 0, 4, 0, soon());
  CHECK_THAT(posted.has_value(), "a posted write returns at once: %s", posted ? "" : posted.error().describe().c_str());
  // Asking for the exporter's telemetry is no access of the device: the error stays for the
  // next one (the error arrives before the telemetry's answer, which follows it on the fabric).
  auto telemetry = a->device_telemetry(soon());
  CHECK_THAT(telemetry && telemetry->dma_read.count == 0 && telemetry->interrupt.count == 0,
             "device telemetry after the refused posted write: %s",
             telemetry ? "nonzero counts" : telemetry.error().describe().c_str());
  auto next = a->config_read(0, 2, soon());
  CHECK_THAT(!next && next.error().code == EPERM, "the next access reports the refused posted write: %s",
             next ? "succeeded" : next.error().describe().c_str());
  auto after = a->config_read(0, 2, soon());
  CHECK_THAT(after && *after == a->device().vendor, "reported once; the attachment goes on");
  auto rd_bar = a->mmio_read(bar->bar, 0, 4, soon());
  CHECK_THAT(!rd_bar && rd_bar.error().code == EPERM, "BAR read of a driver-bound function refused: %s",
             rd_bar ? "succeeded" : rd_bar.error().describe().c_str());
  auto cw = a->config_write(4, 2, 0, soon());
  CHECK_THAT(!cw && cw.error().code == EPERM, "config write refused");
  ok("read-only device: refused posted write reported by the next access, reads and config writes refused");
  return g_failures ? 1 : 0;
}

// The link is cut under a working attachment (the script tears its connections down with
// `ss -K` after "attached", and may take the veth down for a while): the attachment resumes.
// Meanwhile and after, posted writes and reads go on with no error (each within a deadline
// longer than the cut), every read sees the write before it (nothing lost, nothing twice: the
// liveness register and the DMA buffer), the device's state from before the cut is kept (a
// factorial result, bytes in its DMA buffer), and DMA and interrupts work over the new link.
int resume_check(Common c, const std::string& name, int seconds) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  const auto slow = [] { return Deadline::after(8s); };
  // State the device keeps: a factorial result and 4 KiB in its DMA buffer.
  wr(*a, kRegFactorial, 12);
  random_fill(w.base, 4096, 77);
  const auto sum = fnv(w.base, 4096);
  edu_dma(*a, 0, kDmaBufferAddress, 4096, false, true);
  CHECK_THAT(rd(*a, kRegFactorial) == 479001600, "12! before the cut");
  std::printf("attached %s\n", name.c_str());
  std::fflush(stdout);
  const auto until = Deadline::after(std::chrono::seconds(seconds));
  std::uint32_t value = 0;
  std::uint64_t rounds = 0;
  double slowest = 0;
  while (!until.expired() && g_failures == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    // A stream of posted writes with a read now and then: a cut lands among writes in flight.
    for (int i = 0; i < 32; ++i) {
      auto r = a->mmio_write(0, kRegLiveness, 4, ++value, slow());
      CHECK_THAT(r.has_value(), "posted write %u: %s", value, r ? "" : r.error().describe().c_str());
    }
    auto v = a->mmio_read(0, kRegLiveness, 4, slow());
    CHECK_THAT(v.has_value(), "read after write %u: %s", value, v ? "" : v.error().describe().c_str());
    CHECK_THAT(!v || *v == (~value & 0xffffffffu), "read after write %u: %#llx", value,
               static_cast<unsigned long long>(v ? *v : 0));
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ++rounds;
  }
  const auto resumes = a->stats().resumes;
  std::printf("%llu rounds, the slowest %.2f s, %llu resumption(s), liveness writes 1..%u\n",
              static_cast<unsigned long long>(rounds), slowest, static_cast<unsigned long long>(resumes), value);
  CHECK_THAT(resumes >= 1, "the link was cut, but the attachment counts no resumption");
  CHECK_THAT(!a->failure().has_value(), "the attachment failed: %s",
             a->failure() ? a->failure()->describe().c_str() : "");
  ok("link cut: posted writes and reads went on without an error, each read saw the write before it");
  CHECK_THAT(rd(*a, kRegFactorial) == 479001600, "12! after the resumption");
  std::memset(w.base + 0x2000, 0, 4096);
  edu_dma(*a, kDmaBufferAddress, 0x2000, 4096, true, true);
  CHECK_THAT(fnv(w.base + 0x2000, 4096) == sum, "the device's DMA buffer from before the cut");
  ok("device state kept across the resumption (a factorial result, the DMA buffer); DMA and interrupts work");
  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  return g_failures == 0 ? 0 : 1;
}

// The link is cut while the device's DMA into the window is due (the export delays each
// transfer; the script takes the veth down after "started" and tears the connections down
// with `ss -K` once the transfer is due): the device's bytes, written while nothing could
// reach the client, must be in the window when its interrupt arrives over the new link.
int dma_resume_check(Common c, const std::string& name) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  random_fill(w.base, 4096, 91);
  const auto sum = fnv(w.base, 4096);
  edu_dma(*a, 0, kDmaBufferAddress, 4096, false, true);
  std::memset(w.base + 0x2000, 0xa5, 4096);  // what the device's transfer must replace
  const std::uint64_t seen = edu_dma_start(*a, kDmaBufferAddress, 0x2000, 4096, true, true);
  // A read is performed after the posted writes before it: the transfer has started.
  CHECK_THAT(rd(*a, kRegId) == 0x010000ed, "alive after the DMA command");
  const auto started = Deadline::Clock::now();
  std::printf("started\n");
  std::fflush(stdout);
  auto n = a->interrupt_wait(0, seen, Deadline::after(15s));
  CHECK_THAT(n.has_value(), "the DMA's interrupt across the cut: %s", n ? "" : n.error().describe().c_str());
  // The transfer is due 0.5 s after its command and the link is down for 1 s from just after
  // "started": an interrupt sooner than 0.8 s came before the cut, which then tested nothing.
  const double after = std::chrono::duration<double>(a->interrupt_arrived() - started).count();
  CHECK_THAT(after >= 0.8, "the interrupt came %.2f s after the transfer started, before the link went down", after);
  std::size_t stale = 0;
  for (std::size_t i = 0; i < 4096; ++i) stale += w.base[0x2000 + i] == 0xa5 ? 1 : 0;
  CHECK_THAT(fnv(w.base + 0x2000, 4096) == sum,
             "the device's 4096 bytes at IOVA 0x2000 after its interrupt: %zu still hold the window's old 0xa5", stale);
  CHECK_THAT(a->stats().resumes >= 1, "the link was cut, but the attachment counts no resumption");
  CHECK_THAT(!a->failure().has_value(), "the attachment failed: %s",
             a->failure() ? a->failure()->describe().c_str() : "");
  if (g_failures == 0) ok("a DMA into the window due while the link was down arrived whole before its interrupt");
  wr(*a, kRegIrqAck, 0x100);
  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  return g_failures == 0 ? 0 : 1;
}

// A memory-BAR write made while the link is down (the script takes the veth down after
// "attached", then creates `go`; once the write is on its way it tears the connections down
// with `ss -K`): after the resumption a flush and a read back must find the written bytes.
int bar_resume_check(Common c, const std::string& name, const std::string& go) {
  constexpr std::size_t kBytes = 4096;  // fits a socket's send buffer: taken while the link is down
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  std::vector<std::uint8_t> before(kBytes, 0x3c), data(kBytes), back(kBytes);
  random_fill(data.data(), kBytes, 93);
  auto first = a->bar_write(0, 0, before, soon());
  CHECK_THAT(first.has_value(), "bar_write before the cut: %s", first ? "" : first.error().describe().c_str());
  std::printf("attached %s\n", name.c_str());
  std::fflush(stdout);
  const auto until = Deadline::after(20s);
  while (!std::filesystem::exists(go) && !until.expired()) std::this_thread::sleep_for(10ms);
  CHECK_THAT(std::filesystem::exists(go), "no %s within 20 s", go.c_str());
  const auto t0 = Deadline::Clock::now();
  auto wrote = a->bar_write(0, 0, data, Deadline::after(15s));
  CHECK_THAT(wrote.has_value(), "bar_write across the cut: %s", wrote ? "" : wrote.error().describe().c_str());
  // Delivered, the write cannot return before the link is back (down 1 s from `go`).
  const double took = std::chrono::duration<double>(Deadline::Clock::now() - t0).count();
  CHECK_THAT(took >= 0.5, "bar_write returned %.2f s after it began, with the link still down", took);
  auto flushed = a->flush(Deadline::after(15s));
  CHECK_THAT(flushed.has_value(), "flush after the cut: %s", flushed ? "" : flushed.error().describe().c_str());
  auto read = a->bar_read(0, 0, back, soon());
  CHECK_THAT(read.has_value(), "bar_read after the cut: %s", read ? "" : read.error().describe().c_str());
  std::size_t old = 0;
  for (std::size_t i = 0; i < kBytes; ++i) old += back[i] == before[i] && back[i] != data[i] ? 1 : 0;
  CHECK_THAT(fnv(back.data(), kBytes) == fnv(data.data(), kBytes),
             "the %zu bytes written while the link was down, read back after the resumption: %zu still hold the "
             "old 0x3c",
             kBytes, old);
  CHECK_THAT(a->stats().resumes >= 1, "the link was cut, but the attachment counts no resumption");
  if (g_failures == 0) ok("a memory-BAR write made while the link was down is in the BAR after the resumption");
  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  return g_failures == 0 ? 0 : 1;
}

// The exporter dies under an attachment (the script kills it after "attached"): the next
// operations fail with an error within the deadline, never succeed silently, never hang;
// once the resume has given up (a lease), every operation fails.
// With streaming DMA on: on a mirror export, every round pushes window bytes too.
int linkloss_check(Common c, const std::string& name) {
  c.options.window_push = true;
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  CHECK_THAT(rd(*a, kRegId) == 0x010000ed, "alive");
  std::printf("attached %s\n", name.c_str());
  std::fflush(stdout);
  auto until = Deadline::after(15s);
  int code = 0;
  while (!until.expired()) {
    (void)a->window_push(0, 64, soon());
    (void)a->mmio_write(0, kRegLiveness, 4, 1, soon());
    auto t0 = std::chrono::steady_clock::now();
    auto r = a->mmio_read(0, kRegLiveness, 4, Deadline::after(3s));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK_THAT(took < 3.5, "an operation took %.1f s past its 3 s deadline", took);
    if (!r) {
      code = r.error().code;
      std::printf("first failure: %s\n", r.error().describe().c_str());
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  CHECK_THAT(code == EIO || code == ENOTCONN || code == ETIMEDOUT || code == ECONNRESET, "a lost link is an error (%d)",
             code);
  // The client tries to resume the attachment for a lease; with the exporter gone for good
  // the attachment then fails, and stays failed.
  const auto failed_by = Deadline::after(a->lease() + 3s);
  while (!a->failure() && !failed_by.expired()) std::this_thread::sleep_for(50ms);
  CHECK_THAT(a->failure().has_value(), "the attachment failed within a lease of the loss");
  auto again = a->mmio_read(0, kRegId, 4, Deadline::after(1s));
  CHECK_THAT(!again, "and stays one");
  auto pushed = a->window_push(0, 64, Deadline::after(1s));
  CHECK_THAT(!pushed, "a window push after the loss fails too");
  auto posted = a->mmio_write(0, kRegLiveness, 4, 1, Deadline::after(1s));
  CHECK_THAT(!posted, "a posted write after the loss fails too");
  ok("exporter lost: the next accesses fail with an error, none hangs");
  return g_failures ? 1 : 0;
}

int busy_check(const Common& c, const std::string& name) {
  Window w(c.window);
  auto a = Attachment::open(c.host, c.port, name, c.options, w.view(), soon());
  CHECK_THAT(!a && a.error().code == EBUSY && a.error().message.find("attached by") != std::string::npos,
             "second attach: %s", a ? "attached?!" : a.error().describe().c_str());
  if (!a) std::printf("ok: refused: %s\n", a.error().message.c_str());
  return g_failures ? 1 : 0;
}

int hold(const Common& c, const std::string& name, int seconds) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  std::printf("attached %s\n", name.c_str());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  return 0;
}

int reattach_check(const Common& c, const std::string& name) {
  Window w(c.window);
  for (int i = 0; i < 3; ++i) {
    auto a = attach_or_die(c, name, w);
    CHECK_THAT(a->config_read(0, 2, soon()).has_value(), "config read on attach %d", i);
    auto d = a->detach(soon());
    CHECK_THAT(d.has_value(), "detach %d: %s", i, d ? "" : d.error().describe().c_str());
  }
  ok("detach then re-attach at once, three times");
  return g_failures ? 1 : 0;
}

int badmac_check(const Common& c) {
  auto sock = rpcie::client::exporter_connect(c.host, c.port, c.options, soon());
  CHECK_THAT(sock.has_value(), "connect: %s", sock ? "" : sock.error().describe().c_str());
  if (!sock) return 1;
  // A list request with the MAC flag and a MAC of zeros.
  auto body = rpcie::proto::message_encode(rpcie::proto::ListRequest{}, 5);
  body->at(6) |= static_cast<std::uint8_t>(rpcie::proto::kFlagMac);
  body->resize(body->size() + rpcie::proto::kMacTrailer, 0);
  auto s = sock->frame_send_raw(*body, soon());
  CHECK_THAT(s.has_value(), "forged frame sent");
  // Then a genuine one: the answer must be to it (id 6), the forged one dropped.
  s = sock->message_send(rpcie::proto::ListRequest{}, 6, soon());
  auto reply = s ? sock->message_recv(soon()) : tl::unexpected(s.error());
  CHECK_THAT(reply && reply->decoded.header.request_id == 6 &&
                 std::holds_alternative<rpcie::proto::ListReply>(reply->decoded.message),
             "only the genuine request is answered: %s",
             reply ? rpcie::proto::msg_type_name(reply->decoded.header.type) : reply.error().describe().c_str());
  ok("a frame with a bad MAC is dropped, the connection goes on");
  return g_failures ? 1 : 0;
}

int list_print(const Common& c) {
  auto l = rpcie::client::exports_list(c.host, c.port, c.options, soon());
  if (!l) {
    std::printf("FAIL: list: %s\n", l.error().describe().c_str());
    return 1;
  }
  for (const auto& e : *l)
    std::printf("%s %s %s\n", e.name.c_str(), e.attached ? "attached" : "free",
                e.holder.empty() ? "-" : e.holder.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  CLI::App app{"rpcie-devcheck"};
  app.require_subcommand(1);
  std::string remote, psk = "/etc/rpcie/psk", provider = "auto", window = "1M";
  Common c;
  app.add_option("-r,--remote", remote)->required();
  app.add_option("--psk-file", psk);
  app.add_option("--name", c.options.name);
  app.add_option("--provider", provider);
  app.add_option("--window", window);
  std::string data_path = "auto";
  app.add_option("--data-path", data_path, "sealed, open or auto (the client's choice)");
  std::string name;
  std::string size = "64M";
  int seconds = 30;
  std::map<std::string, CLI::App*> cmds;
  for (const char* cmd : {"edu", "push", "posted", "membar", "errors", "hostile", "busy", "hold", "reattach",
                          "postedfail", "linkloss", "attachfail", "resume", "dmaresume", "barresume"}) {
    cmds[cmd] = app.add_subcommand(cmd);
    cmds[cmd]->add_option("export", name)->required();
  }
  cmds["membar"]->add_option("size", size);
  int gap_ms = 0;
  double limit = 100;
  int outliers = 0;
  cmds["posted"]->add_option("--gap-ms", gap_ms, "pause before each burst")->check(CLI::Range(0, 1000));
  cmds["posted"]->add_option("--limit", limit, "round trips a burst may take")->check(CLI::Range(1.0, 10000.0));
  cmds["posted"]
      ->add_option("--outliers", outliers, "bursts of the five that may take longer")
      ->check(CLI::Range(0, 4));
  int peer_pid = 0;
  cmds["posted"]->add_option("--exporter-pid", peer_pid, "the exporter's process, whose threads a slow burst reports");
  cmds["hold"]->add_option("seconds", seconds);
  cmds["resume"]->add_option("seconds", seconds);
  std::string go;
  cmds["barresume"]->add_option("go", go, "created by the script once the link is down")->required();
  int expect_code = 0;
  std::string expect_text;
  cmds["attachfail"]->add_option("errno", expect_code)->required();
  cmds["attachfail"]->add_option("text", expect_text)->required();
  cmds["badmac"] = app.add_subcommand("badmac");
  cmds["list"] = app.add_subcommand("list");
  CLI11_PARSE(app, argc, argv);

  auto address = rpcie::address_parse(remote, rpcie::kDefaultPort);
  auto key = rpcie::auth::key_load(psk);
  std::string why;
  auto choice = rpcie::providers::provider_parse(provider, &why);
  auto window_bytes = rpcie::size_parse(window);
  auto data_path_choice = rpcie::data_path_choice_parse(data_path);
  if (!data_path_choice) {
    std::printf("FAIL: bad arguments: %s\n", data_path_choice.error().message.c_str());
    return 2;
  }
  c.options.data_path = *data_path_choice;
  auto size_bytes = rpcie::size_parse(size);
  if (!address || !key || !choice || !window_bytes || !size_bytes) {
    std::printf("FAIL: bad arguments: %s\n", !address ? address.error().message.c_str()
                                             : !key   ? key.error().describe().c_str()
                                                      : why.c_str());
    return 2;
  }
  c.host = address->first;
  c.port = address->second;
  c.options.key = std::make_shared<const rpcie::auth::Key>(std::move(*key));
  c.options.provider = *choice;
  c.window = *window_bytes;

  if (*cmds["edu"]) return edu_check(c, name);
  if (*cmds["posted"]) return posted_check(c, name, std::chrono::milliseconds(gap_ms), limit, outliers, peer_pid);
  if (*cmds["push"]) return push_check(c, name);
  if (*cmds["membar"]) return membar_check(c, name, *size_bytes);
  if (*cmds["errors"]) return errors_check(c, name);
  if (*cmds["hostile"]) return hostile_check(c, name);
  if (*cmds["busy"]) return busy_check(c, name);
  if (*cmds["hold"]) return hold(c, name, seconds);
  if (*cmds["reattach"]) return reattach_check(c, name);
  if (*cmds["postedfail"]) return postedfail_check(c, name);
  if (*cmds["linkloss"]) return linkloss_check(c, name);
  if (*cmds["resume"]) return resume_check(c, name, seconds);
  if (*cmds["dmaresume"]) return dma_resume_check(c, name);
  if (*cmds["barresume"]) return bar_resume_check(c, name, go);
  if (*cmds["attachfail"]) return attachfail_check(c, name, expect_code, expect_text);
  if (*cmds["badmac"]) return badmac_check(c);
  return list_print(c);
}
