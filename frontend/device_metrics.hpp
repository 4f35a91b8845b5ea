// The per-device telemetry rpcie-hostd publishes: the Prometheus text of --metrics and the
// histograms of `status` answers (docs/rpcie-hostd.md, METRICS). Pure functions of the
// devices' Status snapshots: no I/O, no locks of their own.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote_device.hpp"
#include "rpcie/client.hpp"
#include "rpcie/latency_histogram.hpp"

namespace rpcie::hostd {

// One attached device as the metrics show it.
struct DeviceSample {
  std::string name;  // rpcieN
  AttachParams params;
  RemoteDevice::Status status;
};

// {"le_seconds": [bounds...], "counts": [per bucket, not cumulative; the last one is +Inf],
//  "sum_seconds": S, "count": N}
nlohmann::json histogram_json(const LatencyHistogram::Snapshot& s);
// {"mmio_read": histogram_json, "config_read": ..., ...}: every histogram of the device's
// AttachmentLatency, then "interrupt_delivery" (Status::interrupt_delivery).
nlohmann::json latency_json(const RemoteDevice::Status& s);
// {"dma_read_bytes": N, "dma_written_bytes": N, "latency": {"dma_read": histogram_json,
//  "dma_write": ..., "window_pull": ..., "interrupt": ...}}: what the exporter measured of the
// device (client::DeviceTelemetry).
nlohmann::json telemetry_json(const client::DeviceTelemetry& t);

// The Prometheus text (format 0.0.4) of these devices, names starting rpcie_.
std::string metrics_text(const std::vector<DeviceSample>& devices);

}  // namespace rpcie::hostd
