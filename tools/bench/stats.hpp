// rpcie-bench's statistics: percentiles of samples and what a row reports about a side's
// distribution (its median, the spread of its round values, its percentiles).
#pragma once

#include <vector>

namespace rpcie::bench {

// The p-th fraction (0..1) of `values` with linear interpolation between the closest ranks
// (numpy's default); of a copy: the caller's order is kept. `values` must not be empty.
double percentile(std::vector<double> values, double fraction);
// percentile(values, 0.5): the middle value, or the mean of the two middle values.
double median(std::vector<double> values);

// The lowest and highest of a side's per-round values (µs per operation or MB/s).
struct Spread {
  double min = 0, max = 0;
};
Spread spread_of(const std::vector<double>& values);

// Percentiles of a side's latency samples, µs per operation.
struct Percentiles {
  double p50 = 0, p99 = 0, p999 = 0;
};
// Of `samples_us`; all zero when there are none.
Percentiles percentiles_of(const std::vector<double>& samples_us);

}  // namespace rpcie::bench
