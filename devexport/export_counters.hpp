// What one export has done since the exporter started: the counters rpcie-exportd's
// --metrics publishes per export (docs/rpcie-exportd.md, METRICS). Lock-free: incremented
// by the control side (attaches, refusals, lease lapses, what ended attachments refused)
// and the data path (requests, DMA, interrupts) of every attachment of the export, read at
// any time. Counters and histograms only grow.
#pragma once

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "rpcie/latency_histogram.hpp"
#include "rpcie/latency_wire.hpp"
#include "rpcie/protocol.hpp"

namespace rpcie::dev {

// What a device did through the fabric: its DMA (bytes and latency) and the cost of its
// interrupts. Kept twice, the same records in each: per export (ExportCounters, all of its
// attachments, rpcie-exportd's --metrics) and per attachment (ServedAttachment, what
// telemetry_reply tells that client). Lock-free: recorded by the data path, read at any time.
struct DeviceActivity {
  // What the device's transfers and interrupts cost through the fabric, each interval read
  // on this host's clock alone (the client's clock is never compared with it), successful
  // ones only (a failure ends the attachment):
  //  - dma_read, dma_write: one DmaPort call, from the device's request to its completion.
  //    On-demand exports: the one-sided RMA read or write of the client's window, completed
  //    (the bytes are in the window, or in the device). Mirror exports: the copy to or from
  //    the local mirror only; their fabric cost is in window_pull and interrupt.
  //  - window_pull: a mirror export's pull of the whole client window before a doorbell
  //    (ordering rule 3); none where the client pushes (streaming DMA) or on-demand.
  //  - interrupt: from the device raising it to the interrupt message handed to the fabric,
  //    behind the DMA writes before it (rule 4: mirror push and write completions included).
  enum class Latency : std::size_t { dma_read, dma_write, window_pull, interrupt, count_ };
  static constexpr std::array<const char*, static_cast<std::size_t>(Latency::count_)> kLatencyNames = {
      "dma_read", "dma_write", "window_pull", "interrupt"};
  std::array<LatencyHistogram, static_cast<std::size_t>(Latency::count_)> latency{};
  std::atomic<std::uint64_t> dma_read_bytes{0};     // the device read from the client's window
  std::atomic<std::uint64_t> dma_written_bytes{0};  // the device wrote into it

  void latency_record(Latency op, std::chrono::nanoseconds took) noexcept {
    latency[static_cast<std::size_t>(op)].record(took);
  }
  void dma_bytes_add(bool written, std::uint64_t bytes) noexcept {
    (written ? dma_written_bytes : dma_read_bytes).fetch_add(bytes, std::memory_order_relaxed);
  }
  // All of it as telemetry_reply carries it (each counter read once, relaxed).
  proto::TelemetryReply telemetry() const {
    const auto counts = [&](Latency op) { return latency_counts_of(latency[static_cast<std::size_t>(op)].snapshot()); };
    return {.dma_read_bytes = dma_read_bytes.load(std::memory_order_relaxed),
            .dma_written_bytes = dma_written_bytes.load(std::memory_order_relaxed),
            .dma_read = counts(Latency::dma_read),
            .dma_write = counts(Latency::dma_write),
            .window_pull = counts(Latency::window_pull),
            .interrupt = counts(Latency::interrupt)};
  }
};

struct ExportCounters : DeviceActivity {
  // Why an attach of this export was refused.
  enum class Refusal : std::size_t { busy, not_allowed, invalid, data_path, setup_failed, other, count_ };
  static constexpr std::array<const char*, static_cast<std::size_t>(Refusal::count_)> kRefusalNames = {
      "busy", "not_allowed", "invalid", "data_path", "setup_failed", "other"};
  // The refusal an attach error's errno stands for (export_table.hpp, Exporter::attach).
  static Refusal refusal_of(int code) noexcept;

  // Kinds of requests an attachment's data thread handled (performed, or answered with an
  // error by the device side); a write batch counts each write.
  enum class Request : std::size_t { mmio_read, mmio_write, config_read, config_write, bar, other, count_ };
  static constexpr std::array<const char*, static_cast<std::size_t>(Request::count_)> kRequestNames = {
      "mmio_read", "mmio_write", "config_read", "config_write", "bar", "other"};

  std::atomic<std::uint64_t> attaches{0};  // attachments set up and served
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Refusal::count_)> refused{};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Request::count_)> requests{};
  std::atomic<std::uint64_t> interrupts{0};    // raised by the device to an attachment
  std::atomic<std::uint64_t> lease_lapses{0};  // attachments ended for want of heartbeats
  std::atomic<std::uint64_t> resumes{0};       // attachments resumed over a new link
  // Of ended attachments (added as each ends): bootstrap frames dropped for a bad MAC, and
  // data-path messages dropped as foreign, forged or replayed.
  std::atomic<std::uint64_t> frames_dropped{0};
  std::atomic<std::uint64_t> messages_refused{0};

  void refusal_add(Refusal r) noexcept { refused[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed); }
  void request_add(Request r, std::uint64_t n = 1) noexcept {
    requests[static_cast<std::size_t>(r)].fetch_add(n, std::memory_order_relaxed);
  }
};

inline ExportCounters::Refusal ExportCounters::refusal_of(int code) noexcept {
  switch (code) {
    case EBUSY:
      return Refusal::busy;
    case EACCES:
    case EPERM:
      return Refusal::not_allowed;
    case EINVAL:
      return Refusal::invalid;
    case EPROTO:
      return Refusal::data_path;
    default:
      return Refusal::other;
  }
}

}  // namespace rpcie::dev
