#include "driver.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "support.hpp"

namespace rpcie::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One round's values of both sides.
struct RoundValues {
  double baseline = 0, subject = 0, ratio = 0;
  double subject_whole = 0;  // µs per operation
};

// 2 * slices slices of `operations` operations, alternating sides.
Result<RoundValues> round_run(const Workload& workload, const DriverOptions& options, unsigned round,
                              std::size_t operations) {
  SliceSeconds baseline, subject;
  for (unsigned slice = 0; slice < 2 * options.slices; ++slice) {
    const bool is_baseline = slice_side(options.first, round, slice) == Side::baseline;
    RPCIE_TRY_ASSIGN(const SliceSeconds took, (is_baseline ? workload.baseline : workload.subject)(operations));
    SliceSeconds& sum = is_baseline ? baseline : subject;
    sum.measured += took.measured;
    sum.whole += took.whole;
  }
  const double total = static_cast<double>(operations * options.slices);
  RoundValues values;
  values.baseline = unit_value(workload.unit, workload.size, total, baseline.measured);
  values.subject = unit_value(workload.unit, workload.size, total, subject.measured);
  values.ratio = values.subject / values.baseline;
  values.subject_whole = subject.whole / total * 1e6;
  return values;
}

}  // namespace

const char* unit_name(Unit unit) noexcept { return unit == Unit::microseconds ? "us" : "MB/s"; }

SliceRun slice_run_timed(std::function<Result<double>(std::size_t operations)> seconds) {
  return [seconds = std::move(seconds)](std::size_t operations) -> Result<SliceSeconds> {
    RPCIE_TRY_ASSIGN(const double took, seconds(operations));
    return SliceSeconds{took, took};
  };
}

SliceRun slice_run_each(std::function<Result<void>()> operation) {
  return [operation = std::move(operation)](std::size_t operations) -> Result<SliceSeconds> {
    const auto start = Clock::now();
    for (std::size_t i = 0; i < operations; ++i) RPCIE_TRY(operation());
    const double took = seconds_since(start);
    return SliceSeconds{took, took};
  };
}

std::size_t slice_operations(const Sizing& sizing, std::size_t warmup_operations, double warmup_seconds) noexcept {
  const double operations = static_cast<double>(warmup_operations) * sizing.slice_seconds /
                            std::max(warmup_seconds, sizing.warmup_floor_seconds);
  return std::clamp<std::size_t>(static_cast<std::size_t>(operations), sizing.min_operations, sizing.max_operations);
}

Side slice_side(Side first, unsigned round, unsigned slice) noexcept {
  if ((round + slice) % 2 == 0) return first;
  return first == Side::baseline ? Side::subject : Side::baseline;
}

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const double rank = fraction * static_cast<double>(values.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, values.size() - 1);
  const double weight = rank - static_cast<double>(below);
  return values[below] * (1 - weight) + values[above] * weight;
}

double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

double unit_value(Unit unit, std::size_t size, double operations, double seconds) noexcept {
  if (unit == Unit::microseconds) return seconds / operations * 1e6;
  return static_cast<double>(size) * operations / seconds / 1e6;
}

Result<Row> workload_run(const Workload& workload, const DriverOptions& options) {
  auto warmup = workload.baseline(workload.warmup_operations);
  if (!warmup) return error_in(warmup.error(), workload.name + " warm-up (" + options.columns.baseline + ")");
  if (auto warmup_subject = workload.subject(workload.warmup_operations); !warmup_subject)
    return error_in(warmup_subject.error(), workload.name + " warm-up (" + options.columns.subject + ")");
  const std::size_t operations = slice_operations(options.sizing, workload.warmup_operations, warmup->measured);
  std::vector<double> baseline, subject, ratios, subject_whole;
  for (unsigned round = 0; round < options.rounds; ++round) {
    if (options.stop && options.stop->load()) return fail(EINTR, "interrupted");
    auto values = round_run(workload, options, round, operations);
    if (!values) return error_in(values.error(), workload.name);
    if (options.verbose)
      std::fprintf(stderr, "  %s %zu round %u: %s %.2f %s %.2f ratio %.3f\n", workload.name.c_str(), workload.size,
                   round, options.columns.baseline.c_str(), values->baseline, options.columns.subject.c_str(),
                   values->subject, values->ratio);
    baseline.push_back(values->baseline);
    subject.push_back(values->subject);
    ratios.push_back(values->ratio);
    subject_whole.push_back(values->subject_whole);
  }
  Row row{.workload = workload.name,
          .size = workload.size,
          .unit = workload.unit,
          .baseline = median(baseline),
          .subject = median(subject),
          .ratio = median(ratios),
          .baseline_is = workload.baseline_is,
          .subject_is = workload.subject_is};
  if (workload.whole_reported) row.subject_whole = median(subject_whole);
  return row;
}

Result<std::vector<Row>> workloads_run(std::span<const Workload> workloads, const DriverOptions& options) {
  std::vector<Row> rows;
  for (const Workload& workload : workloads) {
    RPCIE_TRY_ASSIGN(Row row, workload_run(workload, options));
    if (options.text) {
      std::fputs(table_row(options.columns, row).c_str(), stdout);
      std::fflush(stdout);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string table_header(const Columns& columns) {
  char line[256];
  int length = std::snprintf(line, sizeof line, "%-*s %8s %12s %12s %-5s %6s", columns.name_width, "workload", "size",
                             columns.baseline.c_str(), columns.subject.c_str(), "unit", "ratio");
  std::string text(line, static_cast<std::size_t>(std::clamp<int>(length, 0, sizeof line - 1)));
  if (columns.labelled) text += " (" + columns.baseline + " vs " + columns.subject + ")";
  return text + "\n";
}

std::string table_row(const Columns& columns, const Row& row) {
  char line[256];
  int length = std::snprintf(line, sizeof line, "%-*s %8zu %12.2f %12.2f %-5s %6.3f", columns.name_width,
                             row.workload.c_str(), row.size, row.baseline, row.subject, unit_name(row.unit), row.ratio);
  std::string text(line, static_cast<std::size_t>(std::clamp<int>(length, 0, sizeof line - 1)));
  if (columns.labelled) text += " (" + row.baseline_is + " vs " + row.subject_is + ")";
  if (row.subject_whole) {
    length = std::snprintf(line, sizeof line, "   (%.2f us with the acknowledge)", *row.subject_whole);
    text.append(line, static_cast<std::size_t>(std::clamp<int>(length, 0, sizeof line - 1)));
  }
  return text + "\n";
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
    results.push_back(std::move(result));
  }
  return {{"provider", provider}, {"rounds", rounds}, {"results", std::move(results)}};
}

void results_print(const std::string& provider, unsigned rounds, std::span<const Row> rows, const Columns& columns) {
  std::printf("%s\n", results_document(provider, rounds, rows, columns).dump(1).c_str());
}

}  // namespace rpcie::bench
