// rpcie-bench's driver (tools/bench/driver.hpp) with fake runners: the statistics, the order
// in which the sides run, what a row reports, and the shape of the table and the JSON document.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "driver.hpp"
#include "progress.hpp"
#include "support.hpp"

namespace {

using namespace rpcie;
using namespace rpcie::bench;

// A fake side: each call is logged; a slice of n operations takes n * cost[round] µs, where
// the round is counted from the calls after the warm-up (slices_per_round calls per round).
struct FakeSide {
  char tag;
  std::vector<double> cost_us;  // per round
  std::vector<char>* log;
  std::vector<std::size_t>* operations;
  unsigned slices_per_round = 8;
  unsigned calls = 0;
  double warmup_seconds = 1e-3;

  SliceRun run() {
    return [this](std::size_t n) -> Result<SliceSeconds> {
      log->push_back(tag);
      operations->push_back(n);
      const unsigned call = calls++;
      if (call == 0) return SliceSeconds{warmup_seconds, warmup_seconds};
      const double seconds = static_cast<double>(n) * cost_us[(call - 1) / slices_per_round] * 1e-6;
      return SliceSeconds{seconds, 2 * seconds};
    };
  }
};

DriverOptions quiet_options(unsigned rounds) {
  DriverOptions options;
  options.rounds = rounds;
  options.slices = 8;
  options.sizing = Sizing{0.025, 10, 10, 1e-6};  // always 10 operations per slice
  options.text = false;
  return options;
}

std::set<std::string> keys_of(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (const auto& item : object.items()) keys.insert(item.key());
  return keys;
}

}  // namespace

TEST_CASE("the median of an odd count is the middle value, of an even count the mean of the two middle ones") {
  CHECK(median({5, 1, 3}) == 3);
  CHECK(median({4, 1, 3, 2}) == 2.5);
  CHECK(median({7}) == 7);
  std::vector<double> values{3, 1, 2};
  (void)median(values);
  CHECK(values == std::vector<double>{3, 1, 2});  // the caller's order is kept
}

TEST_CASE("percentiles interpolate linearly between the closest ranks") {
  const std::vector<double> values{40, 10, 30, 20};
  CHECK(percentile(values, 0) == 10);
  CHECK(percentile(values, 1) == 40);
  CHECK(percentile(values, 0.5) == 25);
  CHECK(percentile(values, 0.25) == doctest::Approx(17.5));
  CHECK(percentile(values, 0.75) == doctest::Approx(32.5));
}

TEST_CASE("the side that goes first alternates within a round and from round to round") {
  std::string order;
  for (unsigned round = 0; round < 2; ++round)
    for (unsigned slice = 0; slice < 4; ++slice)
      order += slice_side(Side::baseline, round, slice) == Side::baseline ? 'b' : 's';
  CHECK(order == "bsbssbsb");
  CHECK(slice_side(Side::subject, 0, 0) == Side::subject);
  CHECK(slice_side(Side::subject, 0, 1) == Side::baseline);
  CHECK(slice_side(Side::subject, 1, 0) == Side::baseline);
}

TEST_CASE("slices are sized from the warm-up, within the bounds") {
  const Sizing sizing{0.025, 4, 1000, 1e-6};
  CHECK(slice_operations(sizing, 100, 0.01) == 250);  // 100 operations in 10 ms: 250 in 25 ms
  CHECK(slice_operations(sizing, 100, 10.0) == 4);
  CHECK(slice_operations(sizing, 100, 0.0) == 1000);  // the floor keeps a zero warm-up finite
  CHECK(slice_operations(Sizing{0.025, 1, 100000000, 1e-6}, 100, 0.0) == 2500000);
}

TEST_CASE("a side's value is µs per operation or MB/s") {
  CHECK(unit_value(Unit::microseconds, 8, 1000, 0.002) == doctest::Approx(2.0));
  CHECK(unit_value(Unit::megabytes_per_second, 1u << 20, 100, 0.1) == doctest::Approx(1048.576));
  CHECK(std::string(unit_name(Unit::microseconds)) == "us");
  CHECK(std::string(unit_name(Unit::megabytes_per_second)) == "MB/s");
}

