// A LatencyHistogram's snapshot as telemetry_reply carries it (proto::LatencyCounts), and
// back: the same buckets in the same order (the protocol's kLatencyBuckets are
// LatencyHistogram's bounds and one above them). Pure functions; no allocation beyond the
// bucket list.
#pragma once

#include <cstddef>

#include "rpcie/latency_histogram.hpp"
#include "rpcie/protocol.hpp"

namespace rpcie {

static_assert(proto::kLatencyBuckets == LatencyHistogram::kBuckets + 1,
              "telemetry_reply carries every bucket of a LatencyHistogram, +Inf included");

inline proto::LatencyCounts latency_counts_of(const LatencyHistogram::Snapshot& s) {
  proto::LatencyCounts out;
  out.sum_ns = s.sum_ns;
  out.buckets.reserve(s.counts.size());
  for (auto c : s.counts) out.buckets.push_back({c});
  return out;
}

// `c` as decoded holds exactly kLatencyBuckets buckets (the decoder refuses other counts); a
// shorter list leaves the missing buckets empty. `count` is the buckets' sum, as in a snapshot.
inline LatencyHistogram::Snapshot snapshot_of(const proto::LatencyCounts& c) {
  LatencyHistogram::Snapshot s;
  s.sum_ns = c.sum_ns;
  for (std::size_t i = 0; i < s.counts.size() && i < c.buckets.size(); ++i) {
    s.counts[i] = c.buckets[i].count;
    s.count += c.buckets[i].count;
  }
  return s;
}

}  // namespace rpcie
