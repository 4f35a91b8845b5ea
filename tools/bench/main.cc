// rpcie-bench — raw libfabric vs the rpcie core, side by side, in one run.
//
//   rpcie-bench [--provider P] [--rounds N] [-o json]             both ends, two pinned processes
//   rpcie-bench --serve [--listen ADDR[:PORT]] [--provider P]     the target end, for one client
//   rpcie-bench -r HOST[:PORT] [--provider P] [--rounds N]         the initiator end
//
// Workloads: rma_write and rma_read at 8 B .. 4 MiB with a window of operations in flight,
// and round_trip (8 B message and reply, one at a time). Every (workload, size) runs N
// rounds, alternating which implementation goes first; the reported ratio rpcie/raw is the
// median of the per-round ratios, the raw and rpcie columns the medians of each.
//
// Connections (all from the initiator): a control socket (commands and round barriers), two
// rpcie sessions (RMA rounds; round trips), and the raw loop's own socket (raw_loop.cc uses
// no rpcie code).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "../common.hpp"
#include "frontend.hpp"
#include "raw_loop.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/client.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"
#include "rpcie/session.hpp"
#include "rpcie/units.hpp"
#include "support.hpp"

namespace {

using namespace rpcie;
using bench::die;
using bench::median;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxSize = 4u << 20;
constexpr std::size_t kWindow = 64;

struct Options {
  std::string provider;
  unsigned rounds = 5;
  std::string output = "text";
  bool serve = false;
  std::string listen = "127.0.0.1:0";
  std::string remote;
  int cpu = -1;
  bool delivery_complete = false;
  bool verbose = false;
  bool target_no_wait_fd = false;
  bool device = false;
  std::string exportd;
  std::vector<std::size_t> sizes{8, 4096, 65536, 1u << 20, 4u << 20};
};

// One command on the control socket, initiator -> target.
struct Command {
  std::uint8_t impl = 0;  // 0 raw, 1 rpcie, 2 quit
  std::uint8_t workload = 0;
  std::uint16_t window = 0;  // raw RMA: operations in flight (0: the default window)
  std::uint8_t pad[4] = {};
  std::uint64_t size = 0;
  std::uint64_t iterations = 0;
};

const char* workload_name(rawbench::Workload w) {
  switch (w) {
    case rawbench::Workload::rma_write:
      return "rma_write";
    case rawbench::Workload::rma_read:
      return "rma_read";
    case rawbench::Workload::round_trip:
      return "round_trip";
  }
  return "?";
}

Result<void> byte_send(Socket& s, char c) {
  return s.bytes_send(std::span(reinterpret_cast<const std::uint8_t*>(&c), 1), Deadline::after(60s));
}
Result<char> byte_recv(Socket& s) {
  char c = 0;
  auto r = s.bytes_recv(std::span(reinterpret_cast<std::uint8_t*>(&c), 1), Deadline::after(60s));
  if (!r) return tl::unexpected(r.error());
  return c;
}

// Both ends: the three connections and what stands on them.
struct Peers {
  Socket control;
  Socket raw_socket;
  std::unique_ptr<rawbench::RawPeer> raw;
  std::optional<HostBuffer> memory;     // before the sessions: outlives their registrations
  std::unique_ptr<Session> session;     // RMA rounds
  std::unique_ptr<Session> session_rt;  // round trips

