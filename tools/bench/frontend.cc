// Front-end workloads, each as slices alternating between the files of rpcie-hostd and the
// client API (the median of per-round ratios is reported, as in the other modes; every
// operation is timed alone, for the percentiles). The `dma` window is not measured: its mmap
// is local shared memory, and memcpy against memcpy cannot fail.
//   reg_read   4 B pread of edu's resource0            vs Attachment::mmio_read      (us)
//   bar_write  1 MiB pwrite to membar's resource0      vs Attachment::bar_write      (MB/s)
//   bar_read   1 MiB pread (page cache dropped first)  vs Attachment::bar_read       (MB/s)
//   irq        edu's factorial, interrupt when done: the pwrite that starts it until poll()
//              on `events` returns (the read of the count follows, not measured)
//                                                      vs mmio_write until interrupt_wait (us)
//   irq_loaded the same while another thread reads edu's liveness register back to back, each
//              side through its own path (pread of resource0 / mmio_read)            (us)
//   map_load, map_burst, map_memcpy, plain: mapped register BARs under `rpcie run` (mmio_rows.hpp)
// The exporter runs pinned to CPU 1, this process (the application) to CPU 0, hostd where
// the scheduler puts it (on a compute server it shares the application's cores).
#include "frontend.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "../common.hpp"
#include "commit.hpp"
#include "driver.hpp"
#include "mmio_rows.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/client.hpp"
#include "rpcie/control.hpp"
#include "rpcie/edu_registers.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/mapping.hpp"
#include "rpcie/process.hpp"
#include "support.hpp"

namespace rpcie::bench {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
// What the bar_fault row reads of mem-b, each way (issue 14: a 64 MiB mapping).
constexpr std::size_t kFaultSpan = 64 * kMiB;
// `done` as a Result: errno's error when it failed.
Result<void> system_call(bool done, const char* what) {
  if (!done) return fail(errno, what);
  return {};
}

// A file opened read-write, closed on destruction.
class OpenFile {
 public:
  OpenFile() = default;
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  ~OpenFile() {
    if (fd_ >= 0) close(fd_);
  }
  Result<void> open(const std::string& path, int flags = 0) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | flags);
    if (fd_ < 0) return fail(errno, "open " + path);
    return {};
  }
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

// What the run starts, attaches and opens. Members are destroyed in reverse order: the
// mapping and the files before hostd is stopped, the attachments before their window, the
// daemons before their directory.
struct Setup {
  std::optional<TempDir> dir;
  Child exporter;  // unless one is already running (FrontendOptions::remote_host)
  Child hostd;
  std::string host;
  std::uint16_t port = 0;
  std::string psk;
  std::string control_socket;                    // hostd's control socket
  std::optional<HostBuffer> window;              // the client API's DMA windows, 1 MiB each
  std::unique_ptr<client::Attachment> edu, mem;  // edu-a, mem-a through the client API
  OpenFile reg, bar;                             // through hostd: edu-b's resource0, mem-b's resource0
  OpenFile bar_direct;                           // mem-b's resource0 again, O_DIRECT
  Mapping bar_map;                               // kFaultSpan bytes of mem-b's resource0, shared
  OpenFile events;                               // through hostd: edu-b's events
  std::optional<HostBuffer> user;                // kMiB: the user's buffer
  std::string edu_dir;                           // edu-b's directory through hostd
  std::string data_path;                         // what both sides run on: sealed or open
  CommandChild mapped, plain;                    // rpcie-bench-mmio under rpcie run, and without it
};

// The exporter (unless one runs already) and hostd, answering on its control socket.
Result<void> daemons_start(Setup& setup, const FrontendOptions& options, const std::string& provider) {
  const std::string& dir = setup.dir->path();
  if (!options.remote_host.empty()) {
    setup.host = options.remote_host;
    setup.port = options.remote_port;
    setup.psk = options.psk_file;
  } else {
    setup.host = "127.0.0.1";
    setup.psk = dir + "/psk";
    RPCIE_TRY(auth::key_generate_file(setup.psk, false));
    RPCIE_TRY_ASSIGN(
        setup.port,
        exportd_start(setup.exporter, program_find(options.exportd, "rpcie-exportd", "devexport"), provider, setup.psk,
                      {"edu-a=edu", "edu-b=edu", "mem-a=membar,size=4M", "mem-b=membar,size=64M,scratch=on"}));
  }
  setup.control_socket = dir + "/hostd.sock";
  RPCIE_TRY(setup.hostd.start(
      {program_find(options.hostd, "rpcie-hostd", "frontend"), "--foreground", "--mount", dir + "/mnt", "--control",
       setup.control_socket, "--dev-dir", dir, "--psk-file", setup.psk, "--provider", provider, "--state-file",
       dir + "/hostd-state.json", "--data-path", options.data_path, "--splice-writes", options.splice_writes},
      -1, nullptr));
  auto ready = Deadline::after(10s);
  while (!control::call(setup.control_socket, {{"op", "status"}}, Deadline::after(200ms))) {
    if (ready.expired()) return fail(ETIMEDOUT, "rpcie-hostd did not start");
    std::this_thread::sleep_for(20ms);
  }
  return {};
}