TEST_CASE("a workload warms up baseline first, then runs rounds of alternating slices") {
  std::vector<char> log;
  std::vector<std::size_t> operations;
  FakeSide baseline{'b', {1, 2, 1}, &log, &operations};
  FakeSide subject{'s', {2, 8, 5}, &log, &operations};
  Workload workload{.name = "fake", .size = 8, .unit = Unit::microseconds, .warmup_operations = 64};
  workload.baseline = baseline.run();
  workload.subject = subject.run();
  auto row = workload_run(workload, quiet_options(3));
  REQUIRE(row);

  std::string order(log.begin(), log.end());
  CHECK(order.substr(0, 2) == "bs");  // the warm-up
  CHECK(operations[0] == 64);
  CHECK(operations[1] == 64);
  CHECK(order.substr(2, 16) == "bsbsbsbsbsbsbsbs");   // round 0: the baseline first
  CHECK(order.substr(18, 16) == "sbsbsbsbsbsbsbsb");  // round 1: the subject first
  CHECK(order.substr(34) == "bsbsbsbsbsbsbsbs");
  for (std::size_t i = 2; i < operations.size(); ++i) CHECK(operations[i] == 10);

  // Per round: baseline 1, 2, 1 µs; subject 2, 8, 5 µs; ratios 2, 4, 5. The ratio is the
  // median of the per-round ratios (4), not the ratio of the medians (5 / 1).
  CHECK(row->workload == "fake");
  CHECK(row->size == 8);
  CHECK(row->baseline == doctest::Approx(1));
  CHECK(row->subject == doctest::Approx(5));
  CHECK(row->ratio == doctest::Approx(4));
  CHECK_FALSE(row->subject_whole);
}

TEST_CASE("the subject can go first, and a row can report the subject's whole loop") {
  std::vector<char> log;
  std::vector<std::size_t> operations;
  FakeSide baseline{'b', {1}, &log, &operations};
  FakeSide subject{'s', {3}, &log, &operations};
  Workload workload{.name = "acked", .size = 4096, .unit = Unit::microseconds, .warmup_operations = 16};
  workload.baseline = baseline.run();
  workload.subject = subject.run();
  workload.whole_reported = true;
  DriverOptions options = quiet_options(1);
  options.first = Side::subject;
  auto row = workload_run(workload, options);
  REQUIRE(row);
  CHECK(std::string(log.begin(), log.end()) ==
        "bs"
        "sbsbsbsbsbsbsbsb");
  REQUIRE(row->subject_whole);
  CHECK(*row->subject_whole == doctest::Approx(6));  // the fake's whole loop is twice its measured time
}

TEST_CASE("throughput rows divide bytes by time") {
  std::vector<char> log;
  std::vector<std::size_t> operations;
  FakeSide baseline{'b', {1}, &log, &operations};  // 1 µs per MiB
  FakeSide subject{'s', {2}, &log, &operations};
  Workload workload{.name = "rma_write", .size = 1u << 20, .unit = Unit::megabytes_per_second};
  workload.warmup_operations = 16;
  workload.baseline = baseline.run();
  workload.subject = subject.run();
  auto row = workload_run(workload, quiet_options(1));
  REQUIRE(row);
  CHECK(row->baseline == doctest::Approx(1048576.0));
  CHECK(row->subject == doctest::Approx(524288.0));
  CHECK(row->ratio == doctest::Approx(0.5));
}

TEST_CASE("a failing side ends the run with an error that names the workload") {
  Workload workload{.name = "bar_read", .size = 1, .warmup_operations = 1};
  unsigned calls = 0;
  workload.baseline = [&calls](std::size_t) -> Result<SliceSeconds> {
    if (++calls == 3) return fail(EIO, "pread resource0");
    return SliceSeconds{1e-3, 1e-3};
  };
  workload.subject = workload.baseline;
  auto row = workload_run(workload, quiet_options(1));
  REQUIRE_FALSE(row);
  CHECK(row.error().code == EIO);
  CHECK(row.error().message == "bar_read: pread resource0");

  calls = 1;  // the warm-up's baseline is call 2, the subject's call 3
  auto warmup = workload_run(workload, quiet_options(1));
  REQUIRE_FALSE(warmup);
  CHECK(warmup.error().message == "bar_read warm-up (rpcie): pread resource0");
}

