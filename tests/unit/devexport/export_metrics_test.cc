// export_metrics_text: every export's counters and its DMA and interrupt latency histograms
// (ExportCounters::latency) in the Prometheus text, one histogram per op.
#include "export_metrics.hpp"

#include <chrono>
#include <string>

#include <doctest/doctest.h>

using namespace rpcie;
using namespace rpcie::dev;
using namespace std::chrono_literals;

namespace {

ExportSlot& edu_added(ExportTable& t, const std::string& name) {
  ExportConfig c;
  c.spec.name = name;
  c.spec.backend = "edu";
  auto b = backend_create(c.spec);
  REQUIRE_MESSAGE(b, (b ? "" : b.error().message));
  t.add(std::move(c), std::move(*b));
  ExportSlot* s = t.find(name).get();  // the table keeps it alive
  REQUIRE(s != nullptr);
  return *s;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("export metrics: DMA and interrupt latencies per export and op, each record counted once") {
  ExportTable t;
  auto& edu0 = edu_added(t, "edu0");
  edu_added(t, "edu1");
  // Records of 3 ms (the interval ended at least 3 ms after `since`; a loaded machine may
  // stretch it, never past the 1 s bucket in a unit test).
  const auto since = std::chrono::steady_clock::now() - 3ms;
  const auto record = [&](ExportCounters::Latency op) {
    edu0.counters.latency_record(op, std::chrono::steady_clock::now() - since);
  };
  record(ExportCounters::Latency::dma_read);
  record(ExportCounters::Latency::dma_read);
  record(ExportCounters::Latency::dma_write);
  record(ExportCounters::Latency::interrupt);
  const std::string text = export_metrics_text(t, Exporter::Stats{});
  INFO(text);
  const std::string e0 = R"(export="edu0",backend="edu",op=)";
  CHECK(has_line(text, "# TYPE rpcie_export_latency_seconds histogram"));
  CHECK(has_line(text, "rpcie_export_latency_seconds_count{" + e0 + R"("dma_read"} 2)"));
  CHECK(has_line(text, "rpcie_export_latency_seconds_count{" + e0 + R"("dma_write"} 1)"));
  CHECK(has_line(text, "rpcie_export_latency_seconds_count{" + e0 + R"("window_pull"} 0)"));
  CHECK(has_line(text, "rpcie_export_latency_seconds_count{" + e0 + R"("interrupt"} 1)"));
  // 3 ms or more: none at or under 2 ms, both by 1 s (cumulative buckets).
  CHECK(has_line(text, "rpcie_export_latency_seconds_bucket{" + e0 + R"("dma_read",le="0.002"} 0)"));
  CHECK(has_line(text, "rpcie_export_latency_seconds_bucket{" + e0 + R"("dma_read",le="1"} 2)"));
  CHECK(has_line(text, "rpcie_export_latency_seconds_bucket{" + e0 + R"("dma_read",le="+Inf"} 2)"));
  // The other export's histograms are there, and empty.
  for (const char* op : {"dma_read", "dma_write", "window_pull", "interrupt"})
    CHECK(has_line(
        text, std::string(R"(rpcie_export_latency_seconds_count{export="edu1",backend="edu",op=")") + op + "\"} 0"));
  const auto snap = edu0.counters.latency[static_cast<std::size_t>(ExportCounters::Latency::dma_read)].snapshot();
  CHECK(snap.count == 2);
  CHECK(snap.sum_ns >= 6'000'000);
  // The same records as telemetry_reply carries them.
  const auto reply = edu0.counters.telemetry();
  CHECK(rpcie::snapshot_of(reply.dma_read).count == 2);
  CHECK(rpcie::snapshot_of(reply.dma_write).count == 1);
  CHECK(rpcie::snapshot_of(reply.window_pull).count == 0);
  CHECK(rpcie::snapshot_of(reply.interrupt).count == 1);
  CHECK(rpcie::snapshot_of(reply.dma_read).sum_ns == snap.sum_ns);
}