  // The kMaxSize buffer each end offers for RMA, and the region that describes it.
  Result<LocalRegion> region_open() {
    auto m = HostBuffer::create(kMaxSize);
    if (!m) return tl::unexpected(m.error());
    memory.emplace(std::move(*m));
    return LocalRegion{0, memory->data(), memory->size()};
  }
};

bool g_delivery_complete = false;
bool g_target_no_wait_fd = false;

SessionOptions session_options(providers::ProviderChoice choice) {
  SessionOptions so;
  so.provider = choice;
  so.channel.window = kWindow;
  so.channel.delivery_complete_force = g_delivery_complete;
  return so;
}

// --- target ---

int target_run(Listener& listener, providers::ProviderChoice choice) {
  Peers p{};
  auto accept = [&]() { return listener.accept(Deadline::after(30s)); };
  auto c = accept();
  if (!c) return die("control connection: " + c.error().describe());
  p.control = std::move(*c);
  auto region = p.region_open();
  if (!region) return die(region.error().describe());
  auto bs = accept();
  if (!bs) return die("bootstrap connection: " + bs.error().describe());
  // For RMA rounds the target is only an RMA target, driven by a ProgressThread as a
  // device-side attachment would be; it sleeps on the CQ wait fd when idle (unless
  // --target-no-wait-fd). Round trips are request/response, latency-bound, and use a
  // session of their own without a wait fd (FabricOptions::cq_wait_fd explains the cost).
  SessionOptions so = session_options(choice);
  so.cq_wait_fd = !g_target_no_wait_fd;
  auto session = Session::accept(std::move(*bs), so, std::span(&*region, 1), Deadline::after(30s));
  if (!session) return die("rpcie handshake: " + session.error().describe());
  p.session = std::move(*session);
  auto bs_rt = accept();
  if (!bs_rt) return die("bootstrap connection: " + bs_rt.error().describe());
  auto session_rt = Session::accept(std::move(*bs_rt), session_options(choice), {}, Deadline::after(30s));
  if (!session_rt) return die("rpcie handshake: " + session_rt.error().describe());
  p.session_rt = std::move(*session_rt);
  auto rs = accept();
  if (!rs) return die("raw connection: " + rs.error().describe());
  p.raw_socket = std::move(*rs);
  rawbench::RawConfig rc;
  rc.prov_name = p.session->peer().provider;
  rc.node = p.raw_socket.local_address();
  if (rc.prov_name == "shm") rc.node.clear();
  std::string err;
  p.raw = rawbench::RawPeer::open(rc, p.raw_socket.fd(), true, &err);
  if (!p.raw) return die("raw loop: " + err);

  Channel& ch = p.session->channel();
  Channel& ch_rt = p.session_rt->channel();
  for (;;) {
    Command cmd;
    auto r = p.control.bytes_recv(std::span(reinterpret_cast<std::uint8_t*>(&cmd), sizeof cmd), Deadline::after(120s));
    if (!r) return die("control: " + r.error().describe());
    if (cmd.impl == 2) return 0;
    auto w = static_cast<rawbench::Workload>(cmd.workload);
    bool ok = true;
    std::string why;
    if (!byte_send(p.control, 'R')) return die("control send");
    if (cmd.impl == 0) {
      ok = p.raw->serve(w, cmd.size, cmd.iterations, &why);
    } else if (w == rawbench::Workload::round_trip) {
      for (std::uint64_t i = 0; ok && i < cmd.iterations; ++i) {
        auto m = ch_rt.message_recv(Deadline::after(30s));
        auto* ping = m ? std::get_if<proto::Ping>(&(*m)->message) : nullptr;
        ok = ping && ch_rt.message_send(proto::Pong{{ping->data}}, (*m)->header.request_id, Deadline::after(30s));
        if (!ok) why = m ? "bad message" : m.error().describe();
      }
    } else {
      // Only the target of one-sided RMA: a progress thread drives the CQ, as in a device
      // server, while this thread waits for the end of the round.
      ProgressThread progress(ch);
      auto end = byte_recv(p.control);
      ok = end && *end == 'E';
      if (!ok) why = "round did not end cleanly";
    }
    if (!ok) RPCIE_LOG_ERROR("bench", "target round failed: {}", why);
    if (!byte_send(p.control, ok ? 'K' : 'F')) return die("control send");
  }
}

// --- initiator ---

struct Round {
  double raw = 0;
  double rpcie = 0;
};

// A first guess for the warm-up; the timed rounds are then sized from the raw warm-up so
// that each takes about kRoundSeconds (short rounds on a noisy 2-core VM are mostly noise).
std::size_t iterations_guess(rawbench::Workload w, std::size_t size) {
  if (w == rawbench::Workload::round_trip) return 2000;
  return std::clamp<std::size_t>((32u << 20) / size, 16, 4000);
}
constexpr double kRoundSeconds = 0.2;
constexpr unsigned kSlices = 8;

// Runs one round of one implementation; returns seconds.
Result<double> round_run(Peers& p, std::uint8_t impl, rawbench::Workload w, std::size_t size, std::size_t iterations,
                         std::uint16_t window = 0) {
  Command cmd;
  cmd.impl = impl;
  cmd.workload = static_cast<std::uint8_t>(w);
  cmd.window = window;
  cmd.size = size;
  cmd.iterations = iterations;
  auto s =
      p.control.bytes_send(std::span(reinterpret_cast<const std::uint8_t*>(&cmd), sizeof cmd), Deadline::after(30s));
  if (!s) return tl::unexpected(s.error());
  auto ready = byte_recv(p.control);
  if (!ready || *ready != 'R') return fail(EPROTO, "target not ready");
  double seconds = 0;
  if (impl == 0) {
    std::string err;
    seconds = p.raw->run(w, size, iterations, &err, window);
    if (seconds < 0) return fail(EIO, "raw loop: " + err);
  } else {
    Channel& ch = w == rawbench::Workload::round_trip ? p.session_rt->channel() : p.session->channel();
    const MemoryRegion& mr = p.session->region(0);
    auto remote = p.session->peer_region(0);
    if (!remote) return tl::unexpected(remote.error());
    auto deadline = Deadline::after(60s);
    auto t0 = Clock::now();
    Result<void> r;
    if (w == rawbench::Workload::round_trip) {
      std::uint64_t payload = 0x5250434945424e43ULL;
      auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(&payload), sizeof payload);
      for (std::size_t i = 0; r && i < iterations; ++i) {
        r = ch.message_send(proto::Ping{bytes}, i, deadline);
        if (!r) break;
        auto m = ch.message_recv(deadline);
        if (!m)
          r = tl::unexpected(m.error());
        else if (!std::holds_alternative<proto::Pong>((*m)->message))
          r = fail(EPROTO, "expected pong");
      }
    } else {
      bool write = w == rawbench::Workload::rma_write;
      for (std::size_t i = 0; r && i < iterations; ++i)
        r = write ? ch.rma_write(mr, 0, *remote, 0, size, deadline) : ch.rma_read(mr, 0, *remote, 0, size, deadline);
      if (r) r = ch.rma_flush(deadline);
    }
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (w != rawbench::Workload::round_trip) {
      auto e = byte_send(p.control, 'E');
      if (!e) return tl::unexpected(e.error());
    }
    if (!r) return tl::unexpected(r.error());
  }
  auto done = byte_recv(p.control);
  if (!done || *done != 'K') return fail(EIO, "target reported a failed round");
  return seconds;
}

