#include "export_metrics.hpp"

#include "rpcie/metrics_text.hpp"

namespace rpcie::dev {

namespace {

void exporter_counters(metrics::MetricsText& m, const Exporter::Stats& s) {
  const metrics::Counter counters[] = {
      {"rpcie_exportd_connections_accepted", "Bootstrap connections accepted (refused ones included).", s.accepted},
      {"rpcie_exportd_connections_refused_preauth", "Connections closed at once over a pre-authentication cap.",
       s.refused_preauth},
      {"rpcie_exportd_connections_refused_busy", "Authenticated connections refused as too many.", s.refused_busy},
      {"rpcie_exportd_auth_failed", "Handshakes that failed or timed out.", s.auth_failed},
      {"rpcie_exportd_frames_dropped", "Bootstrap frames dropped for a bad MAC (ended connections).", s.frames_dropped},
      {"rpcie_exportd_frames_malformed", "Authenticated connections closed for a malformed frame.", s.frames_malformed},
      {"rpcie_exportd_messages_refused", "Data-path messages dropped: foreign, forged or replayed (ended attachments).",
       s.messages_refused},
  };
  m.counters({}, counters);
}

void export_counters(metrics::MetricsText& m, const metrics::Labels& labels, const ExportCounters& c) {
  const auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  m.counter("rpcie_export_attaches", "Attachments set up and served.", labels, get(c.attaches));
  for (std::size_t i = 0; i < c.refused.size(); ++i) {
    auto with = labels;
    with.emplace_back("reason", ExportCounters::kRefusalNames[i]);
    m.counter("rpcie_export_attaches_refused", "Attaches refused, by reason.", with, get(c.refused[i]));
  }
  for (std::size_t i = 0; i < c.requests.size(); ++i) {
    auto with = labels;
    with.emplace_back("kind", ExportCounters::kRequestNames[i]);
    m.counter("rpcie_export_requests", "Data-path requests handled, by kind (a write batch counts each write).", with,
              get(c.requests[i]));
  }
  m.counter("rpcie_export_dma_read_bytes", "Bytes the device read from clients' DMA windows.", labels,
            get(c.dma_read_bytes));
  m.counter("rpcie_export_dma_written_bytes", "Bytes the device wrote into clients' DMA windows.", labels,
            get(c.dma_written_bytes));
  m.counter("rpcie_export_interrupts", "Interrupts the device raised to an attachment.", labels, get(c.interrupts));
  m.counter("rpcie_export_lease_lapses", "Attachments ended because their heartbeats stopped.", labels,
            get(c.lease_lapses));
  m.counter("rpcie_export_resumes", "Attachments resumed over a new link after theirs was lost.", labels,
            get(c.resumes));
  m.counter("rpcie_export_frames_dropped", "Bootstrap frames of ended attachments dropped for a bad MAC.", labels,
            get(c.frames_dropped));
  m.counter("rpcie_export_messages_refused",
            "Data-path messages of ended attachments dropped: foreign, forged or replayed.", labels,
            get(c.messages_refused));
  for (std::size_t i = 0; i < c.latency.size(); ++i) {
    auto with = labels;
    with.emplace_back("op", ExportCounters::kLatencyNames[i]);
    m.histogram("rpcie_export_latency_seconds",
                "Latency of the device's DMA transfers (request to completion) and interrupts (raise to the "
                "fabric), on the exporter's clock, successful ones.",
                with, c.latency[i].snapshot());
  }
}

}  // namespace

std::string export_metrics_text(ExportTable& exports, const Exporter::Stats& stats) {
  metrics::MetricsText m;
  exporter_counters(m, stats);
  for (const auto& h : exports.held()) {
    const ExportSlot& slot = *h.slot;
    const metrics::Labels labels{{"export", slot.config.spec.name}, {"backend", slot.config.spec.backend}};
    m.gauge("rpcie_export_attachments", "Attachments holding the export now.", labels, static_cast<double>(h.holders));
    export_counters(m, labels, slot.counters);
  }
  return m.text();
}

}  // namespace rpcie::dev
