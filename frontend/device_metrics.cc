#include "device_metrics.hpp"

#include <utility>

#include "rpcie/metrics_text.hpp"

namespace rpcie::hostd {

namespace {

// A device's histograms by the name (the `op` label) they are published under: the client
// calls' (AttachmentLatency), then hostd's own delivery of interrupts.
std::vector<std::pair<const char*, const LatencyHistogram::Snapshot*>> latency_named(const RemoteDevice::Status& s) {
  const auto& l = s.latency;
  return {{"mmio_read", &l.mmio_read},
          {"config_read", &l.config_read},
          {"config_write", &l.config_write},
          {"flush", &l.flush},
          {"bar_read", &l.bar_read},
          {"bar_write", &l.bar_write},
          {"interrupt_delivery", &s.interrupt_delivery}};
}

void device_counters(metrics::MetricsText& m, const metrics::Labels& labels, const client::AttachmentStats& s) {
  const metrics::Counter counters[] = {
      {"rpcie_device_config_reads", "Config-space reads of the current attachment.", s.config_reads},
      {"rpcie_device_config_writes", "Config-space writes of the current attachment.", s.config_writes},
      {"rpcie_device_mmio_reads", "Register (MMIO) reads of the current attachment.", s.mmio_reads},
      {"rpcie_device_mmio_writes", "Register (MMIO) writes (posted) of the current attachment.", s.mmio_writes},
      {"rpcie_device_bar_read_bytes", "Bytes read from memory BARs (bulk) by the current attachment.",
       s.bar_bytes_read},
      {"rpcie_device_bar_written_bytes", "Bytes written to memory BARs (bulk) by the current attachment.",
       s.bar_bytes_written},
      {"rpcie_device_window_pushed_bytes", "DMA-window bytes pushed to the exporter's mirror (streaming DMA).",
       s.window_bytes_pushed},
      {"rpcie_device_interrupts", "Interrupts received by the current attachment.", s.interrupts},
      {"rpcie_device_operations_failed", "Timed device operations that returned an error.", s.operations_failed},
      {"rpcie_device_posted_write_errors", "Posted register writes the device side refused.", s.posted_write_errors},
      {"rpcie_device_messages_refused", "Data-path messages dropped: foreign, forged, replayed or unexpected.",
       s.messages_refused},
      {"rpcie_device_heartbeats", "Lease heartbeats sent to the exporter.", s.heartbeats},
      {"rpcie_device_resumes", "Times the link to the exporter was lost and the attachment resumed over a new one.",
       s.resumes},
  };
  m.counters(labels, counters);
}

}  // namespace

nlohmann::json histogram_json(const LatencyHistogram::Snapshot& s) {
  nlohmann::json bounds = nlohmann::json::array(), counts = nlohmann::json::array();
  for (auto b : LatencyHistogram::kBoundsNs) bounds.push_back(static_cast<double>(b) / 1e9);
  for (auto c : s.counts) counts.push_back(c);
  return {{"le_seconds", bounds},
          {"counts", counts},
          {"sum_seconds", static_cast<double>(s.sum_ns) / 1e9},
          {"count", s.count}};
}

nlohmann::json telemetry_json(const client::DeviceTelemetry& t) {
  return {{"dma_read_bytes", t.dma_read_bytes},
          {"dma_written_bytes", t.dma_written_bytes},
          {"latency",
           {{"dma_read", histogram_json(t.dma_read)},
            {"dma_write", histogram_json(t.dma_write)},
            {"window_pull", histogram_json(t.window_pull)},
            {"interrupt", histogram_json(t.interrupt)}}}};
}

nlohmann::json latency_json(const RemoteDevice::Status& s) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, h] : latency_named(s)) out[name] = histogram_json(*h);
  return out;
}

std::string metrics_text(const std::vector<DeviceSample>& devices) {
  metrics::MetricsText m;
  m.gauge("rpcie_devices_attached", "Devices attached (any link state).", {}, static_cast<double>(devices.size()));
  for (const auto& d : devices) {
    const metrics::Labels labels{{"device", d.name},
                                 {"export", d.params.export_name},
                                 {"exporter", d.params.host + ":" + std::to_string(d.params.port)}};
    const auto& st = d.status;
    m.gauge("rpcie_device_generation", "Attachment generation: 1 at attach, +1 per reconnect (a reset device).", labels,
            static_cast<double>(st.generation));
    m.gauge("rpcie_device_connected",
            "1 while the link to the exporter is up, 0 while resuming, reconnecting or failed.", labels,
            st.state == LinkState::connected ? 1 : 0);
    m.counter("rpcie_device_link_losses", "Link losses (each followed by a reconnect attempt).", labels, st.losses);
    m.counter("rpcie_device_reconnects", "Successful reconnects (resumptions as a new attachment).", labels,
              st.generation - 1);
    device_counters(m, labels, st.stats);
    for (const auto& [op, h] : latency_named(st)) {
      auto with_op = labels;
      with_op.emplace_back("op", op);
      m.histogram("rpcie_device_latency_seconds",
                  "Latency of device operations of the current attachment, successful ones: client calls from call "
                  "to return; interrupt_delivery from arrival to events waiters woken.",
                  with_op, *h);
    }
  }
  return m.text();
}

}  // namespace rpcie::hostd