TEST_CASE("a stop request ends the run before the next round") {
  Workload workload{.name = "mmio_read", .size = 4, .warmup_operations = 1};
  unsigned calls = 0;
  workload.baseline = [&calls](std::size_t) -> Result<SliceSeconds> {
    ++calls;
    return SliceSeconds{1e-3, 1e-3};
  };
  workload.subject = workload.baseline;
  std::atomic<bool> stop{true};
  DriverOptions options = quiet_options(3);
  options.stop = &stop;
  auto row = workload_run(workload, options);
  REQUIRE_FALSE(row);
  CHECK(row.error().code == EINTR);
  CHECK(calls == 2);  // the warm-up only
}

TEST_CASE("--only runs the rows it names, in the table's order, and refuses a name no row has") {
  std::vector<std::string> ran;
  auto workload = [&ran](std::string name, std::size_t size) {
    Workload w{.name = name, .size = size, .warmup_operations = 1};
    w.baseline = [&ran, name](std::size_t) -> Result<SliceSeconds> {
      ran.push_back(name);
      return SliceSeconds{1e-3, 1e-3};
    };
    w.subject = w.baseline;
    return w;
  };
  // The transport's rows repeat their names per size.
  const std::vector<Workload> workloads{workload("rma_write", 8), workload("irq_loaded", 4),
                                        workload("rma_write", 4096), workload("irq", 4)};
  DriverOptions options = quiet_options(1);
  options.progress_fd = -1;
  options.only = {"irq", "rma_write"};
  auto rows = workloads_run(workloads, options);
  REQUIRE(rows);
  REQUIRE(rows->size() == 3);
  CHECK((*rows)[0].workload == "rma_write");
  CHECK((*rows)[0].size == 8);
  CHECK((*rows)[1].size == 4096);
  CHECK((*rows)[2].workload == "irq");
  CHECK(std::set<std::string>(ran.begin(), ran.end()) == std::set<std::string>{"irq", "rma_write"});

  ran.clear();
  options.only = {"irq", "irq_load"};
  auto refused = workloads_run(workloads, options);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == EINVAL);
  CHECK(refused.error().message == "--only: no row named 'irq_load' here (rows: rma_write, irq_loaded, irq)");
  CHECK(ran.empty());  // refused before anything ran
}

TEST_CASE("the JSON document has the fields of the transport, device and front-end rows") {
  Row plain{"rma_write", 1048576, Unit::megabytes_per_second, 1000, 900, 0.9, std::nullopt, "", ""};
  Row acked{"edu_dma", 4096, Unit::microseconds, 20, 30, 1.5, 35.0, "", ""};
  Row labelled{"bar_read", 1048576, Unit::megabytes_per_second, 5000, 4000, 0.8, std::nullopt, "api", "file"};

  const std::vector<Row> device_rows{plain, acked};
  const nlohmann::json document = results_document("tcp", 3, device_rows, Columns{});
  CHECK(keys_of(document) == std::set<std::string>{"provider", "rounds", "results", "tcp_congestion_control"});
  CHECK(document["tcp_congestion_control"] == tcp_congestion_control());  // as this host's, read the same way
  CHECK(keys_of(results_document("shm", 3, device_rows, Columns{})) ==
        std::set<std::string>{"provider", "rounds", "results"});  // tcp's setting means nothing to shm's rows
  CHECK(document["provider"] == "tcp");
  CHECK(document["rounds"] == 3);
  REQUIRE(document["results"].size() == 2);
  const nlohmann::json& first = document["results"][0];
  const std::set<std::string> spread_keys{"raw_min",   "raw_max",       "raw_p50",   "raw_p99",   "raw_p999",
                                          "rpcie_min", "rpcie_max",     "rpcie_p50", "rpcie_p99", "rpcie_p999",
                                          "workload",  "size",          "raw",       "rpcie",     "unit",
                                          "ratio",     "percentiles_of"};
  CHECK(keys_of(first) == spread_keys);
  CHECK(first["workload"] == "rma_write");
  CHECK(first["size"] == 1048576);
  CHECK(first["raw"] == 1000.0);
  CHECK(first["rpcie"] == 900.0);
  CHECK(first["unit"] == "MB/s");
  CHECK(first["ratio"] == 0.9);
  std::set<std::string> acked_keys = spread_keys;
  acked_keys.insert("rpcie_with_ack");
  CHECK(keys_of(document["results"][1]) == acked_keys);
  CHECK(first["percentiles_of"] == "slice");
  CHECK(document["results"][1]["rpcie_with_ack"] == 35.0);

  const std::vector<Row> frontend_rows{labelled};
  const nlohmann::json frontend = results_document("tcp", 5, frontend_rows, Columns{"baseline", "frontend", 10, true});
  CHECK(keys_of(frontend["results"][0]) ==
        std::set<std::string>{"workload", "size", "baseline", "baseline_is", "frontend", "frontend_is", "unit", "ratio",
                              "baseline_min", "baseline_max", "baseline_p50", "baseline_p99", "baseline_p999",
                              "frontend_min", "frontend_max", "frontend_p50", "frontend_p99", "frontend_p999",
                              "percentiles_of"});
  CHECK(frontend["results"][0]["baseline_is"] == "api");
  CHECK(frontend["results"][0]["frontend_is"] == "file");
}

