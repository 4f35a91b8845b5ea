// rpcie-devcheck: posted writes — batched whatever the load, and a refused one reported.
#include <algorithm>
#include <thread>
#include <vector>

#include "devcheck_support.hpp"
#include "rpcie/edu_registers.hpp"

namespace rpcie::devcheck {

using namespace std::chrono_literals;
using namespace edu;  // the register map

namespace {

// The cost of one round trip, measured here: the median of 50 register reads.
double round_trip_median(Attachment& a) {
  std::vector<double> rtt;
  for (int i = 0; i < 50; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    (void)rd(a, kRegLiveness);
    rtt.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(rtt.begin(), rtt.end());
  return rtt[rtt.size() / 2];
}

struct BurstResult {
  double round_trips = 0;  // the burst's time in round trips of `one`
  std::uint64_t sent = 0;  // messages that carried it
};

// Burst `attempt`: 1000 posted writes then a read, its data and reply count checked. Prints
// its time; one over `limit` round trips also lists each thread's time on a CPU and waiting
// for one, the exporter's (peer_pid) and the kernel's softirq threads' too: who was kept
// waiting.
BurstResult posted_burst(Attachment& a, int attempt, double one, double limit, int peer_pid) {
  const auto replies_before = a.channel_stats().messages_received;
  const auto sent_before = a.channel_stats().messages_sent;
  const auto sched_before = ThreadTimes::now();
  const auto peer_before = peer_pid ? ThreadTimes::now(peer_pid) : ThreadTimes{};
  const auto softirq_before = ThreadTimes::softirq();
  // One deadline for the burst, as a driver's operation has one: a clock read per write
  // (~35 ns on this VM) would be the application's cost, not the library's.
  auto t0 = std::chrono::steady_clock::now();
  const Deadline burst = Deadline::after(5s);
  for (std::uint32_t i = 1; i <= 1000; ++i) wr(a, kRegLiveness, i + 1000 * attempt, 4, burst);
  const double posting = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  const std::uint64_t last = rd(a, kRegLiveness);
  const double took = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  const auto replies = a.channel_stats().messages_received - replies_before;
  // How the writes left: a batching fault shows as ~1000 messages, not the time alone.
  const auto sent = a.channel_stats().messages_sent - sent_before;
  CHECK_THAT(last == (~(1000u + 1000 * attempt) & 0xffffffffu), "the read sees the last write (got %#llx)",
             static_cast<unsigned long long>(last));
  CHECK_THAT(replies == 1, "1000 posted writes + 1 read took %llu replies (posted writes are not acknowledged)",
             static_cast<unsigned long long>(replies));
  std::printf(
      "1000 posted writes + read: %.0f us (posting %.0f us) = %.1f round trips of %.1f us, %llu reply, %llu "
      "messages sent\n",
      took, posting, took / one, one, static_cast<unsigned long long>(replies), static_cast<unsigned long long>(sent));
  if (took > limit * one) {
    std::printf("%s", ThreadTimes::now().since(sched_before).c_str());
    if (peer_pid) std::printf(" exporter:\n%s", ThreadTimes::now(peer_pid).since(peer_before).c_str());
    std::printf(" kernel:\n%s", ThreadTimes::softirq().since(softirq_before).c_str());
  }
  return {took / one, sent};
}

}  // namespace

int posted_check(const Common& c, const std::string& name, std::chrono::milliseconds gap, double limit, int outliers,
                 int peer_pid) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  const double one = round_trip_median(*a);
  // Five bursts: data and reply counts checked in each, the time with RPCIE_TIMING_CHECKS=1
  // against `limit` round trips in all but `outliers` of them. A batching fault makes every
  // burst slow (each write alone: 250-700 round trips) and sends ~1000 messages; the
  // scheduler of this 2-core VM makes a burst slow now and then (a writer that lost its CPU
  // for a few ms: posting 2.8-8 ms instead of 0.3 ms; a read whose reply waited ~5 ms), and
  // in about one quiet suite run of five it did so in two bursts of five. The suite runs them
  // back to back against 100 with two outliers allowed, the median (14-26 measured), and
  // checks every burst's message count. Issue 13 point 4's target, 30 in every run with
  // bursts 20 ms apart and a busy third process on one of the CPUs, is measured by
  // tests/integration/posted_load.sh: a few bursts in 100 still go over (a thread the busy
  // process kept off its CPU for a tick; shm's cold bursts at 30-35). On this VM the first
  // message after a pause costs 50-100 us by itself (its AEAD seal alone 30-50 us: a cold
  // core).
  constexpr std::uint64_t kMessagesMax = 300;
  double worst = 0;
  int over = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    // With a gap (20 ms, as a driver's bursts come): a process that asks for more than its
    // share of a CPU it shares with a busy one is preempted for whole time slices (~3 ms, a
    // hundred round trips) whatever it does; one that sleeps between bursts is not.
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
    const auto b = posted_burst(*a, attempt, one, limit, peer_pid);
    if (b.round_trips > limit) ++over;
    worst = std::max(worst, b.round_trips);
    // Batching itself, burst by burst: 13-155 messages measured, quiet or with the writer
    // preempted; 1000 when each write leaves alone. Timed builds only (a sanitizer's slower
    // writes fill fewer per batch window).
    CHECK_THAT(!timing_checked() || b.sent <= kMessagesMax,
               "burst %d: 1000 posted writes left in %llu messages (max %llu)", attempt + 1,
               static_cast<unsigned long long>(b.sent), static_cast<unsigned long long>(kMessagesMax));
  }
  CHECK_THAT(!timing_checked() || over <= outliers,
             "%d of 5 bursts took over %.0f round trips (worst %.1f; %d allowed)", over, limit, worst, outliers);
  if (!timing_checked())
    std::printf("timing reported, not checked (RPCIE_TIMING_CHECKS=1 checks it): worst %.1f round trips\n", worst);
  else if (over <= outliers)
    std::printf("ok: 1000 posted writes and a read within %.0f round trips in %d of 5 bursts (worst %.1f)\n", limit,
                5 - over, worst);
  return check_failures ? 1 : 0;
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
  return check_failures ? 1 : 0;
}

}  // namespace rpcie::devcheck