// Attaches `export_name` through hostd; returns its sysfs directory.
Result<std::string> hostd_attach(const Setup& setup, const char* export_name) {
  RPCIE_TRY_ASSIGN(
      auto reply, control::call(setup.control_socket,
                                {{"op", "attach"}, {"host", setup.host}, {"port", setup.port}, {"export", export_name}},
                                Deadline::after(10s)));
  return reply["sysfs"].get<std::string>();
}

Result<void> client_attach(Setup& setup, const std::string& provider, const std::string& data_path) {
  RPCIE_TRY_ASSIGN(auto key, auth::key_load(setup.psk));
  client::ClientOptions client_options;
  RPCIE_TRY_ASSIGN(client_options.data_path, data_path_choice_parse(data_path));
  client_options.name = "bench";
  client_options.key = std::make_shared<const auth::Key>(std::move(key));
  client_options.provider = *providers::provider_parse(provider);
  RPCIE_TRY_ASSIGN(setup.window, HostBuffer::create(2 * kMiB));
  std::uint8_t* window = setup.window->data();
  RPCIE_TRY_ASSIGN(setup.edu, client::Attachment::open(setup.host, setup.port, "edu-a", client_options, {window, kMiB},
                                                       Deadline::after(10s)));
  RPCIE_TRY_ASSIGN(setup.mem, client::Attachment::open(setup.host, setup.port, "mem-a", client_options,
                                                       {window + kMiB, kMiB}, Deadline::after(10s)));
  return {};
}

// fs.pipe-max-size, which decides whether hostd can splice (rpcie-hostd(8), TUNING); -1 if
// unreadable.
long pipe_max_size() {
  const std::string text = sysctl_read("fs/pipe-max-size");
  char* end = nullptr;
  const long size = std::strtol(text.c_str(), &end, 10);
  return text.empty() || *end != '\0' ? -1 : size;
}

// The data path both sides run on: the API's attachments and hostd's must agree, or the rows
// would compare two modes.
Result<std::string> data_path_agreed(const Setup& setup) {
  const std::string api = data_path_name(setup.mem->data_path());
  if (data_path_name(setup.edu->data_path()) != api)
    return fail(EPROTO, "the API's attachments disagree on the data path");
  RPCIE_TRY_ASSIGN(auto status, control::call(setup.control_socket, {{"op", "status"}}, Deadline::after(10s)));
  for (const auto& device : status["attachments"])
    if (device.value("data_path", "") != api)
      return fail(EPROTO, "hostd's " + device.value("device", "?") + " runs on the " + device.value("data_path", "?") +
                              " data path, the API on the " + api + " one");
  return api;
}

// hostd's files of edu-b and mem-b, and the user's buffer.
Result<void> files_open(Setup& setup, const std::string& edu_dir, const std::string& mem_dir) {
  RPCIE_TRY(setup.reg.open(edu_dir + "/resource0"));
  RPCIE_TRY(setup.bar.open(mem_dir + "/resource0"));
  RPCIE_TRY(setup.bar_direct.open(mem_dir + "/resource0", O_DIRECT));
  struct stat st;
  RPCIE_TRY(system_call(fstat(setup.bar.fd(), &st) == 0, "fstat resource0"));
  if (static_cast<std::uint64_t>(st.st_size) < kFaultSpan)
    return fail(EINVAL, "mem-b is smaller than the 64 MiB the bar_fault row maps");
  RPCIE_TRY_ASSIGN(setup.bar_map, Mapping::shared(setup.bar.fd(), kFaultSpan));
  RPCIE_TRY(setup.events.open(edu_dir + "/events"));
  RPCIE_TRY_ASSIGN(setup.user, buffer_written(kMiB));
  return {};
}

