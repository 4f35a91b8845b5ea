#include "device.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aead.hpp"
#include "commit.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/channel.hpp"
#include "rpcie/client.hpp"
#include "rpcie/edu_registers.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/process.hpp"
#include "support.hpp"
#include "transport.hpp"

namespace rpcie::bench {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// One DMA: the whole device buffer, from IOVA 0 of the window.
constexpr std::size_t kDmaBytes = edu::kDmaBufferSize;
// Sealed chunks a channel keeps in flight: one per send buffer.
constexpr auto kSealedInFlight = static_cast<std::uint16_t>(ChannelOptions{}.send_buffers);

// The exporter started for the run and this client's attachments to its exports. Members
// are destroyed in reverse order: the attachments before the window they use, then the
// exporter (stopped) and its directory.
struct Devices {
  std::optional<TempDir> dir;
  Child exporter;
  std::optional<HostBuffer> window;                // 1 MiB edu, 2 MiB membar, 1 MiB edu_push
  std::optional<HostBuffer> window_to_ram;         // 1 MiB edu_to_ram
  std::unique_ptr<client::Attachment> edu;         // on-demand DMA: the exporter reads the window
  std::unique_ptr<client::Attachment> membar;      // 4 MiB BAR
  std::unique_ptr<client::Attachment> edu_push;    // mirror mode, streaming DMA (window_push)
  std::unique_ptr<client::Attachment> edu_to_ram;  // on-demand DMA: the exporter writes the window
};

Result<std::unique_ptr<Devices>> devices_open(const Options& options, const std::string& provider) {
  auto devices = std::make_unique<Devices>();
  RPCIE_TRY_ASSIGN(auto dir, TempDir::make("/tmp/rpcie-bench."));
  devices->dir.emplace(std::move(dir));
  const std::string psk = devices->dir->path() + "/psk";
  RPCIE_TRY(auth::key_generate_file(psk, false));
  const char* exporter_provider = provider == "shm" ? "shm" : "tcp";
  RPCIE_TRY_ASSIGN(
      const std::uint16_t port,
      exportd_start(
          devices->exporter, program_find(options.exportd, "rpcie-exportd", "devexport"), exporter_provider, psk,
          {"bench-edu=edu", "bench-mem=membar,size=4M", "bench-edu-push=edu,dma=mirror", "bench-edu-d2h=edu"}));
  RPCIE_TRY_ASSIGN(auto key, auth::key_load(psk));
  client::ClientOptions client_options;
  client_options.name = "bench";
  client_options.key = std::make_shared<const auth::Key>(std::move(key));
  client_options.provider = *providers::provider_parse(exporter_provider);
  RPCIE_TRY_ASSIGN(client_options.data_path, data_path_choice_parse(options.data_path));
  RPCIE_TRY_ASSIGN(devices->window, buffer_written(kMaxSize));
  std::uint8_t* window = devices->window->data();
  auto edu =
      client::Attachment::open("127.0.0.1", port, "bench-edu", client_options, {window, kMiB}, Deadline::after(10s));
  if (!edu) return error_in(edu.error(), "attach edu");
  devices->edu = std::move(*edu);
  auto membar = client::Attachment::open("127.0.0.1", port, "bench-mem", client_options, {window + kMiB, 2 * kMiB},
                                         Deadline::after(10s));
  if (!membar) return error_in(membar.error(), "attach membar");
  devices->membar = std::move(*membar);
  client::ClientOptions push_options = client_options;
  push_options.window_push = true;
  auto edu_push = client::Attachment::open("127.0.0.1", port, "bench-edu-push", push_options, {window + 3 * kMiB, kMiB},
                                           Deadline::after(10s));
  if (!edu_push) return error_in(edu_push.error(), "attach edu (mirror, pushed)");
  devices->edu_push = std::move(*edu_push);
  RPCIE_TRY_ASSIGN(devices->window_to_ram, buffer_written(kMiB));
  auto edu_to_ram = client::Attachment::open("127.0.0.1", port, "bench-edu-d2h", client_options,
                                             {devices->window_to_ram->data(), kMiB}, Deadline::after(10s));
  if (!edu_to_ram) return error_in(edu_to_ram.error(), "attach edu (device to RAM)");
  devices->edu_to_ram = std::move(*edu_to_ram);
  return devices;
}

// Every DMA of the run: kDmaBytes between IOVA `window_at` of the window (0 for the timed
// ones) and the device buffer, into the device (`to_ram` false) or out of it.
Result<void> edu_dma_program(client::Attachment& attachment, bool to_ram, std::uint64_t window_at = 0) {
  RPCIE_TRY(attachment.mmio_write(0, edu::kRegDmaSrc, 8, to_ram ? edu::kDmaBufferAddress : window_at, call_deadline()));
  RPCIE_TRY(attachment.mmio_write(0, edu::kRegDmaDst, 8, to_ram ? window_at : edu::kDmaBufferAddress, call_deadline()));
  RPCIE_TRY(attachment.mmio_write(0, edu::kRegDmaCount, 8, kDmaBytes, call_deadline()));
  return {};
}

enum class Dma { from_ram, pushed, to_ram };

// One DMA, then the acknowledge of its interrupt. `pushed`: streaming DMA. Returns the seconds
// from the start of the command (the push included) to the interrupt seen: what the row
// reports; the acknowledge is outside it (the slice's whole loop has it).
Result<double> edu_dma_once(client::Attachment& attachment, Dma dma) {
  const auto seen = attachment.interrupt_count(0);
  const auto start = Clock::now();
  if (dma == Dma::pushed) RPCIE_TRY(attachment.window_push(0, kDmaBytes, call_deadline()));
  const std::uint64_t direction = dma == Dma::to_ram ? edu::kDmaCmdToHost : 0;
  RPCIE_TRY(
      attachment.mmio_write(0, edu::kRegDmaCmd, 8, edu::kDmaCmdStart | edu::kDmaCmdIrq | direction, call_deadline()));
  RPCIE_TRY(attachment.interrupt_wait(0, seen, call_deadline()));
  const double measured = std::chrono::duration<double>(Clock::now() - start).count();
  RPCIE_TRY(attachment.mmio_write(0, edu::kRegIrqAck, 4, edu::kIrqDma, call_deadline()));
  return measured;
}

SliceRun edu_dma_run(client::Attachment& attachment, Dma dma) {
  return slice_run_each_part([&attachment, dma] { return edu_dma_once(attachment, dma); });
}

// Programs the device-to-RAM DMA of the run on `attachment` and proves, once, that it moves
// the device's bytes into `window` (so that the row cannot time an interrupt with no transfer
// behind it: edu completes a refused DMA, interrupt included): a pattern goes into the device
// buffer by a DMA from the window's second 4 KiB, comes back into its first, and is compared.
Result<void> edu_to_ram_prepare(client::Attachment& attachment, std::uint8_t* window) {
  std::uint8_t* pattern = window + kDmaBytes;
  for (std::size_t i = 0; i < kDmaBytes; ++i) pattern[i] = static_cast<std::uint8_t>(i * 7 + 3);
  std::memset(window, 0, kDmaBytes);
  RPCIE_TRY(edu_dma_program(attachment, false, kDmaBytes));
  RPCIE_TRY(edu_dma_once(attachment, Dma::from_ram));
  RPCIE_TRY(edu_dma_program(attachment, true));
  RPCIE_TRY(edu_dma_once(attachment, Dma::to_ram));
  if (std::memcmp(window, pattern, kDmaBytes) != 0)
    return fail(EIO, "edu DMA to RAM: the window does not hold the bytes the device had");
  return {};
}

// The raw loop's `workload` of `size` bytes on the link, as a baseline, with `window`
// operations in flight (RMA; 0: the raw loop's 64). Timed one by one where one at a time.
SliceRun raw_run(Link& link, raw::Workload workload, std::size_t size, std::uint16_t window = 0) {
  return slice_run_sampled([&link, workload, size, window](std::size_t operations, std::vector<double>& samples) {
    return round_run(link, Action::raw, workload, size, operations, window, &samples);
  });
}

// The raw side of the bar rows: one-sided RMA on the open data path; on the sealed one,
// the raw loop's sealed messages, or the same messages unsealed (--raw-cipher none).
struct BulkBaseline {
  raw::Workload write;
  raw::Workload read;
  const char* name;  // the JSON's bulk_baseline
};

BulkBaseline bulk_baseline(DataPath mode, const Options& options) {
  if (mode != DataPath::sealed) return {raw::Workload::rma_write, raw::Workload::rma_read, "rma"};
  if (options.raw_cipher == "none") return {raw::Workload::plain_write, raw::Workload::plain_read, "plain_messages"};
  return {raw::Workload::sealed_write, raw::Workload::sealed_read, "sealed_messages"};
}

std::vector<Workload> device_workloads(Link& link, Devices& devices, const Options& options) {
  client::Attachment& membar = *devices.membar;
  std::vector<Workload> workloads;
  workloads.push_back({.name = "mmio_read",
                       .size = 4,
                       .unit = Unit::microseconds,
                       .warmup_operations = 64,
                       .baseline = raw_run(link, raw::Workload::round_trip, 8),
                       .subject = slice_run_each([&devices]() -> Result<void> {
                         RPCIE_TRY(devices.edu->mmio_read(0, edu::kRegLiveness, 4, call_deadline()));
                         return {};
                       })});
  // membar's BAR moved through the window, each way, one call at a time. Open: against raw
  // RMA of the same size, one at a time. Sealed: against the raw loop's sealed transfer of the
  // same size in the same chunks, as many in flight as a channel's send buffers.
  const DataPath mode = devices.membar->data_path();
  const BulkBaseline bulk = bulk_baseline(mode, options);
  // rpcie's BAR writes return once proven at the exporter (client.hpp, bar_write): the raw
  // writes return once delivered.
  link.raw->write_delivery_complete_set(true);
  const std::uint16_t in_flight = mode == DataPath::sealed ? kSealedInFlight : 1;
  for (const bool write : {true, false})
    workloads.push_back({.name = write ? "bar_write" : "bar_read",
                         .size = kMiB,
                         .unit = Unit::megabytes_per_second,
                         .warmup_operations = 64,
                         .baseline = raw_run(link, write ? bulk.write : bulk.read, kMiB, in_flight),
                         .subject = slice_run_each([&membar, write] {
                           return write ? membar.bar_write_from_window(0, 0, 0, kMiB, call_deadline())
                                        : membar.bar_read_into_window(0, 0, 0, kMiB, call_deadline());
                         })});
  // edu's DMA, on demand (doorbell, the exporter reads the window, interrupt: raw 8 B message,
  // the target's fi_read of 4 KiB, 8 B reply), pushed (data with the doorbell, interrupt: raw
  // 4 KiB message, 8 B reply) and to RAM on demand (doorbell, the exporter writes the window
  // and proves it, interrupt: raw 8 B message, the target's fi_write of 4 KiB and a 1 B
  // read-back, 8 B reply).
  struct DmaRow {
    const char* name;
    Dma dma;
    raw::Workload baseline;
    client::Attachment& attachment;
  };
  for (const DmaRow& row : {DmaRow{"edu_dma", Dma::from_ram, raw::Workload::read_reply, *devices.edu},
                            DmaRow{"edu_dma_push", Dma::pushed, raw::Workload::send_reply, *devices.edu_push},
                            DmaRow{"edu_dma_to_ram", Dma::to_ram, raw::Workload::write_reply, *devices.edu_to_ram}})
    workloads.push_back({.name = row.name,
                         .size = kDmaBytes,
                         .unit = Unit::microseconds,
                         .warmup_operations = 64,
                         .baseline = raw_run(link, row.baseline, kDmaBytes),
                         .subject = edu_dma_run(row.attachment, row.dma),
                         .whole_reported = true});
  return workloads;
}

}  // namespace

