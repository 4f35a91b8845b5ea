// rpcie-devcheck: the device data paths — edu (registers, interrupts, DMA both ways, the
// ordering rules), streaming DMA (window_push) and memory BARs.
#include <algorithm>
#include <cstring>
#include <vector>

#include "devcheck_support.hpp"
#include "rpcie/edu_registers.hpp"

namespace rpcie::devcheck {

using namespace std::chrono_literals;
using namespace edu;  // the register map

namespace {

// edu DMA in both directions through the window, partial and out of the window.
void edu_dma_check(const Common& c, Attachment& a, Window& w) {
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
    edu_dma(a, src, kDmaBufferAddress, 4096, false, irq);
    edu_dma(a, kDmaBufferAddress, dst, 4096, true, irq);
    CHECK_THAT(fnv(w.base + dst, 4096) == sum, "round %d (%s): window holds the DMAed bytes on completion", round,
               irq ? "irq" : "poll");
  }
  ok("DMA both directions; data in the window when the interrupt / completion read arrives");

  // Partial transfer at an odd place inside the buffer.
  random_fill(w.base + 0x9000, 100, 7);
  edu_dma(a, 0x9000, kDmaBufferAddress + 0x123, 100, false, true);
  std::memset(w.base + 0xa000, 0, 200);
  edu_dma(a, kDmaBufferAddress + 0x123, 0xa000, 100, true, true);
  CHECK_THAT(std::memcmp(w.base + 0x9000, w.base + 0xa000, 100) == 0, "partial DMA");
  CHECK_THAT(w.base[0xa000 + 100] == 0, "DMA wrote past its count");
  ok("partial DMA");

  // A DMA that runs past the window's end is not performed, in either direction: not even
  // its part inside the window (the exporter logs the EFAULT; exportd.sh checks that), and
  // the device keeps working.
  random_fill(w.base + 0xb000, 4096, 8);
  edu_dma(a, 0xb000, kDmaBufferAddress, 4096, false, true);  // the device buffer: known bytes
  std::vector<std::uint8_t> tail(w.base + c.window - 16, w.base + c.window);
  for (auto& b : tail) b = static_cast<std::uint8_t>(~b);
  std::memcpy(w.base + c.window - 16, tail.data(), tail.size());
  edu_dma(a, kDmaBufferAddress, c.window - 16, 4096, true, true);  // device -> host, past the end
  CHECK_THAT(std::memcmp(w.base + c.window - 16, tail.data(), tail.size()) == 0,
             "an out-of-window DMA to the host wrote the window's last 16 bytes");
  edu_dma(a, c.window - 16, kDmaBufferAddress, 4096, false, true);  // host -> device, past the end
  std::memset(w.base + 0xc000, 0, 4096);
  edu_dma(a, kDmaBufferAddress, 0xc000, 4096, true, true);
  CHECK_THAT(std::memcmp(w.base + 0xb000, w.base + 0xc000, 4096) == 0,
             "an out-of-window DMA from the host changed the device buffer");
  CHECK_THAT(rd(a, kRegId) == 0x010000ed, "device alive after an out-of-window DMA");
  ok("out-of-window DMA not performed in either direction (window and device bytes unchanged), device alive");
}

}  // namespace

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

  edu_dma_check(c, *a, w);

  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  auto after = a->mmio_read(0, kRegId, 4, soon());
  CHECK_THAT(!after && after.error().code == ENOTCONN, "use after detach gives ENOTCONN");
  ok("detach");
  return check_failures ? 1 : 0;
}

namespace {

// One attachment of push_check's, and what its sections share.
struct PushRun {
  Attachment& a;
  Window& w;
  bool mirror;

