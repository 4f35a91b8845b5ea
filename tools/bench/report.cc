// rpcie-bench's reports of the driver's rows (driver.hpp): the text table and the JSON document.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>

#include "driver.hpp"
#include "support.hpp"

namespace rpcie::bench {

namespace {

// snprintf into a std::string (lines here are short: at most 255 characters).
__attribute__((format(printf, 1, 2))) std::string format(const char* pattern, ...) {
  char line[256];
  va_list args;
  va_start(args, pattern);
  const int length = std::vsnprintf(line, sizeof line, pattern, args);
  va_end(args);
  return std::string(line, static_cast<std::size_t>(std::clamp<int>(length, 0, sizeof line - 1)));
}

// "raw 1.00-2.00 rpcie 3.00-4.00 MB/s | p50/p99/p99.9 us per operation: raw 1.00/2.00/3.00 rpcie …"
std::string distribution_line(const Columns& columns, const Row& row) {
  std::string text = format("  min-max %s %.2f-%.2f %s %.2f-%.2f %s", columns.baseline.c_str(), row.baseline_spread.min,
                            row.baseline_spread.max, columns.subject.c_str(), row.subject_spread.min,
                            row.subject_spread.max, unit_name(row.unit));
  text += format(" | p50/p99/p99.9 us per operation%s: %s %.2f/%.2f/%.2f %s %.2f/%.2f/%.2f",
                 row.samples == Samples::slice ? " (slice means)" : "", columns.baseline.c_str(),
                 row.baseline_percentiles.p50, row.baseline_percentiles.p99, row.baseline_percentiles.p999,
                 columns.subject.c_str(), row.subject_percentiles.p50, row.subject_percentiles.p99,
                 row.subject_percentiles.p999);
  return text + "\n";
}

// The keys of one side's spread and percentiles: <side>_min, <side>_max, <side>_p50, ….
void side_keys_add(nlohmann::json& result, const std::string& side, const Spread& spread,
                   const Percentiles& percentiles) {
  result[side + "_min"] = spread.min;
  result[side + "_max"] = spread.max;
  result[side + "_p50"] = percentiles.p50;
  result[side + "_p99"] = percentiles.p99;
  result[side + "_p999"] = percentiles.p999;
}

}  // namespace

std::string table_header(const Columns& columns) {
  std::string text = format("%-*s %8s %12s %12s %-5s %6s", columns.name_width, "workload", "size",
                            columns.baseline.c_str(), columns.subject.c_str(), "unit", "ratio");
  if (columns.labelled) text += " (" + columns.baseline + " vs " + columns.subject + ")";
  return text + "\n";
}

std::string table_row(const Columns& columns, const Row& row) {
  std::string text = format("%-*s %8zu %12.2f %12.2f %-5s %6.3f", columns.name_width, row.workload.c_str(), row.size,
                            row.baseline, row.subject, unit_name(row.unit), row.ratio);
  if (columns.labelled) text += " (" + row.baseline_is + " vs " + row.subject_is + ")";
  if (row.subject_whole) text += format("   (%.2f us with the acknowledge)", *row.subject_whole);
  return text + "\n" + distribution_line(columns, row);
}

nlohmann::json results_document(const std::string& provider, unsigned rounds, std::span<const Row> rows,
                                const Columns& columns) {
  nlohmann::json results = nlohmann::json::array();
  for (const Row& row : rows) {
    nlohmann::json result = {{"workload", row.workload},       {"size", row.size},
                             {columns.baseline, row.baseline}, {columns.subject, row.subject},
                             {"unit", unit_name(row.unit)},    {"ratio", row.ratio}};
    if (columns.labelled) {
      result[columns.baseline + "_is"] = row.baseline_is;
      result[columns.subject + "_is"] = row.subject_is;
    }
    if (row.subject_whole) result[columns.subject + "_with_ack"] = *row.subject_whole;
    side_keys_add(result, columns.baseline, row.baseline_spread, row.baseline_percentiles);
    side_keys_add(result, columns.subject, row.subject_spread, row.subject_percentiles);
    result["percentiles_of"] = samples_name(row.samples);
    results.push_back(std::move(result));
  }
  nlohmann::json document = {{"provider", provider}, {"rounds", rounds}, {"results", std::move(results)}};
  if (provider.find("tcp") != std::string::npos) document["tcp_congestion_control"] = tcp_congestion_control();
  return document;
}

void document_print(nlohmann::json document, const char* commit) {
  document["commit"] = commit;
  std::printf("%s\n", document.dump(1).c_str());
}

}  // namespace rpcie::bench