// rpcie-bench-mmio for the mapped-BAR rows, on the application's CPU: under `rpcie run`
// (asking this run's hostd for its ring), and alone. Started before anything of the fabric
// exists in this process: a fork after that measurably slowed the client API's round trips
// (3-5 times, for the rest of the run).
Result<void> mmio_children_start(Setup& setup, const FrontendOptions& options) {
  const std::string program = program_find(options.mmio_program, "rpcie-bench-mmio", "tools/bench");
  const std::string rpcie = program_find(options.rpcie, "rpcie", "tools");
  if (::setenv("RPCIE_CONTROL", setup.control_socket.c_str(), 1) != 0) return fail(errno, "setenv");
  RPCIE_TRY(setup.mapped.start({rpcie, "run", "--", program}, 0));
  RPCIE_TRY(setup.plain.start({program}, 0));
  return {};
}

// bar_fault, both sides reading kFaultSpan of mem-b from the device: pread in 1 MiB requests,
// and a load from each page of the mapping in order, so each page is faulted in (the kernel
// reads ahead). First the cached pages are dropped, which takes unmapping them from the
// mapping (a mapped page stays cached), on both sides.
Result<void> bar_fault_drop(int fd, const Mapping& map) {
  RPCIE_TRY(system_call(madvise(map.data(), kFaultSpan, MADV_DONTNEED) == 0, "madvise"));
  return system_call(posix_fadvise(fd, 0, kFaultSpan, POSIX_FADV_DONTNEED) == 0, "posix_fadvise");
}
Result<void> bar_fault_pread(int fd, const Mapping& map, std::uint8_t* user) {
  RPCIE_TRY(bar_fault_drop(fd, map));
  for (std::size_t at = 0; at < kFaultSpan; at += kMiB)
    RPCIE_TRY(
        system_call(pread(fd, user, kMiB, static_cast<off_t>(at)) == static_cast<ssize_t>(kMiB), "pread resource0"));
  return {};
}
Result<void> bar_fault_mapped(int fd, const Mapping& map) {
  RPCIE_TRY(bar_fault_drop(fd, map));
  std::uint8_t sum = 0;
  for (std::size_t at = 0; at < kFaultSpan; at += 4096)
    sum ^= static_cast<const volatile std::uint8_t*>(map.data())[at];
  asm volatile("" : : "r"(sum));
  return {};
}

// edu's "interrupt when the factorial is done", on both sides' devices.
Result<void> irq_enable(Setup& setup) {
  RPCIE_TRY(setup.edu->mmio_write(0, edu::kRegStatus, 4, edu::kStatusIrqOnFactorial, call_deadline()));
  const std::uint32_t status = edu::kStatusIrqOnFactorial;
  return system_call(pwrite(setup.reg.fd(), &status, 4, edu::kRegStatus) == 4, "pwrite resource0");
}

// One factorial through the client API: the write that starts it until interrupt_wait returns.
Result<double> irq_api_once(client::Attachment& device) {
  const auto seen = device.interrupt_count(0);
  const auto start = Clock::now();
  RPCIE_TRY(device.mmio_write(0, edu::kRegFactorial, 4, 5, call_deadline()));
  RPCIE_TRY(device.interrupt_wait(0, seen, call_deadline()));
  return seconds_since(start);
}

// The same through hostd's files: the pwrite until poll() on `events` returns; the read of
// the count (which the next poll needs) follows, outside the measured part.
Result<double> irq_file_once(int reg, int events) {
  const auto start = Clock::now();
  const std::uint32_t n = 5;
  RPCIE_TRY(system_call(pwrite(reg, &n, 4, edu::kRegFactorial) == 4, "pwrite resource0"));
  pollfd p{events, POLLIN, 0};
  const int ready = ::poll(&p, 1, 30000);
  if (ready == 0) return fail(ETIMEDOUT, "no interrupt on events within 30 s");
  RPCIE_TRY(system_call(ready > 0, "poll events"));
  const double measured = seconds_since(start);
  std::uint32_t count = 0;
  RPCIE_TRY(system_call(read(events, &count, 4) == 4, "read events"));
  return measured;
}