  void push(std::uint64_t at, std::uint64_t n) {
    auto r = a.window_push(at, n, soon());
    CHECK_THAT(r.has_value(), "window_push %#llx+%llu: %s", static_cast<unsigned long long>(at),
               static_cast<unsigned long long>(n), r ? "" : r.error().describe().c_str());
  }
  // Device buffer -> window [dst, +n), then compare with `want`.
  void device_matches(std::uint64_t dst, const std::vector<std::uint8_t>& want, const char* what) {
    std::memset(w.base + dst, 0, want.size());
    edu_dma(a, kDmaBufferAddress, dst, want.size(), true, true);
    CHECK_THAT(std::memcmp(w.base + dst, want.data(), want.size()) == 0, "%s (%s export)", what,
               mirror ? "mirror" : "on-demand");
  }
  // Order: a push after a doorbell does not overtake it; the next doorbell finds it. The
  // doorbell is the last of several writes in a row, so it waits in the batch when the push
  // comes. `len` bytes at `at` are pushed twice around it (a 2 KiB DMA reads each time);
  // `writes_ahead` register writes before the doorbell keep the exporter busy meanwhile.
  // (Mirror only: an on-demand device reads whatever the window holds when the DMA runs.)
  void order_check(std::uint64_t at, std::uint64_t len, std::uint32_t writes_ahead, std::uint64_t check_at,
                   const char* what) {
    random_fill(w.base + at, len, 90);
    std::vector<std::uint8_t> both(w.base + at, w.base + at + 2048);
    push(at, len);
    for (std::uint32_t i = 0; i < writes_ahead; ++i) wr(a, kRegLiveness, i);
    wr(a, kRegDmaSrc, at, 8);
    wr(a, kRegDmaDst, kDmaBufferAddress, 8);
    wr(a, kRegDmaCount, 2048, 8);
    std::uint64_t seen = a.interrupt_count(0);
    wr(a, kRegDmaCmd, 1 | 4, 8);
    random_fill(w.base + at, len, 91);
    both.insert(both.end(), w.base + at, w.base + at + 2048);
    push(at, len);
    auto n = a.interrupt_wait(0, seen, soon());
    CHECK_THAT(n.has_value(), "first DMA interrupt (%s): %s", what, n ? "" : n.error().describe().c_str());
    wr(a, kRegIrqAck, 0x100);
    seen = a.interrupt_count(0);
    wr(a, kRegDmaDst, kDmaBufferAddress + 2048, 8);
    wr(a, kRegDmaCmd, 1 | 4, 8);
    n = a.interrupt_wait(0, seen, soon());
    CHECK_THAT(n.has_value(), "second DMA interrupt (%s): %s", what, n ? "" : n.error().describe().c_str());
    wr(a, kRegIrqAck, 0x100);
    device_matches(check_at, both, what);
  }
};

// Rounds of push + doorbell: the device has the pushed bytes when its interrupt arrives. Then
// what the device reads is the window as it was at the push: bytes changed afterwards
// without a push do not reach a mirror (and do reach an on-demand device, which reads live).
void push_rounds_check(PushRun& run) {
  Window& w = run.w;
  for (int round = 0; round < 4; ++round) {
    const std::uint64_t src = 0x2000 * (1 + round);
    random_fill(w.base + src, 4096, 500 + round);
    std::vector<std::uint8_t> want(w.base + src, w.base + src + 4096);
    run.push(src, 4096);
    edu_dma(run.a, src, kDmaBufferAddress, 4096, false, true);
    run.device_matches(kDmaBufferAddress + 0x1000 * round, want, "pushed bytes reach the device");
  }
  ok("push then doorbell: the device reads the pushed bytes (4 rounds)");

  const std::uint64_t src = 0x20000;
  random_fill(w.base + src, 4096, 77);
  std::vector<std::uint8_t> pushed(w.base + src, w.base + src + 4096);
  run.push(src, 4096);
  random_fill(w.base + src, 4096, 78);
  std::vector<std::uint8_t> later(w.base + src, w.base + src + 4096);
  edu_dma(run.a, src, kDmaBufferAddress, 4096, false, true);
  run.device_matches(0x50000, run.mirror ? pushed : later, "the device reads the bytes of the push, not later ones");
  ok(run.mirror ? "mirror: the device sees the window as pushed, nothing pulled"
                : "on-demand: push has no effect, the device reads the window");
}

// Pushes either side of what travels inside a message (8 KiB), and far larger (one-sided
// writes into the mirror).
void push_sizes_check(PushRun& run, std::uint64_t big_len) {
  Window& w = run.w;
  // Either side of 8 KiB: the last 4 KiB of each push reach the device.
  for (std::uint64_t len : {std::uint64_t{8192}, std::uint64_t{8193}}) {
    const std::uint64_t at = 0x30000;
    random_fill(w.base + at, len, static_cast<std::uint32_t>(len));
    std::vector<std::uint8_t> tail(w.base + at + len - 4096, w.base + at + len);
    run.push(at, len);
    edu_dma(run.a, at + len - 4096, kDmaBufferAddress, 4096, false, true);
    run.device_matches(0x58000, tail, len == 8192 ? "an 8 KiB push (in the message)" : "an 8 KiB + 1 push (one-sided)");
  }
  ok("pushes of 8 KiB and 8 KiB + 1 (message and one-sided)");

  const std::uint64_t big = 0x80000;
  random_fill(w.base + big, big_len, 123);
  std::vector<std::uint8_t> tail(w.base + big + big_len - 4096, w.base + big + big_len);
  run.push(big, big_len);
  std::memset(w.base + big + big_len - 4096, 0xee, 4096);  // after the push: must not be seen in mirror mode
  if (!run.mirror) std::memcpy(w.base + big + big_len - 4096, tail.data(), 4096);
  edu_dma(run.a, big + big_len - 4096, kDmaBufferAddress, 4096, false, true);
  run.device_matches(0x70000, tail, "a 64 KiB push (one-sided) reaches the device");
  ok("64 KiB push, one-sided");
}

}  // namespace