TEST_CASE("the text table keeps its columns") {
  CHECK(table_header(Columns{}) == "workload       size          raw        rpcie unit   ratio\n");
  CHECK(table_header(Columns{"raw", "rpcie", 12, false}) ==
        "workload         size          raw        rpcie unit   ratio\n");
  CHECK(table_header(Columns{"baseline", "frontend", 10, true}) ==
        "workload       size     baseline     frontend unit   ratio (baseline vs frontend)\n");
  Row plain{"round_trip", 8, Unit::microseconds, 20.5, 25.25, 1.2317, std::nullopt, "", ""};
  plain.baseline_spread = {19.5, 21.25};
  plain.subject_spread = {24, 26};
  plain.baseline_percentiles = {20, 30, 40};
  plain.subject_percentiles = {25, 35, 45.5};
  plain.samples = Samples::operation;
  CHECK(table_row(Columns{}, plain) ==
        "round_trip        8        20.50        25.25 us     1.232\n"
        "  min-max raw 19.50-21.25 rpcie 24.00-26.00 us | p50/p99/p99.9 us per operation: raw 20.00/30.00/40.00 "
        "rpcie 25.00/35.00/45.50\n");
  Row acked{"edu_dma", 4096, Unit::microseconds, 20, 30, 1.5, 35.25, "", ""};
  CHECK(table_row(Columns{"raw", "rpcie", 12, false}, acked)
            .starts_with("edu_dma          4096        20.00        30.00 us     1.500   (35.25 us with the "
                         "acknowledge)\n  min-max raw "));
  CHECK(table_row(Columns{}, acked).find("us per operation (slice means): raw") != std::string::npos);
  Row labelled{"reg_read", 4, Unit::microseconds, 10, 12, 1.2, std::nullopt, "api", "file"};
  CHECK(table_row(Columns{"baseline", "frontend", 10, true}, labelled)
            .starts_with(
                "reg_read          4        10.00        12.00 us     1.200 (api vs file)\n  min-max baseline "));
}

TEST_CASE("a row reports each side's spread over the rounds and percentiles of its slices") {
  std::vector<char> log;
  std::vector<std::size_t> operations;
  FakeSide baseline{'b', {1, 2, 3}, &log, &operations};
  FakeSide subject{'s', {2, 8, 5}, &log, &operations};
  Workload workload{.name = "fake", .size = 8, .unit = Unit::microseconds, .warmup_operations = 64};
  workload.baseline = baseline.run();
  workload.subject = subject.run();
  auto row = workload_run(workload, quiet_options(3));
  REQUIRE(row);
  CHECK(row->baseline_spread.min == doctest::Approx(1));
  CHECK(row->baseline_spread.max == doctest::Approx(3));
  CHECK(row->subject_spread.min == doctest::Approx(2));
  CHECK(row->subject_spread.max == doctest::Approx(8));
  // The fake times no operation alone: percentiles of the 24 slices (8 per round) of each side.
  CHECK(row->samples == Samples::slice);
  CHECK(row->baseline_percentiles.p50 == doctest::Approx(2));
  CHECK(row->subject_percentiles.p50 == doctest::Approx(5));
  CHECK(row->subject_percentiles.p99 == doctest::Approx(8));
  CHECK(row->subject_percentiles.p50 <= row->subject_percentiles.p99);
  CHECK(row->subject_percentiles.p99 <= row->subject_percentiles.p999);
}