// --- device workloads: the client API against a real rpcie-exportd ------------------------
//
// The exporter runs as a child on the target's CPU with an edu and a membar export; the raw
// baselines run against the usual target. Per workload, slices alternate raw and rpcie.
//   mmio_read  4 B MMIO read (edu liveness register)      vs raw round_trip 8 B      (us)
//   bar_write  1 MiB to the membar BAR from the window     vs raw rma_write 1 MiB     (MB/s)
//   bar_read   1 MiB from the membar BAR into the window   vs raw rma_read 1 MiB      (MB/s)
//   edu_dma    4 KiB host->device DMA, command to interrupt seen (on-demand: the exporter
//              reads the window)
//              vs raw 4 KiB fi_read round trip (window 1) + half a raw 8 B round trip  (us)
//   edu_dma_push  the same on a mirror-mode edu with streaming DMA: window_push of the
//              4 KiB, then the command (same baseline)

int device_run(Peers& p, const Options& o, const std::string& prov_name) {
  stop_signals_install();  // Ctrl-C ends the run between rounds: the exporter is stopped, its directory removed
  auto dir = bench::TempDir::make("/tmp/rpcie-bench.");
  if (!dir) return die(dir.error().describe());
  const std::string psk = dir->path() + "/psk";
  if (auto k = auth::key_generate_file(psk, false); !k) return die(k.error().describe());
  bench::Child exporter;
  auto port = bench::exportd_start(exporter, bench::program_find(o.exportd, "rpcie-exportd", "devexport"),
                                   prov_name == "shm" ? "shm" : "tcp", psk,
                                   {"bench-edu=edu", "bench-mem=membar,size=4M", "bench-edu-push=edu,dma=mirror"});
  if (!port) return die(port.error().describe());
  auto key = auth::key_load(psk);
  if (!key) return die(key.error().describe());
  client::ClientOptions co;
  co.name = "bench";
  co.key = std::make_shared<const auth::Key>(std::move(*key));
  co.provider = *providers::provider_parse(prov_name == "shm" ? "shm" : "tcp");
  auto window = HostBuffer::create(kMaxSize);
  if (!window) return die(window.error().describe());
  auto edu =
      client::Attachment::open("127.0.0.1", *port, "bench-edu", co, {window->data(), 1u << 20}, Deadline::after(10s));
  if (!edu) return die("attach edu: " + edu.error().describe());
  auto mem = client::Attachment::open("127.0.0.1", *port, "bench-mem", co, {window->data() + (1u << 20), 2u << 20},
                                      Deadline::after(10s));
  if (!mem) return die("attach membar: " + mem.error().describe());
  client::ClientOptions co_push = co;
  co_push.window_push = true;
  auto edu_push = client::Attachment::open("127.0.0.1", *port, "bench-edu-push", co_push,
                                           {window->data() + (3u << 20), 1u << 20}, Deadline::after(10s));
  if (!edu_push) return die("attach edu (mirror, pushed): " + edu_push.error().describe());
  client::Attachment& E = **edu;
  client::Attachment& M = **mem;
  client::Attachment& P = **edu_push;
  auto deadline = [] { return Deadline::after(30s); };
  // edu DMA registers: 4 KiB from IOVA 0 of the window into the device buffer.
  for (client::Attachment* a : {&E, &P})
    for (auto [reg, v] : {std::pair<std::uint64_t, std::uint64_t>{0x80, 0}, {0x88, 0x40000}, {0x90, 4096}})
      if (!a->mmio_write(0, reg, 8, v, deadline())) return die("edu setup");
  // One DMA, then the acknowledge of its interrupt. `push`: streaming DMA. Adds the time
  // from the start of the command (the push included) to the interrupt seen to `timed`:
  // what the target measures; the acknowledge is outside it (the slice's total has it).
  auto dma_once = [&](client::Attachment& a, bool push, double& timed) -> Result<void> {
    const auto seen = a.interrupt_count(0);
    const auto start = Clock::now();
    Result<void> r{};
    if (push) r = a.window_push(0, 4096, deadline());
    if (r) r = a.mmio_write(0, 0x98, 8, 1 | 4, deadline());
    if (r) {
      auto irq = a.interrupt_wait(0, seen, deadline());
      if (!irq) r = tl::unexpected(irq.error());
    }
    timed += std::chrono::duration<double>(Clock::now() - start).count();
    if (r) r = a.mmio_write(0, 0x64, 4, 0x100, deadline());
    return r;
  };

  enum class W { mmio_read, bar_write, bar_read, edu_dma, edu_dma_push };
  struct Spec {
    W w;
    const char* name;
    std::size_t size;
    bool latency;
  };
  const Spec plan[] = {{W::mmio_read, "mmio_read", 4, true},
                       {W::bar_write, "bar_write", 1u << 20, false},
                       {W::bar_read, "bar_read", 1u << 20, false},
                       {W::edu_dma, "edu_dma", 4096, true},
                       {W::edu_dma_push, "edu_dma_push", 4096, true}};
  // Seconds for n operations: what the workload measures, and the whole loop (they differ
  // for the edu DMAs, whose acknowledge is not part of the measured interval).
  struct Times {
    double measured, loop;
  };
  auto acked = [](W w) { return w == W::edu_dma || w == W::edu_dma_push; };
  auto rpcie_slice = [&](W w, std::size_t n) -> Result<Times> {
    double timed = 0;
    auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      Result<void> r{};
      switch (w) {
        case W::mmio_read: {
          auto v = E.mmio_read(0, 0x04, 4, deadline());
          if (!v) r = tl::unexpected(v.error());
          break;
        }
        case W::bar_write:
          r = M.bar_write_from_window(0, 0, 0, 1u << 20, deadline());
          break;
        case W::bar_read:
          r = M.bar_read_into_window(0, 0, 0, 1u << 20, deadline());
          break;
        case W::edu_dma:
          r = dma_once(E, false, timed);
          break;
        case W::edu_dma_push:
          r = dma_once(P, true, timed);
          break;
      }
      if (!r) return tl::unexpected(r.error());
    }
    const double loop = std::chrono::duration<double>(Clock::now() - t0).count();
    return Times{acked(w) ? timed : loop, loop};
  };
  // Raw seconds for n operations of the baseline.
  auto raw_slice = [&](W w, std::size_t n) -> Result<double> {
    switch (w) {
      case W::mmio_read:
        return round_run(p, 0, rawbench::Workload::round_trip, 8, n);
      case W::bar_write:
        return round_run(p, 0, rawbench::Workload::rma_write, 1u << 20, n);
      case W::bar_read:
        return round_run(p, 0, rawbench::Workload::rma_read, 1u << 20, n);
      case W::edu_dma:
      case W::edu_dma_push: {
        auto rd = round_run(p, 0, rawbench::Workload::rma_read, 4096, n, 1);
        if (!rd) return rd;
        auto rt = round_run(p, 0, rawbench::Workload::round_trip, 8, n);
        if (!rt) return rt;
        return *rd + *rt / 2;
      }
    }
    return fail(EINVAL, "workload");
  };

  struct Row {
    const char* name;
    std::size_t size;
    double raw, rpcie, ratio;
    bool latency;
    double loop;  // edu rows: µs per DMA with its acknowledge (0 for the others)
  };
  std::vector<Row> rows;
  for (const Spec& sp : plan) {
    // Warm-up, and the slice size: about kRoundSeconds / kSlices of raw work.
    auto warm = raw_slice(sp.w, 64);
    if (!warm) return die(std::string(sp.name) + " raw warm-up: " + warm.error().describe());
    auto warm_r = rpcie_slice(sp.w, 64);
    if (!warm_r) return die(std::string(sp.name) + " warm-up: " + warm_r.error().describe());
    const std::size_t slice = std::clamp<std::size_t>(
        static_cast<std::size_t>(64.0 * kRoundSeconds / kSlices / std::max(*warm, 1e-6)), 8, 100000);
    std::vector<double> raws, rpcies, ratios, loops;
    for (unsigned round = 0; round < o.rounds; ++round) {
      if (stop_requested().load()) return die("interrupted");
      Round rd;
      double loop = 0;
      for (unsigned k = 0; k < 2 * kSlices; ++k) {
        const bool raw = (round + k) % 2 == 0;
        if (raw) {
          auto r = raw_slice(sp.w, slice);
          if (!r) return die(std::string(sp.name) + ": " + r.error().describe());
          rd.raw += *r;
        } else {
          auto r = rpcie_slice(sp.w, slice);
          if (!r) return die(std::string(sp.name) + ": " + r.error().describe());
          rd.rpcie += r->measured;
          loop += r->loop;
        }
      }
      const double n = static_cast<double>(slice * kSlices);
      loops.push_back(loop / n * 1e6);
      double raw_v = sp.latency ? rd.raw / n * 1e6 : static_cast<double>(sp.size) * n / rd.raw / 1e6;
      double rpcie_v = sp.latency ? rd.rpcie / n * 1e6 : static_cast<double>(sp.size) * n / rd.rpcie / 1e6;
      if (o.verbose)
        std::fprintf(stderr, "  %s round %u: raw %.2f rpcie %.2f ratio %.3f\n", sp.name, round, raw_v, rpcie_v,
                     rpcie_v / raw_v);
      raws.push_back(raw_v);
      rpcies.push_back(rpcie_v);
      ratios.push_back(rpcie_v / raw_v);
    }
    rows.push_back({sp.name, sp.size, median(raws), median(rpcies), median(ratios), sp.latency,
                    acked(sp.w) ? median(loops) : 0.0});
    if (o.output == "text") {
      const Row& r = rows.back();
      std::printf("%-12s %8zu %12.2f %12.2f %-5s %6.3f", r.name, r.size, r.raw, r.rpcie, r.latency ? "us" : "MB/s",
                  r.ratio);
      if (r.loop > 0) std::printf("   (%.2f us with the acknowledge)", r.loop);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  (void)E.detach(deadline());
  (void)M.detach(deadline());
  (void)P.detach(deadline());
  Command quit;
  quit.impl = 2;
  (void)p.control.bytes_send(std::span(reinterpret_cast<const std::uint8_t*>(&quit), sizeof quit), Deadline::after(5s));
  if (o.output == "json") {
    nlohmann::json j;
    j["provider"] = prov_name;
    j["rounds"] = o.rounds;
    j["results"] = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json row = {{"workload", r.name},
                            {"size", r.size},
                            {"raw", r.raw},
                            {"rpcie", r.rpcie},
                            {"unit", r.latency ? "us" : "MB/s"},
                            {"ratio", r.ratio}};
      if (r.loop > 0) row["rpcie_with_ack"] = r.loop;
      j["results"].push_back(row);
    }
    std::printf("%s\n", j.dump(1).c_str());
  }
  return 0;
}