// Streaming DMA: ClientOptions::window_push. On a mirror export the device reads exactly the
// bytes pushed (as they were at the push, not what the window holds later: nothing is pulled
// before the doorbell), pushes and posted writes keep their order, large pushes go one-sided.
// On an on-demand export the push does nothing and the device reads the window itself.
int push_check(Common c, const std::string& name) {
  c.options.window_push = true;
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  PushRun run{*a, w, a->device().mirror};
  push_rounds_check(run);
  if (run.mirror) {
    run.order_check(0x20000, 2048, 1, 0x60000, "two pushes in messages around a doorbell keep their order");
    ok("push / doorbell / push / doorbell keep their order");
    // Too large for a message: one-sided writes into the mirror, which must not land before
    // the device has performed the doorbell ahead of them.
    run.order_check(0x40000, 16 << 10, 1000, 0x68000, "two one-sided pushes around a doorbell keep their order");
    ok("one-sided push / doorbell / push / doorbell keep their order");
  }
  const std::uint64_t big_len = 64 << 10;
  push_sizes_check(run, big_len);

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
  CHECK_THAT(pushed_total == (run.mirror ? 4 * 4096 + 4096 + 2 * 2048 + 2 * (16 << 10) + 8192 + 8193 + big_len : 0u),
             "bytes pushed counted: %llu", static_cast<unsigned long long>(pushed_total));
  ok("pushes outside the window refused (EINVAL)");
  auto d = a->detach(soon());
  CHECK_THAT(d.has_value(), "detach: %s", d ? "" : d.error().describe().c_str());
  return check_failures ? 1 : 0;
}