// Runs `inner` while another thread does `load` back to back: started before the slice,
// stopped after it; its first error fails the slice. Bounded: a slice lasts ~25 ms.
SliceRun slice_under_load(SliceRun inner, std::function<Result<void>()> load) {
  return [inner = std::move(inner), load = std::move(load)](std::size_t operations) -> Result<SliceSeconds> {
    std::atomic<bool> stop{false};
    std::optional<Error> failed;
    std::thread loader([&] {
      const auto until = Deadline::after(std::chrono::seconds(60));
      while (!stop.load(std::memory_order_relaxed) && !until.expired()) {
        if (auto r = load(); !r) {
          failed = r.error();
          return;
        }
      }
    });
    auto took = inner(operations);
    stop.store(true);
    loader.join();
    if (failed) return error_in(*failed, "the load of register reads");
    return took;
  };
}

Result<std::unique_ptr<Setup>> setup_open(const FrontendOptions& options, const std::string& provider) {
  auto setup = std::make_unique<Setup>();
  RPCIE_TRY_ASSIGN(auto dir, TempDir::make("/tmp/rpcie-bench-fe."));
  setup->dir.emplace(std::move(dir));
  RPCIE_TRY(daemons_start(*setup, options, provider));
  if (auto started = mmio_children_start(*setup, options); !started)
    return error_in(started.error(), "start rpcie-bench-mmio");
  auto edu_dir = hostd_attach(*setup, "edu-b");
  auto mem_dir = hostd_attach(*setup, "mem-b");
  if (!edu_dir || !mem_dir) return error_in((edu_dir ? mem_dir : edu_dir).error(), "attach through hostd");
  if (auto attached = client_attach(*setup, provider, options.data_path); !attached)
    return error_in(attached.error(), "attach through the client API");
  auto data_path = data_path_agreed(*setup);
  if (!data_path) return error_in(data_path.error(), "data path");
  setup->data_path = *data_path;
  if (auto opened = files_open(*setup, *edu_dir, *mem_dir); !opened)
    return error_in(opened.error(), "open the device files");
  if (auto enabled = irq_enable(*setup); !enabled) return error_in(enabled.error(), "edu's factorial interrupt");
  setup->edu_dir = *edu_dir;
  for (CommandChild* child : {&setup->mapped, &setup->plain})
    if (auto opened = child->open(*edu_dir); !opened) return error_in(opened.error(), "rpcie-bench-mmio");
  if (auto opened = setup->mapped.scratch_open(*mem_dir); !opened)
    return error_in(opened.error(), "rpcie-bench-mmio (mem-b needs scratch=on)");
  return setup;
}

