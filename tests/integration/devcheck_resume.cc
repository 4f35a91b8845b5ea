// rpcie-devcheck: a lost link — resumed with nothing lost (posted writes, a device's DMA, a
// memory-BAR write made while it is down), or ended with an error.
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "devcheck_support.hpp"
#include "rpcie/edu_registers.hpp"

namespace rpcie::devcheck {

using namespace std::chrono_literals;
using namespace edu;  // the register map

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
  while (!until.expired() && check_failures == 0) {
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
  return check_failures == 0 ? 0 : 1;
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
  if (check_failures == 0) ok("a DMA into the window due while the link was down arrived whole before its interrupt");
  wr(*a, kRegIrqAck, 0x100);
  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  return check_failures == 0 ? 0 : 1;
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
  if (check_failures == 0) ok("a memory-BAR write made while the link was down is in the BAR after the resumption");
  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  return check_failures == 0 ? 0 : 1;
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
  return check_failures ? 1 : 0;
}

}  // namespace rpcie::devcheck
