// rpcie-bench's driver: every mode (the transport rows, --device, --frontend) describes its
// workloads as data, and this one loop runs them and reports them.
//
// Method, per workload: one untimed warm-up of each side (baseline first: connections
// established, caches and page tables hot); the baseline's warm-up speed sizes the slices
// (about Sizing::slice_seconds of baseline work each, the same operation count for both sides).
// Then `rounds` rounds; a round is `slices` slices of each side, alternating, and which side
// goes first alternates from round to round: loopback tcp switches between fast and slow phases
// lasting a good part of a second, and fine interleaving makes both sides see the same phases.
// Per round: each side's value (µs per operation or MB/s) and the ratio subject/baseline; the
// row reports the median of each over the rounds, the lowest and highest round value of each
// side (the spread), and percentiles of each side's latency in µs per operation: of every
// operation when both sides time each one alone (SliceSeconds::operations), else of every
// slice (its mean time per operation).
//
// Not thread-safe; runners are called one at a time on the calling thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rpcie/result.hpp"
#include "stats.hpp"

namespace rpcie::bench {

// What a row reports: a latency (µs per operation, lower is better) or a throughput
// (MB/s, 10^6 bytes per second, higher is better).
enum class Unit { microseconds, megabytes_per_second };

// "us" or "MB/s", as printed and in JSON.
const char* unit_name(Unit unit) noexcept;

// How long one slice took. `measured` is what the row reports; `whole` is the whole loop,
// which is longer when part of every operation lies outside the measured interval (the edu
// rows' interrupt acknowledge), else equal. `operations`: the measured seconds of each
// operation, when the side times each one alone (one at a time); else empty.
struct SliceSeconds {
  double measured = 0;
  double whole = 0;
  std::vector<double> operations{};
};

// Runs `operations` operations of one side and says how long they took.
using SliceRun = std::function<Result<SliceSeconds>(std::size_t operations)>;

// A SliceRun whose whole slice is measured, from a function returning seconds.
SliceRun slice_run_timed(std::function<Result<double>(std::size_t operations)> seconds);
// A SliceRun from a function returning seconds that may also append the seconds of each
// operation (when it times each one alone; else it leaves them empty).
SliceRun slice_run_sampled(
    std::function<Result<double>(std::size_t operations, std::vector<double>& operation_seconds)> seconds);
// A SliceRun that times `operations` calls of `operation`, each one alone (one clock read
// per call), stopping at the first error.
SliceRun slice_run_each(std::function<Result<void>()> operation);
// The same for operations that time a part of themselves: each call returns the seconds of
// its measured part (what the row reports); the whole loop, the rest included, is the
// slice's `whole`.
SliceRun slice_run_each_part(std::function<Result<double>()> operation);

// One row of the table.
struct Workload {
  std::string name{};    // the row name: rma_write, bar_read, edu_dma, reg_read, …
  std::size_t size = 0;  // bytes per operation
  Unit unit = Unit::microseconds;
  std::size_t warmup_operations = 0;  // per side; the baseline's warm-up sizes the slices
  SliceRun baseline{};                // raw libfabric, the client API, local memory
  SliceRun subject{};                 // rpcie, the file front end
  // The row also reports the subject's whole loop in µs per operation (text: "(N us with
  // the acknowledge)", JSON: <subject>_with_ack).
  bool whole_reported = false;
  // What each side is, for modes whose baseline differs between rows (Columns::labelled).
  std::string baseline_is{}, subject_is{};
};

// How the warm-up sizes the slices.
struct Sizing {
  double slice_seconds = 0.025;  // of baseline work
  std::size_t min_operations = 1;
  std::size_t max_operations = 100000;
  double warmup_floor_seconds = 1e-6;  // a faster warm-up counts as this long
};

// Operations per slice, from the baseline's warm-up of `warmup_operations` operations.
std::size_t slice_operations(const Sizing& sizing, std::size_t warmup_operations, double warmup_seconds) noexcept;

enum class Side { baseline, subject };

// The side that runs slice `slice` of round `round`: `first` on even round + slice.
Side slice_side(Side first, unsigned round, unsigned slice) noexcept;

// How the table is labelled.
struct Columns {
  std::string baseline = "raw";  // header and JSON key of the baseline's value
  std::string subject = "rpcie";
  int name_width = 10;  // of the workload column
  // Rows end with "(baseline_is vs subject_is)" and JSON has <baseline>_is, <subject>_is.
  bool labelled = false;
};

struct DriverOptions {
  unsigned rounds = 5;
  unsigned slices = 8;          // of each side per round
  Side first = Side::baseline;  // the side that goes first in round 0
  Sizing sizing{};
  Columns columns{};
  bool text = true;      // print each row to stdout as it is done
  bool verbose = false;  // print every round to stderr
  int progress_fd = 2;   // workloads_run(): a progress line there if it is a terminal (progress.hpp); -1: none
  const std::atomic<bool>* stop = nullptr;  // checked before each round: error "interrupted"
  std::vector<std::string> only{};          // workloads_run(): these rows by name (empty: every row)
};

// What the percentiles of a row are of.
enum class Samples { operation, slice };
// "operation" or "slice", as in JSON.
const char* samples_name(Samples samples) noexcept;

// One reported row: medians over the rounds, spreads, percentiles.
struct Row {
  std::string workload{};
  std::size_t size = 0;
  Unit unit = Unit::microseconds;
  double baseline = 0, subject = 0, ratio = 0;  // ratio: median of the per-round subject/baseline
  std::optional<double> subject_whole{};        // µs per operation (Workload::whole_reported)
  std::string baseline_is{}, subject_is{};
  Spread baseline_spread{}, subject_spread{};                 // of the round values, in the row's unit
  Percentiles baseline_percentiles{}, subject_percentiles{};  // µs per operation
  Samples samples = Samples::slice;
};

// What a side did in a round: µs per operation, or MB/s.
double unit_value(Unit unit, std::size_t size, double operations, double seconds) noexcept;

// Warms up and runs the rounds of one workload. Errors name the workload.
Result<Row> workload_run(const Workload& workload, const DriverOptions& options);
// Runs every workload in order (or those options.only names), printing each row when it is
// done (options.text); stops at the first error. A name in options.only that no workload has
// is EINVAL, before anything runs.
Result<std::vector<Row>> workloads_run(std::span<const Workload> workloads, const DriverOptions& options);

// The text table's header line and one row: a line with the medians and ratio, then a line
// with each side's spread (min-max of the round values) and percentiles (µs per operation),
// each with its newline.
std::string table_header(const Columns& columns);
std::string table_row(const Columns& columns, const Row& row);

// {"provider": .., "rounds": .., "results": [{"workload", "size", <baseline>, <subject>,
// "unit", "ratio", <side>_min, <side>_max, <side>_p50, <side>_p99, <side>_p999 for both
// sides, "percentiles_of" ("operation" or "slice"), and the optional keys above}, ...]}
nlohmann::json results_document(const std::string& provider, unsigned rounds, std::span<const Row> rows,
                                const Columns& columns);
// `document` with "commit" (the build's `git describe`) on stdout, one key per line.
void document_print(nlohmann::json document, const char* commit);

}  // namespace rpcie::bench
