// device_metrics: a device's histograms in `status` answers (latency_json) and in the
// Prometheus text (metrics_text): the client calls' and hostd's interrupt delivery.
#include "device_metrics.hpp"

#include <string>

#include <doctest/doctest.h>

using namespace rpcie;
using namespace rpcie::hostd;

namespace {

// A snapshot of `n` records of 50 us each.
LatencyHistogram::Snapshot records(std::uint64_t n) {
  LatencyHistogram::Snapshot s;
  s.counts[LatencyHistogram::bucket_of(50'000)] = n;
  s.count = n;
  s.sum_ns = n * 50'000;
  return s;
}

DeviceSample sample() {
  DeviceSample d;
  d.name = "rpcie0";
  d.params.host = "10.0.0.1";
  d.params.port = 7385;
  d.params.export_name = "edu0";
  d.status.latency.mmio_read = records(2);
  d.status.interrupt_delivery = records(3);
  return d;
}

}  // namespace

TEST_CASE("device metrics: status latency has every call's histogram and interrupt_delivery") {
  const auto j = latency_json(sample().status);
  for (const char* op :
       {"mmio_read", "config_read", "config_write", "flush", "bar_read", "bar_write", "interrupt_delivery"}) {
    INFO(op);
    REQUIRE(j.contains(op));
    CHECK(j[op]["counts"].size() == LatencyHistogram::kBuckets + 1);
  }
  CHECK(j.size() == 7);
  CHECK(j["mmio_read"]["count"] == 2);
  CHECK(j["interrupt_delivery"]["count"] == 3);
  CHECK(j["interrupt_delivery"]["sum_seconds"].get<double>() == doctest::Approx(150e-6));
}

TEST_CASE("device metrics: /metrics has op=\"interrupt_delivery\" beside the calls' histograms") {
  const std::string text = metrics_text({sample()});
  INFO(text);
  const std::string labels = R"(device="rpcie0",export="edu0",exporter="10.0.0.1:7385",op=)";
  CHECK(text.find("\nrpcie_device_latency_seconds_count{" + labels + "\"interrupt_delivery\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("\nrpcie_device_latency_seconds_bucket{" + labels + "\"interrupt_delivery\",le=\"5e-05\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("\nrpcie_device_latency_seconds_bucket{" + labels + "\"interrupt_delivery\",le=\"2e-05\"} 0\n") !=
        std::string::npos);
  CHECK(text.find("\nrpcie_device_latency_seconds_count{" + labels + "\"mmio_read\"} 2\n") != std::string::npos);
}