TEST_CASE("percentiles are of each operation when both sides time each one alone") {
  // Each slice of 10 operations: nine of 1 µs and one of 101 µs (baseline), or 2 and 202 (subject).
  auto side = [](double fast_us) {
    return [fast_us](std::size_t n) -> Result<SliceSeconds> {
      SliceSeconds took;
      for (std::size_t i = 0; i < n; ++i) took.operations.push_back((i + 1 == n ? 101 * fast_us : fast_us) * 1e-6);
      for (const double seconds : took.operations) took.measured += seconds;
      took.whole = took.measured;
      return took;
    };
  };
  Workload workload{.name = "mmio_read", .size = 4, .unit = Unit::microseconds, .warmup_operations = 10};
  workload.baseline = side(1);
  workload.subject = side(2);
  auto row = workload_run(workload, quiet_options(2));
  REQUIRE(row);
  CHECK(row->samples == Samples::operation);
  CHECK(row->baseline == doctest::Approx(11));  // (9 + 101) / 10 µs per operation
  CHECK(row->baseline_percentiles.p50 == doctest::Approx(1));
  CHECK(row->subject_percentiles.p50 == doctest::Approx(2));
  CHECK(row->subject_percentiles.p999 == doctest::Approx(202));
  CHECK(row->ratio == doctest::Approx(2));

  workload.subject = slice_run_timed([](std::size_t n) -> Result<double> { return static_cast<double>(n) * 1e-6; });
  auto mixed = workload_run(workload, quiet_options(1));
  REQUIRE(mixed);
  CHECK(mixed->samples == Samples::slice);  // one side timed only whole slices: both by slice
  CHECK(mixed->baseline_percentiles.p50 == doctest::Approx(11));
}

TEST_CASE("slice_run_each times every operation, and the slice is their sum") {
  unsigned calls = 0;
  SliceRun run = slice_run_each([&calls]() -> Result<void> {
    ++calls;
    return {};
  });
  auto took = run(5);
  REQUIRE(took);
  CHECK(calls == 5);
  REQUIRE(took->operations.size() == 5);
  double sum = 0;
  for (const double seconds : took->operations) sum += seconds;
  CHECK(sum == doctest::Approx(took->measured));
}

TEST_CASE("the progress line counts rounds and estimates the time left from the mean round") {
  CHECK(Progress::line(3, 12, "rma_write 4096", 6.0) == "rpcie-bench: rounds 3/12, rma_write 4096, 0:18 left");
  CHECK(Progress::line(1, 100, "edu_dma 4096", 2.0) == "rpcie-bench: rounds 1/100, edu_dma 4096, 3:18 left");
  CHECK(Progress::line(5, 5, "round_trip 8", 9.0) == "rpcie-bench: rounds 5/5, round_trip 8, 0:00 left");
}

TEST_CASE("sysctl_read gives /proc/sys's first line without its newline, and \"\" for a name that is not there") {
  CHECK(sysctl_read("kernel/ostype") == "Linux");
  CHECK(sysctl_read("no/such/setting").empty());
  CHECK(tcp_congestion_control() == sysctl_read("net/ipv4/tcp_congestion_control"));
  CHECK_FALSE(tcp_congestion_control().empty());  // this kernel has one in every namespace
}

TEST_CASE("buffer_written fills every byte: the rows never send the kernel's zero page") {
  auto buffer = buffer_written(3 * 4096 + 17);
  REQUIRE(buffer);
  REQUIRE(buffer->size() >= 3 * 4096 + 17);
  std::size_t other = 0;
  for (std::size_t i = 0; i < buffer->size(); ++i) other += buffer->data()[i] != kBufferFill;
  CHECK(other == 0);
  CHECK(kBufferFill != 0);
}