Columns device_columns() { return Columns{.baseline = "raw", .subject = "rpcie", .name_width = 12}; }

int device_bench(Link& link, const Options& options) {
  stop_signals_install();
  auto devices = devices_open(options, link.provider());
  if (!devices) return die(devices.error().describe());
  for (client::Attachment* attachment : {(*devices)->edu.get(), (*devices)->edu_push.get()})
    if (auto programmed = edu_dma_program(*attachment, false); !programmed)
      return die("edu setup: " + programmed.error().describe());
  if (auto prepared = edu_to_ram_prepare(*(*devices)->edu_to_ram, (*devices)->window_to_ram->data()); !prepared)
    return die("edu setup: " + prepared.error().describe());
  // The exporter decides (its policy is auto: the client's choice, else the provider's default).
  const DataPath mode = (*devices)->edu->data_path();
  if (!options.json())
    std::printf("# data path: %s (bar rows' raw side: %s)\n", data_path_name(mode), bulk_baseline(mode, options).name);
  // What sealed bulk data is measured against: the cipher alone on one core.
  const AeadSpeed aead = aead_speed_measure();
  if (!options.json())
    std::printf("# aead (one core, %zu B messages): %s seal %.0f MB/s, open %.0f MB/s\n",
                proto::kMaxRmaBytes + proto::kHeaderSize + 17, auth::aead_name(aead.aead), aead.seal_mbps,
                aead.open_mbps);
  const std::vector<Workload> workloads = device_workloads(link, **devices, options);
  // Slices of about 25 ms of raw work (8 of each side per round): 8 to 100,000 operations.
  const DriverOptions driver{.rounds = options.rounds,
                             .first = Side::baseline,
                             .sizing = {.slice_seconds = 0.025, .min_operations = 8, .max_operations = 100000},
                             .columns = device_columns(),
                             .text = !options.json(),
                             .verbose = options.verbose,
                             .progress_fd = options.progress_fd,
                             .stop = &stop_requested(),
                             .only = options.only};
  auto rows = workloads_run(workloads, driver);
  if (!rows) return die(rows.error().describe());
  for (client::Attachment* attachment : {(*devices)->edu.get(), (*devices)->membar.get(), (*devices)->edu_push.get()})
    (void)attachment->detach(call_deadline());
  if (options.json()) {
    auto document = results_document(link.provider(), options.rounds, *rows, driver.columns);
    document["data_path"] = data_path_name(mode);
    document["bulk_baseline"] = bulk_baseline(mode, options).name;
    document["aead"] = {
        {"cipher", auth::aead_name(aead.aead)}, {"seal_mbps", aead.seal_mbps}, {"open_mbps", aead.open_mbps}};
    document_print(std::move(document), kBenchCommit);
  }
  return 0;
}

}  // namespace rpcie::bench
