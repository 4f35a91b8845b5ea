#include "driver.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "progress.hpp"
#include "support.hpp"

namespace rpcie::bench {

namespace {

using Clock = std::chrono::steady_clock;

// One round's values of both sides.
struct RoundValues {
  double baseline = 0, subject = 0, ratio = 0;
  double subject_whole = 0;  // µs per operation
};

// A side's latency samples over the rounds, µs per operation: of each operation while every
// slice so far timed each one, and of each slice always.
struct SideSamples {
  std::vector<double> operations, slices;
  bool per_operation = true;

  void add(const SliceSeconds& took, std::size_t operations_run) {
    slices.push_back(took.measured / static_cast<double>(operations_run) * 1e6);
    if (took.operations.size() != operations_run) per_operation = false;
    if (!per_operation) return;
    for (const double seconds : took.operations) operations.push_back(seconds * 1e6);
  }
};

// 2 * slices slices of `operations` operations, alternating sides.
Result<RoundValues> round_run(const Workload& workload, const DriverOptions& options, unsigned round,
                              std::size_t operations, SideSamples& baseline_samples, SideSamples& subject_samples) {
  SliceSeconds baseline, subject;
  for (unsigned slice = 0; slice < 2 * options.slices; ++slice) {
    const bool is_baseline = slice_side(options.first, round, slice) == Side::baseline;
    RPCIE_TRY_ASSIGN(const SliceSeconds took, (is_baseline ? workload.baseline : workload.subject)(operations));
    (is_baseline ? baseline_samples : subject_samples).add(took, operations);
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

// The percentiles of both sides: of operations when both timed each one, else of slices.
void row_percentiles_set(Row& row, const SideSamples& baseline, const SideSamples& subject) {
  const bool per_operation =
      baseline.per_operation && subject.per_operation && !baseline.operations.empty() && !subject.operations.empty();
  row.samples = per_operation ? Samples::operation : Samples::slice;
  row.baseline_percentiles = percentiles_of(per_operation ? baseline.operations : baseline.slices);
  row.subject_percentiles = percentiles_of(per_operation ? subject.operations : subject.slices);
}

Result<Row> workload_rounds_run(const Workload& workload, const DriverOptions& options, Progress* progress) {
  auto warmup = workload.baseline(workload.warmup_operations);
  if (!warmup) return error_in(warmup.error(), workload.name + " warm-up (" + options.columns.baseline + ")");
  if (auto warmup_subject = workload.subject(workload.warmup_operations); !warmup_subject)
    return error_in(warmup_subject.error(), workload.name + " warm-up (" + options.columns.subject + ")");
  const std::size_t operations = slice_operations(options.sizing, workload.warmup_operations, warmup->measured);
  std::vector<double> baseline, subject, ratios, subject_whole;
  SideSamples baseline_samples, subject_samples;
  for (unsigned round = 0; round < options.rounds; ++round) {
    if (options.stop && options.stop->load()) return fail(EINTR, "interrupted");
    auto values = round_run(workload, options, round, operations, baseline_samples, subject_samples);
    if (!values) return error_in(values.error(), workload.name);
    if (options.verbose && progress) progress->erase();
    if (options.verbose)
      std::fprintf(stderr, "  %s %zu round %u: %s %.2f %s %.2f ratio %.3f\n", workload.name.c_str(), workload.size,
                   round, options.columns.baseline.c_str(), values->baseline, options.columns.subject.c_str(),
                   values->subject, values->ratio);
    baseline.push_back(values->baseline);
    subject.push_back(values->subject);
    ratios.push_back(values->ratio);
    subject_whole.push_back(values->subject_whole);
    if (progress) progress->round_done(workload.name + " " + std::to_string(workload.size));
  }
  Row row{.workload = workload.name,
          .size = workload.size,
          .unit = workload.unit,
          .baseline = median(baseline),
          .subject = median(subject),
          .ratio = median(ratios),
          .baseline_is = workload.baseline_is,
          .subject_is = workload.subject_is,
          .baseline_spread = spread_of(baseline),
          .subject_spread = spread_of(subject)};
  if (workload.whole_reported) row.subject_whole = median(subject_whole);
  row_percentiles_set(row, baseline_samples, subject_samples);
  return row;
}

}  // namespace

const char* unit_name(Unit unit) noexcept { return unit == Unit::microseconds ? "us" : "MB/s"; }

const char* samples_name(Samples samples) noexcept { return samples == Samples::operation ? "operation" : "slice"; }

SliceRun slice_run_timed(std::function<Result<double>(std::size_t operations)> seconds) {
  return [seconds = std::move(seconds)](std::size_t operations) -> Result<SliceSeconds> {
    RPCIE_TRY_ASSIGN(const double took, seconds(operations));
    return SliceSeconds{took, took};
  };
}

SliceRun slice_run_sampled(
    std::function<Result<double>(std::size_t operations, std::vector<double>& operation_seconds)> seconds) {
  return [seconds = std::move(seconds)](std::size_t operations) -> Result<SliceSeconds> {
    SliceSeconds took;
    RPCIE_TRY_ASSIGN(took.measured, seconds(operations, took.operations));
    took.whole = took.measured;
    return took;
  };
}

SliceRun slice_run_each(std::function<Result<void>()> operation) {
  return [operation = std::move(operation)](std::size_t operations) -> Result<SliceSeconds> {
    SliceSeconds took;
    took.operations.reserve(operations);
    const auto start = Clock::now();
    auto last = start;
    for (std::size_t i = 0; i < operations; ++i) {
      RPCIE_TRY(operation());
      const auto now = Clock::now();
      took.operations.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    }
    took.measured = took.whole = std::chrono::duration<double>(last - start).count();
    return took;
  };
}

SliceRun slice_run_each_part(std::function<Result<double>()> operation) {
  return [operation = std::move(operation)](std::size_t operations) -> Result<SliceSeconds> {
    SliceSeconds took;
    took.operations.reserve(operations);
    const auto start = Clock::now();
    for (std::size_t i = 0; i < operations; ++i) {
      RPCIE_TRY_ASSIGN(const double measured, operation());
      took.measured += measured;
      took.operations.push_back(measured);
    }
    took.whole = std::chrono::duration<double>(Clock::now() - start).count();
    return took;
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

double unit_value(Unit unit, std::size_t size, double operations, double seconds) noexcept {
  if (unit == Unit::microseconds) return seconds / operations * 1e6;
  return static_cast<double>(size) * operations / seconds / 1e6;
}

Result<Row> workload_run(const Workload& workload, const DriverOptions& options) {
  return workload_rounds_run(workload, options, nullptr);
}

Result<std::vector<Row>> workloads_run(std::span<const Workload> workloads, const DriverOptions& options) {
  const auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::string> names;  // each once: the transport rows repeat theirs per size
  for (const Workload& w : workloads)
    if (!listed(names, w.name)) names.push_back(w.name);
  for (const auto& name : options.only) {
    if (listed(names, name)) continue;
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    return fail(EINVAL, "--only: no row named '" + name + "' here (rows: " + all + ")");
  }
  const auto chosen = [&](const Workload& w) { return options.only.empty() || listed(options.only, w.name); };
  std::vector<Row> rows;
  std::optional<Progress> progress;
  const auto count = static_cast<std::size_t>(std::count_if(workloads.begin(), workloads.end(), chosen));
  if (options.progress_fd >= 0) progress.emplace(count * options.rounds, options.progress_fd);
  for (const Workload& workload : workloads) {
    if (!chosen(workload)) continue;
    auto row = workload_rounds_run(workload, options, progress ? &*progress : nullptr);
    if (!row) return tl::unexpected(row.error());
    if (options.text) {
      if (progress) progress->erase();
      std::fputs(table_row(options.columns, *row).c_str(), stdout);
      std::fflush(stdout);
    }
    rows.push_back(std::move(*row));
  }
  return rows;
}

}  // namespace rpcie::bench
