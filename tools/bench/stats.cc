#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace rpcie::bench {

namespace {

// percentile() of values already sorted.
double percentile_sorted(const std::vector<double>& sorted, double fraction) {
  const double rank = fraction * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * weight;  // exact where they are equal
}

}  // namespace

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, fraction);
}

double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

Spread spread_of(const std::vector<double>& values) {
  if (values.empty()) return {};
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  return Spread{*low, *high};
}

Percentiles percentiles_of(const std::vector<double>& samples_us) {
  if (samples_us.empty()) return {};
  std::vector<double> sorted = samples_us;
  std::sort(sorted.begin(), sorted.end());  // once for the three
  return Percentiles{percentile_sorted(sorted, 0.5), percentile_sorted(sorted, 0.99), percentile_sorted(sorted, 0.999)};
}

}  // namespace rpcie::bench