int initiator_run(const std::string& host, std::uint16_t port, providers::ProviderChoice choice, const Options& o) {
  Peers p{};
  auto c = Socket::connect(host, port, Deadline::after(10s));
  if (!c) return die("control connection: " + c.error().describe());
  p.control = std::move(*c);
  auto region = p.region_open();
  if (!region) return die(region.error().describe());
  auto session = Session::connect(host, port, session_options(choice), std::span(&*region, 1), Deadline::after(30s));
  if (!session) return die("rpcie handshake: " + session.error().describe());
  p.session = std::move(*session);
  auto session_rt = Session::connect(host, port, session_options(choice), {}, Deadline::after(30s));
  if (!session_rt) return die("rpcie handshake: " + session_rt.error().describe());
  p.session_rt = std::move(*session_rt);
  auto rs = Socket::connect(host, port, Deadline::after(10s));
  if (!rs) return die("raw connection: " + rs.error().describe());
  p.raw_socket = std::move(*rs);
  rawbench::RawConfig rc;
  rc.prov_name = p.session->peer().provider;
  rc.node = rc.prov_name == "shm" ? std::string() : p.raw_socket.local_address();
  std::string err;
  p.raw = rawbench::RawPeer::open(rc, p.raw_socket.fd(), false, &err);
  if (!p.raw) return die("raw loop: " + err);

  struct Row {
    rawbench::Workload w;
    std::size_t size;
    double raw, rpcie, ratio;
  };
  std::vector<Row> rows;
  if (o.device) return device_run(p, o, rc.prov_name);
  std::vector<std::pair<rawbench::Workload, std::size_t>> plan;
  for (auto w : {rawbench::Workload::rma_write, rawbench::Workload::rma_read})
    for (auto s : o.sizes) plan.emplace_back(w, s);
  plan.emplace_back(rawbench::Workload::round_trip, 8);

  for (auto [w, size] : plan) {
    // Warm-up, untimed: connections established, caches and page tables hot; the raw
    // warm-up's speed sizes the timed rounds (same iteration count for both).
    std::size_t guess = iterations_guess(w, size);
    double raw_warm = 0;
    for (std::uint8_t impl : {0, 1}) {
      auto r = round_run(p, impl, w, size, guess);
      if (!r) return die(std::string(workload_name(w)) + " warm-up: " + r.error().describe());
      if (impl == 0) raw_warm = *r;
    }
    std::size_t iters = std::clamp<std::size_t>(
        static_cast<std::size_t>(static_cast<double>(guess) * kRoundSeconds / std::max(raw_warm, 1e-6)), 16, 2000000);
    std::vector<double> raws, rpcies, ratios;
    for (unsigned round = 0; round < o.rounds; ++round) {
      // A round is kSlices short slices, alternating raw and rpcie (and who goes first):
      // loopback tcp switches between fast and slow phases lasting a good part of a second,
      // and fine interleaving makes both implementations see the same phases.
      Round rd;
      std::size_t slice = std::max<std::size_t>(iters / kSlices, 1);
      for (unsigned k = 0; k < 2 * kSlices; ++k) {
        std::uint8_t impl = static_cast<std::uint8_t>((round + k) % 2);
        auto r = round_run(p, impl, w, size, slice);
        if (!r) return die(std::string(workload_name(w)) + ": " + r.error().describe());
        (impl == 0 ? rd.raw : rd.rpcie) += *r;
      }
      iters = slice * kSlices;
      double raw_v, rpcie_v;
      if (w == rawbench::Workload::round_trip) {
        raw_v = rd.raw / static_cast<double>(iters) * 1e6;
        rpcie_v = rd.rpcie / static_cast<double>(iters) * 1e6;
      } else {
        double bytes = static_cast<double>(size) * static_cast<double>(iters);
        raw_v = bytes / rd.raw / 1e6;
        rpcie_v = bytes / rd.rpcie / 1e6;
      }
      if (o.verbose)
        std::fprintf(stderr, "  %s %zu round %u: raw %.2f rpcie %.2f ratio %.3f\n", workload_name(w), size, round,
                     raw_v, rpcie_v, rpcie_v / raw_v);
      raws.push_back(raw_v);
      rpcies.push_back(rpcie_v);
      ratios.push_back(rpcie_v / raw_v);
    }
    rows.push_back({w, size, median(raws), median(rpcies), median(ratios)});
    if (o.output == "text") {
      const Row& r = rows.back();
      bool rt = w == rawbench::Workload::round_trip;
      std::printf("%-10s %8zu %12.2f %12.2f %-5s %6.3f\n", workload_name(w), size, r.raw, r.rpcie, rt ? "us" : "MB/s",
                  r.ratio);
      std::fflush(stdout);
    }
  }
  Command quit;
  quit.impl = 2;
  (void)p.control.bytes_send(std::span(reinterpret_cast<const std::uint8_t*>(&quit), sizeof quit), Deadline::after(5s));

  if (o.output == "json") {
    nlohmann::json j;
    j["provider"] = rc.prov_name;
    j["rounds"] = o.rounds;
    j["results"] = nlohmann::json::array();
    for (const auto& r : rows) {
      bool rt = r.w == rawbench::Workload::round_trip;
      j["results"].push_back({{"workload", workload_name(r.w)},
                              {"size", r.size},
                              {"raw", r.raw},
                              {"rpcie", r.rpcie},
                              {"unit", rt ? "us" : "MB/s"},
                              {"ratio", r.ratio}});
    }
    std::printf("%s\n", j.dump(1).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  CLI::App app{"rpcie-bench: raw libfabric vs rpcie, side by side"};
  Options o;
  std::string sizes;
  app.add_option("--provider", o.provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  app.add_option("--rounds", o.rounds, "rounds per workload and size (>= 1; ratios are medians)")
      ->check(CLI::Range(1u, 101u));
  app.add_option("-o,--output", o.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--serve", o.serve, "be the target end for one initiator");
  app.add_option("--listen", o.listen, "ADDR[:PORT] for --serve (default 127.0.0.1:0 prints the port)");
  app.add_option("-r,--remote", o.remote, "HOST[:PORT] of a --serve peer");
  app.add_option("--cpu", o.cpu, "pin this process to a CPU");
  app.add_flag("-v,--verbose", o.verbose, "print every round to stderr");
  app.add_flag("--target-no-wait-fd", o.target_no_wait_fd,
               "the rpcie RMA target's CQ gets no wait fd (backs off with sleeps when idle)");
  app.add_flag("--delivery-complete", o.delivery_complete, "rpcie writes complete only when delivered at the target");
  app.add_option("--sizes", sizes, "comma-separated RMA sizes (K/M suffixes)");
  app.add_flag("--device", o.device,
               "device workloads through the client API against an rpcie-exportd started here "
               "(mmio_read, bar_write, bar_read, edu_dma, edu_dma_push)");
  app.add_option("--exportd", o.exportd, "rpcie-exportd to start for --device (default: next to this program)");
  bool frontend = false;
  std::string hostd;
  app.add_flag("--frontend", frontend,
               "file front end (rpcie-hostd started here) vs the client API: reg_read, bar_write, bar_read, "
               "dma_write, dma_read");
  app.add_option("--hostd", hostd, "rpcie-hostd to start for --frontend (default: next to this program)");
  std::string psk_file = rpcie::auth::kDefaultKeyPath;
  app.add_option("--psk-file", psk_file,
                 "--frontend -r HOST: the running exporter's key (it exports edu-a, edu-b, mem-a, mem-b)");
  try {
    app.parse(argc, argv);
    if (o.serve && !o.remote.empty()) throw CLI::ValidationError("--serve and --remote exclude each other");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!sizes.empty()) {
    o.sizes.clear();
    std::size_t start = 0;
    while (start <= sizes.size()) {
      auto end = sizes.find(',', start);
      if (end == std::string::npos) end = sizes.size();
      auto v = rpcie::size_parse(std::string_view(sizes).substr(start, end - start));
      if (!v || *v > kMaxSize) {
        std::fprintf(stderr, "rpcie-bench: error: bad size list '%s' (each 1..4M)\n", sizes.c_str());
        return 2;
      }
      o.sizes.push_back(*v);
      start = end + 1;
    }
  }
  std::string why;
  auto choice = rpcie::providers::provider_choice_resolve(o.provider, &why);
  if (!choice) {
    std::fprintf(stderr, "rpcie-bench: error: %s\n", why.c_str());
    return 2;
  }
  if (frontend) {
    rpcie::bench::FrontendOptions fo;
    fo.provider = !choice->automatic && choice->kind == rpcie::providers::ProviderKind::shm ? "shm" : "tcp";
    fo.rounds = o.rounds;
    fo.json = o.output == "json";
    fo.verbose = o.verbose;
    fo.exportd = o.exportd;
    fo.hostd = hostd;
    if (!o.remote.empty()) {
      auto addr = rpcie::address_parse(o.remote, rpcie::kDefaultPort);
      if (!addr) return die(addr.error().describe());
      fo.remote_host = addr->first;
      fo.remote_port = addr->second;
      fo.psk_file = psk_file;
    }
    return rpcie::bench::frontend_bench(fo);
  }
  if (o.cpu >= 0) rpcie::tools::cpu_pin(o.cpu);
  g_delivery_complete = o.delivery_complete;
  g_target_no_wait_fd = o.target_no_wait_fd;

  if (!o.remote.empty()) {
    auto addr = rpcie::address_parse(o.remote, rpcie::kDefaultPort);
    if (!addr) return die(addr.error().describe());
    return initiator_run(addr->first, addr->second, *choice, o);
  }
  auto addr = rpcie::address_parse(o.listen, 0);
  if (!addr) return die(addr.error().describe());
  auto listener = rpcie::Listener::open(addr->first, addr->second);
  if (!listener) return die(listener.error().describe());
  if (o.serve) {
    std::fprintf(stderr, "rpcie-bench: serving on port %u\n", listener->port());
    return target_run(*listener, *choice);
  }
  // Both ends here: the target in a child pinned to CPU 1, the initiator on CPU 0.
  if (o.output == "text")
    std::printf("%-*s %8s %12s %12s %-5s %6s\n", o.device ? 12 : 10, "workload", "size", "raw", "rpcie", "unit",
                "ratio");
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) return die("fork");
  if (child == 0) {
    rpcie::tools::cpu_pin(1);
    _exit(target_run(*listener, *choice));
  }
  rpcie::tools::cpu_pin(0);
  int rc = initiator_run("127.0.0.1", listener->port(), *choice, o);
  // The target exits after "quit"; never wait for it forever.
  int status = 0;
  for (int i = 0; i < 100; ++i) {
    if (waitpid(child, &status, WNOHANG) == child) return rc ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
    usleep(50000);
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  return rc ? rc : 1;
}
