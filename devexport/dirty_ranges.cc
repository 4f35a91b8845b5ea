// See dirty_ranges.hpp for the contract.
#include "dirty_ranges.hpp"

#include <algorithm>
#include <limits>

namespace rpcie::dev {

namespace {

// at + length, cut at UINT64_MAX instead of wrapping.
std::uint64_t range_end(std::uint64_t at, std::uint64_t length) {
  return length > std::numeric_limits<std::uint64_t>::max() - at ? std::numeric_limits<std::uint64_t>::max()
                                                                 : at + length;
}

}  // namespace

void DirtyRanges::add(std::uint64_t at, std::uint64_t length) {
  Range added{at, range_end(at, length)};
  if (added.begin == added.end) return;
  // The first range that ends at or after the new one begins: it and those after it that
  // begin at or before the new one's end overlap or abut it, and merge with it.
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), added.begin,
                                [](const Range& r, std::uint64_t begin) { return r.end < begin; });
  auto last = first;
  for (; last != ranges_.end() && last->begin <= added.end; ++last) {
    added.begin = std::min(added.begin, last->begin);
    added.end = std::max(added.end, last->end);
  }
  ranges_.insert(ranges_.erase(first, last), added);
  if (ranges_.size() > max_ranges_) ranges_ = {Range{ranges_.front().begin, ranges_.back().end}};
}

void DirtyRanges::remove(std::uint64_t at, std::uint64_t length) {
  const Range removed{at, range_end(at, length)};
  if (removed.begin == removed.end) return;
  std::vector<Range> out;
  out.reserve(ranges_.size() + 1);
  for (const Range& r : ranges_) {
    if (r.begin < removed.begin) out.push_back({r.begin, std::min(r.end, removed.begin)});
    if (r.end > removed.end) out.push_back({std::max(r.begin, removed.end), r.end});
  }
  ranges_ = std::move(out);
}

}  // namespace rpcie::dev