std::vector<Workload> frontend_workloads(Setup& setup) {
  client::Attachment& mem = *setup.mem;
  const int reg = setup.reg.fd(), bar = setup.bar.fd();
  std::uint8_t* user = setup.user->data();
  auto row = [](const char* name, std::size_t size, Unit unit, std::function<Result<void>()> baseline,
                std::function<Result<void>()> frontend, const char* baseline_is, const char* frontend_is) {
    return Workload{.name = name,
                    .size = size,
                    .unit = unit,
                    .warmup_operations = 16,
                    .baseline = slice_run_each(std::move(baseline)),
                    .subject = slice_run_each(std::move(frontend)),
                    .baseline_is = baseline_is,
                    .subject_is = frontend_is};
  };
  // A 4 B register read each way: the reg_read row, and irq_loaded's load.
  auto api_read = [&setup]() -> Result<void> {
    RPCIE_TRY(setup.edu->mmio_read(0, edu::kRegLiveness, 4, call_deadline()));
    return {};
  };
  auto file_read = [reg] {
    std::uint32_t value;
    return system_call(pread(reg, &value, 4, edu::kRegLiveness) == 4, "pread resource0");
  };
  // edu's factorial with its interrupt each way: the irq row, quiet and loaded.
  auto irq_api = [&setup] { return irq_api_once(*setup.edu); };
  auto irq_file = [reg, events = setup.events.fd()] { return irq_file_once(reg, events); };
  std::vector<Workload> workloads;
  workloads.push_back(row("reg_read", 4, Unit::microseconds, api_read, file_read, "api", "file"));
  // 1 MiB to and from the memory BAR each way: through the page cache, then with O_DIRECT
  // (past it: hostd's reply lands in the caller's pages).
  auto api_bar_write = [&mem, user] { return mem.bar_write(0, 0, {user, kMiB}, call_deadline()); };
  auto api_bar_read = [&mem, user] { return mem.bar_read(0, 0, {user, kMiB}, call_deadline()); };
  auto file_bar_write = [user](int fd) {
    return
        [fd, user] { return system_call(pwrite(fd, user, kMiB, 0) == static_cast<ssize_t>(kMiB), "pwrite resource0"); };
  };
  auto file_bar_read = [user](int fd, bool cached) {
    return [fd, user, cached] {
      if (cached) posix_fadvise(fd, 0, kMiB, POSIX_FADV_DONTNEED);  // read the device, not the page cache
      return system_call(pread(fd, user, kMiB, 0) == static_cast<ssize_t>(kMiB), "pread resource0");
    };
  };
  const int direct = setup.bar_direct.fd();
  const auto mb_s = Unit::megabytes_per_second;
  workloads.push_back(row("bar_write", kMiB, mb_s, api_bar_write, file_bar_write(bar), "api", "file"));
  workloads.push_back(row("bar_read", kMiB, mb_s, api_bar_read, file_bar_read(bar, true), "api", "file"));
  workloads.push_back(row("bar_write_direct", kMiB, mb_s, api_bar_write, file_bar_write(direct), "api", "file"));
  workloads.push_back(row("bar_read_direct", kMiB, mb_s, api_bar_read, file_bar_read(direct, false), "api", "file"));
  workloads.push_back(row(
      "bar_fault", kFaultSpan, Unit::megabytes_per_second,
      [bar, user, &map = setup.bar_map] { return bar_fault_pread(bar, map, user); },
      [bar, &map = setup.bar_map] { return bar_fault_mapped(bar, map); }, "pread", "mmap"));
  workloads.push_back(Workload{.name = "irq",
                               .size = 4,
                               .unit = Unit::microseconds,
                               .warmup_operations = 16,
                               .baseline = slice_run_each_part(irq_api),
                               .subject = slice_run_each_part(irq_file),
                               .baseline_is = "api",
                               .subject_is = "file"});
  workloads.push_back(Workload{.name = "irq_loaded",
                               .size = 4,
                               .unit = Unit::microseconds,
                               .warmup_operations = 16,
                               .baseline = slice_under_load(slice_run_each_part(irq_api), api_read),
                               .subject = slice_under_load(slice_run_each_part(irq_file), file_read),
                               .baseline_is = "api",
                               .subject_is = "file"});
  return workloads;
}

}  // namespace

int frontend_bench(const FrontendOptions& options) {
  stop_signals_install();
  const std::string provider = options.provider == "shm" ? "shm" : "tcp";
  auto setup = setup_open(options, provider);
  if (!setup) return die(setup.error().describe());
  rpcie::tools::cpu_pin(0);
  std::vector<Workload> workloads = frontend_workloads(**setup);
  for (auto& row : mmio_workloads((*setup)->mapped, (*setup)->plain)) workloads.push_back(std::move(row));
  // The file side goes first in round 0. Slices of about 25 ms of baseline work (8 of each
  // side per round): 4 to 200,000 operations.
  const DriverOptions driver{
      .rounds = options.rounds,
      .first = Side::subject,
      .sizing = {.slice_seconds = 0.025, .min_operations = 4, .max_operations = 200000, .warmup_floor_seconds = 1e-7},
      .columns = {.baseline = "baseline", .subject = "frontend", .name_width = 10, .labelled = true},
      .text = !options.json,
      .verbose = options.verbose,
      .progress_fd = options.progress_fd,
      .stop = &stop_requested(),
      .only = options.only};
  if (driver.text)
    std::printf(
        "# commit: %s\n# data path: %s, hostd --splice-writes %s, fs.pipe-max-size %ld, tcp congestion control %s\n%s",
        kBenchCommit, (*setup)->data_path.c_str(), options.splice_writes.c_str(), pipe_max_size(),
        tcp_congestion_control().c_str(), table_header(driver.columns).c_str());
  auto rows = workloads_run(workloads, driver);
  if (!rows) return die(rows.error().describe());
  (void)(*setup)->edu->detach(call_deadline());
  (void)(*setup)->mem->detach(call_deadline());
  if (options.json) {
    auto document = results_document(provider, options.rounds, *rows, driver.columns);
    document["data_path"] = (*setup)->data_path;
    document["splice_writes"] = options.splice_writes;
    document["pipe_max_size"] = pipe_max_size();
    document_print(document, kBenchCommit);
  }
  return 0;
}

}  // namespace rpcie::bench
