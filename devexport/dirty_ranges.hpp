// The parts of a mirror-mode DMA window that the device wrote and the client has not seen
// yet: a set of byte ranges of the window, pushed to the client (RMA writes) at the next
// ordering point (ARCHITECTURE.md section 1, rules 3 and 4).
//
// Contract:
//  - Ranges are half-open [begin, end), sorted, disjoint and never touching: adding a range
//    that overlaps or abuts others merges them into one.
//  - A range ends at UINT64_MAX at most: a length reaching past it is cut there. An empty
//    range (length 0, or starting at UINT64_MAX) is ignored by add() and remove().
//  - add() keeps at most max_ranges() ranges: beyond, all of them collapse into one from the
//    first begin to the last end. The covering range may include clean bytes; pushing those
//    costs bandwidth, never correctness, and the set stays small for every push.
//  - remove() takes bytes out (the client supplied them itself), splitting a range it falls
//    inside; it never collapses, so it can leave one range more than max_ranges().
//  - Not thread-safe: the owner serialises access (ServedAttachment's DMA lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rpcie::dev {

class DirtyRanges {
 public:
  struct Range {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;  // exclusive
    bool operator==(const Range&) const = default;
  };
  static constexpr std::size_t kMaxRangesDefault = 64;

  explicit DirtyRanges(std::size_t max_ranges = kMaxRangesDefault) noexcept : max_ranges_(max_ranges) {}

  // Marks [at, at + length) dirty.
  void add(std::uint64_t at, std::uint64_t length);
  // Marks [at, at + length) clean.
  void remove(std::uint64_t at, std::uint64_t length);
  // Marks everything clean (after every range was pushed).
  void clear() noexcept { ranges_.clear(); }

  bool empty() const noexcept { return ranges_.empty(); }
  std::size_t size() const noexcept { return ranges_.size(); }
  std::size_t max_ranges() const noexcept { return max_ranges_; }
  // The ranges in ascending order. Invalidated by add(), remove() and clear().
  std::vector<Range>::const_iterator begin() const noexcept { return ranges_.begin(); }
  std::vector<Range>::const_iterator end() const noexcept { return ranges_.end(); }

 private:
  std::size_t max_ranges_;
  std::vector<Range> ranges_;
};

}  // namespace rpcie::dev