namespace {

// bar_write_fill: the caller fills the staging buffer piece by piece, each byte asked for
// once and in order (as hostd's spliced writes need); an error from the fill ends the write.
void membar_fill_check(Attachment& a, const std::vector<std::uint8_t>& data, std::size_t size) {
  const std::uint64_t at = 4099;  // unaligned
  const std::size_t n = std::min<std::size_t>(size - at, 9u << 20);
  std::vector<std::uint8_t> fresh(n);
  random_fill(fresh.data(), n, 44);
  std::uint64_t expected_at = 0, pieces = 0;
  bool in_order = true;
  auto filled = a.bar_write_fill(
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
  auto rd_ok = a.bar_read(0, at, seen, Deadline::after(60s));
  CHECK_THAT(rd_ok && fnv(seen.data(), n) == fnv(fresh.data(), n), "checksum after bar_write_fill");
  auto refused = a.bar_write_fill(
      0, 0, 16,
      [](std::uint64_t, std::span<std::uint8_t>) -> rpcie::Result<void> { return rpcie::fail(EPIPE, "source gone"); },
      soon());
  CHECK_THAT(!refused && refused.error().code == EPIPE, "a fill that fails ends bar_write_fill with its error");
  rd_ok = a.bar_read(0, 0, std::span(seen.data(), 16), soon());
  CHECK_THAT(rd_ok && std::memcmp(seen.data(), data.data(), 16) == 0, "a failed fill wrote nothing");
  ok("membar bar_write_fill: pieces in order, checksum equal; a failing fill writes nothing and returns its error");
}

// Zero-copy from / into the window, at an unaligned offset.
void membar_window_check(Attachment& a, Window& w) {
  random_fill(w.base, 1u << 20, 43);
  const auto sum = fnv(w.base, 1u << 20);
  auto z = a.bar_write_from_window(0, 12345, 0, 1u << 20, soon());
  CHECK_THAT(z.has_value(), "bar_write_from_window: %s", z ? "" : z.error().describe().c_str());
  std::memset(w.base + (2u << 20), 0, 1u << 20);
  z = a.bar_read_into_window(0, 12345, 2u << 20, 1u << 20, soon());
  CHECK_THAT(z.has_value(), "bar_read_into_window: %s", z ? "" : z.error().describe().c_str());
  CHECK_THAT(fnv(w.base + (2u << 20), 1u << 20) == sum, "zero-copy checksum");
  ok("membar zero-copy write/read, checksum equal");
}

// A burst of posted writes of every width, more than one batch holds, in order: a later
// write to the same place wins; with one bad write in it, none is queued.
void membar_burst_check(Attachment& a) {
  std::vector<Attachment::PostedWrite> burst;
  for (std::uint64_t i = 0; i < 600; ++i) {
    const unsigned width = 1u << (i % 4);
    burst.push_back(
        {0, width, 8192 + i * 8, (0x0102030405060708ull * (i + 1)) & (width == 8 ? ~0ull : (1ull << (8 * width)) - 1)});
  }
  burst.push_back({0, 8, 8192, 0xfeedface});  // overwrites the first
  auto sent = a.mmio_write_burst(burst, soon());
  CHECK_THAT(sent.has_value(), "mmio_write_burst: %s", sent ? "" : sent.error().describe().c_str());
  bool burst_ok = true;
  for (std::size_t i = 1; i < 600; ++i) {
    auto got = a.mmio_read(0, burst[i].offset, burst[i].width, soon());
    burst_ok = burst_ok && got && *got == burst[i].value;
  }
  auto first = a.mmio_read(0, 8192, 8, soon());
  CHECK_THAT(burst_ok && first && *first == 0xfeedface, "the burst's writes read back, the last write to 8192 wins");
  std::vector<Attachment::PostedWrite> bad{{0, 8, 8192, 1}, {0, 8, 8193, 2}};
  auto refused = a.mmio_write_burst(bad, soon());
  first = a.mmio_read(0, 8192, 8, soon());
  CHECK_THAT(!refused && refused.error().code == EINVAL && first && *first == 0xfeedface,
             "a burst with an unaligned write is EINVAL and queues nothing");
  ok("membar: a burst of 601 posted writes arrives in order; a bad burst queues nothing");
}

}  // namespace

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
  membar_fill_check(*a, data, size);
  membar_window_check(*a, w);
  auto oob = a->bar_write(0, bar ? bar->size - 8 : 0, std::span(data.data(), 16), soon());
  CHECK_THAT(!oob && oob.error().code == EINVAL, "write past the BAR end is EINVAL");
  ok("membar range check");
  membar_burst_check(*a);
  return check_failures ? 1 : 0;
}

}  // namespace rpcie::devcheck
