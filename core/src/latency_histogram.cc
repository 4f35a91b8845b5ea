#include "rpcie/latency_histogram.hpp"

#include <cmath>
#include <limits>

namespace rpcie {

LatencyHistogram::Snapshot LatencyHistogram::snapshot() const noexcept {
  Snapshot s;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.count += s.counts[i];
  }
  s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
  return s;
}

std::uint64_t LatencyHistogram::Snapshot::quantile_ns(double q) const noexcept {
  if (count == 0) return 0;
  // The rank of the quantile's record, 1-based: the smallest that covers q of them.
  const double wanted = std::ceil(q * static_cast<double>(count));
  const std::uint64_t rank = wanted < 1 ? 1 : static_cast<std::uint64_t>(wanted);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts[i];
    if (seen >= rank) return kBoundsNs[i];
  }
  return std::numeric_limits<std::uint64_t>::max();
}

LatencyHistogram::Snapshot LatencyHistogram::Snapshot::since(const Snapshot& earlier) const noexcept {
  Snapshot d;
  // A histogram only grows; a smaller count means another histogram (a new attachment):
  // then everything in this one is new.
  const bool same = count >= earlier.count && sum_ns >= earlier.sum_ns;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::uint64_t before = same && counts[i] >= earlier.counts[i] ? earlier.counts[i] : 0;
    d.counts[i] = counts[i] - before;
    d.count += d.counts[i];
  }
  d.sum_ns = same ? sum_ns - earlier.sum_ns : sum_ns;
  return d;
}

}  // namespace rpcie
