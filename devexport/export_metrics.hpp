// rpcie-exportd's /metrics text: the exporter's connection counters and every export's
// ExportCounters in the Prometheus text format (docs/rpcie-exportd.md, METRICS). No I/O.
#pragma once

#include <string>

#include "export_table.hpp"
#include "exporter.hpp"

namespace rpcie::dev {

std::string export_metrics_text(ExportTable& exports, const Exporter::Stats& stats);

}  // namespace rpcie::dev
