// Front-end workloads, each as slices alternating between the files of rpcie-hostd and the
// client API (the median of per-round ratios is reported, as in the other modes):
//   reg_read   4 B pread of edu's resource0            vs Attachment::mmio_read      (us)
//   bar_write  1 MiB pwrite to membar's resource0      vs Attachment::bar_write      (MB/s)
//   bar_read   1 MiB pread (page cache dropped first)  vs Attachment::bar_read       (MB/s)
//   dma_write  1 MiB memcpy into the mmap of `dma`     vs memcpy into local memory   (MB/s)
//   dma_read   1 MiB memcpy out of the mmap of `dma`   vs memcpy out of local memory (MB/s)
// The exporter runs pinned to CPU 1, this process (the application) to CPU 0, hostd where
// the scheduler puts it (on a compute server it shares the application's cores).
#include "frontend.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/client.hpp"
#include "rpcie/control.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/process.hpp"
#include "support.hpp"

namespace rpcie::bench {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = 1u << 20;
constexpr double kSliceSeconds = 0.025;
constexpr unsigned kSlices = 8;

}  // namespace

int frontend_bench(const FrontendOptions& o) {
  stop_signals_install();
  auto tmp = TempDir::make("/tmp/rpcie-bench-fe.");
  if (!tmp) return die(tmp.error().describe());
  const bool exporter_here = o.remote_host.empty();
  const std::string psk = exporter_here ? tmp->path() + "/psk" : o.psk_file, mount = tmp->path() + "/mnt",
                    sock = tmp->path() + "/hostd.sock";
  const std::string host = exporter_here ? "127.0.0.1" : o.remote_host;
  const std::string prov = o.provider == "shm" ? "shm" : "tcp";
  std::uint16_t port = o.remote_port;
  Child exporter;
  if (exporter_here) {
    if (auto k = auth::key_generate_file(psk, false); !k) return die(k.error().describe());
    auto p = exportd_start(exporter, program_find(o.exportd, "rpcie-exportd", "devexport"), prov, psk,
                           {"edu-a=edu", "edu-b=edu", "mem-a=membar,size=4M", "mem-b=membar,size=4M"});
    if (!p) return die(p.error().describe());
    port = *p;
  }

  Child hostd;
  auto s = hostd.start({program_find(o.hostd, "rpcie-hostd", "frontend"), "--foreground", "--mount", mount, "--control",
                        sock, "--dev-dir", tmp->path(), "--psk-file", psk, "--provider", prov},
                       -1, nullptr);
  if (!s) return die(s.error().describe());
  auto ready = Deadline::after(10s);
  while (!control::call(sock, {{"op", "status"}}, Deadline::after(200ms))) {
    if (ready.expired()) return die("rpcie-hostd did not start");
    std::this_thread::sleep_for(20ms);
  }
  auto attach = [&](const char* e) -> Result<std::string> {
    auto a =
        control::call(sock, {{"op", "attach"}, {"host", host}, {"port", port}, {"export", e}}, Deadline::after(10s));
    if (!a) return tl::unexpected(a.error());
    return (*a)["sysfs"].get<std::string>();
  };
  auto edu_dir = attach("edu-b");
  auto mem_dir = attach("mem-b");
  if (!edu_dir || !mem_dir) return die("attach through hostd: " + (edu_dir ? mem_dir : edu_dir).error().describe());

  auto key = auth::key_load(psk);
  if (!key) return die(key.error().describe());
  client::ClientOptions co;
  co.name = "bench";
  co.key = std::make_shared<const auth::Key>(std::move(*key));
  co.provider = *providers::provider_parse(prov);
  auto window = HostBuffer::create(2 * kMiB);
  if (!window) return die(window.error().describe());
  auto edu = client::Attachment::open(host, port, "edu-a", co, {window->data(), kMiB}, Deadline::after(10s));
  auto mem = client::Attachment::open(host, port, "mem-a", co, {window->data() + kMiB, kMiB}, Deadline::after(10s));
  if (!edu || !mem) return die("attach through the client API: " + (edu ? mem : edu).error().describe());
  auto& E = **edu;
  auto& M = **mem;

  const int reg = open((*edu_dir + "/resource0").c_str(), O_RDWR | O_CLOEXEC);
  const int bar = open((*mem_dir + "/resource0").c_str(), O_RDWR | O_CLOEXEC);
  const int dma = open((*edu_dir + "/dma").c_str(), O_RDWR | O_CLOEXEC);
  if (reg < 0 || bar < 0 || dma < 0) return die(std::string("open the device files: ") + std::strerror(errno));
  void* dma_map = mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, dma, 0);
  if (dma_map == MAP_FAILED) return die(std::string("mmap dma: ") + std::strerror(errno));
  auto local = HostBuffer::create(kMiB);
  auto user = HostBuffer::create(kMiB);
  if (!local || !user) return die("buffers");
  std::memset(user->data(), 0x5a, kMiB);
  std::memset(local->data(), 0, kMiB);  // fault the pages in, as the mmap's are (MAP_POPULATE)
  std::memset(dma_map, 0, kMiB);
  rpcie::tools::cpu_pin(0);

  auto deadline = [] { return Deadline::after(30s); };
  using Op = std::function<bool()>;
  struct Spec {
    const char* name;
    std::size_t size;
    bool latency;
    Op file, api;
    const char* file_label;
    const char* api_label;
  };
  auto* ub = user->data();
  const Spec plan[] = {
      {"reg_read", 4, true,
       [&] {
         std::uint32_t v;
         return pread(reg, &v, 4, 4) == 4;
       },
       [&] { return E.mmio_read(0, 4, 4, deadline()).has_value(); }, "file", "api"},
      {"bar_write", kMiB, false, [&] { return pwrite(bar, ub, kMiB, 0) == static_cast<ssize_t>(kMiB); },
       [&] {
         return M.bar_write(0, 0, {ub, kMiB}, deadline()).has_value();
       },
       "file", "api"},
      {"bar_read", kMiB, false,
       [&] {
         posix_fadvise(bar, 0, kMiB, POSIX_FADV_DONTNEED);  // read the device, not the page cache
         return pread(bar, ub, kMiB, 0) == static_cast<ssize_t>(kMiB);
       },
       [&] {
         return M.bar_read(0, 0, {ub, kMiB}, deadline()).has_value();
       },
       "file", "api"},
      {"dma_write", kMiB, false,
       [&] {
         std::memcpy(dma_map, ub, kMiB);
         return true;
       },
       [&] {
         std::memcpy(local->data(), ub, kMiB);
         return true;
       },
       "mmap", "local"},
      {"dma_read", kMiB, false,
       [&] {
         std::memcpy(ub, dma_map, kMiB);
         return true;
       },
       [&] {
         std::memcpy(ub, local->data(), kMiB);
         return true;
       },
       "mmap", "local"},
  };

  auto slice = [](const Op& op, std::size_t n) -> double {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i)
      if (!op()) return -1;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  nlohmann::json results = nlohmann::json::array();
  if (!o.json)
    std::printf("%-10s %8s %12s %12s %-5s %6s %s\n", "workload", "size", "baseline", "frontend", "unit", "ratio",
                "(baseline vs frontend)");
  for (const auto& sp : plan) {
    // Warm-up, then slices of about kSliceSeconds of baseline work.
    const double warm = slice(sp.api, 16), warm_f = slice(sp.file, 16);
    if (warm < 0 || warm_f < 0) return die(std::string(sp.name) + ": warm-up failed (" + std::strerror(errno) + ")");
    const auto n =
        std::clamp<std::size_t>(static_cast<std::size_t>(16 * kSliceSeconds / std::max(warm, 1e-7)), 4, 200000);
    std::vector<double> base_v, file_v, ratios;
    for (unsigned round = 0; round < o.rounds; ++round) {
      // Ctrl-C ends the run here, so that the daemons are stopped and the directory removed.
      if (stop_requested().load()) return die("interrupted");
      double tb = 0, tf = 0;
      for (unsigned k = 0; k < 2 * kSlices; ++k) {
        const bool file_first = (round + k) % 2 == 0;
        const double t = slice(file_first ? sp.file : sp.api, n);
        if (t < 0) return die(std::string(sp.name) + " failed: " + std::strerror(errno));
        (file_first ? tf : tb) += t;
      }
      const double ops = static_cast<double>(n * kSlices);
      const double b = sp.latency ? tb / ops * 1e6 : static_cast<double>(sp.size) * ops / tb / 1e6;
      const double fv = sp.latency ? tf / ops * 1e6 : static_cast<double>(sp.size) * ops / tf / 1e6;
      if (o.verbose) std::fprintf(stderr, "  %s round %u: baseline %.2f frontend %.2f\n", sp.name, round, b, fv);
      base_v.push_back(b);
      file_v.push_back(fv);
      ratios.push_back(fv / b);
    }
    const double b = median(base_v), fv = median(file_v), ratio = median(ratios);
    if (o.json) {
      results.push_back({{"workload", sp.name},
                         {"size", sp.size},
                         {"baseline", b},
                         {"baseline_is", sp.api_label},
                         {"frontend", fv},
                         {"frontend_is", sp.file_label},
                         {"unit", sp.latency ? "us" : "MB/s"},
                         {"ratio", ratio}});
    } else {
      std::printf("%-10s %8zu %12.2f %12.2f %-5s %6.3f (%s vs %s)\n", sp.name, sp.size, b, fv,
                  sp.latency ? "us" : "MB/s", ratio, sp.api_label, sp.file_label);
      std::fflush(stdout);
    }
  }
  munmap(dma_map, kMiB);
  close(reg);
  close(bar);
  close(dma);
  (void)E.detach(deadline());
  (void)M.detach(deadline());
  if (o.json)
    std::printf("%s\n", nlohmann::json{{"provider", prov}, {"rounds", o.rounds}, {"results", results}}.dump(1).c_str());
  return 0;
}

}  // namespace rpcie::bench
