// DirtyRanges: the mirror's set of device-written window bytes not yet pushed to the client.
#include "dirty_ranges.hpp"

#include <cstdint>
#include <limits>
#include <vector>

#include <doctest/doctest.h>

using rpcie::dev::DirtyRanges;
using Range = DirtyRanges::Range;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::vector<Range> ranges_of(const DirtyRanges& d) { return {d.begin(), d.end()}; }

}  // namespace

TEST_CASE("a new set is empty") {
  DirtyRanges d;
  CHECK(d.empty());
  CHECK(d.size() == 0);
  CHECK(d.max_ranges() == DirtyRanges::kMaxRangesDefault);
}

TEST_CASE("disjoint ranges stay apart and come out sorted") {
  DirtyRanges d;
  d.add(100, 10);
  d.add(0, 10);
  d.add(50, 5);
  CHECK(ranges_of(d) == std::vector<Range>{{0, 10}, {50, 55}, {100, 110}});
}

TEST_CASE("overlapping ranges merge into one") {
  DirtyRanges d;
  d.add(0, 10);
  d.add(5, 10);
  CHECK(ranges_of(d) == std::vector<Range>{{0, 15}});
  d.add(2, 3);  // inside: no change
  CHECK(ranges_of(d) == std::vector<Range>{{0, 15}});
  d.add(0, 100);  // covers: replaces
  CHECK(ranges_of(d) == std::vector<Range>{{0, 100}});
}

TEST_CASE("adjacent ranges merge on either side") {
  DirtyRanges d;
  d.add(10, 10);
  d.add(20, 5);  // abuts the end
  CHECK(ranges_of(d) == std::vector<Range>{{10, 25}});
  d.add(0, 10);  // abuts the begin
  CHECK(ranges_of(d) == std::vector<Range>{{0, 25}});
}

TEST_CASE("one range bridging several merges them all and leaves the others") {
  DirtyRanges d;
  d.add(0, 5);
  d.add(10, 5);
  d.add(20, 5);
  d.add(30, 5);
  d.add(100, 5);
  d.add(12, 20);  // [12, 32): touches [10,15), [20,25), [30,35)
  CHECK(ranges_of(d) == std::vector<Range>{{0, 5}, {10, 35}, {100, 105}});
}

TEST_CASE("beyond max_ranges the ranges collapse into one covering range") {
  DirtyRanges d(4);
  for (std::uint64_t i = 0; i < 4; ++i) d.add(i * 100, 10);
  CHECK(d.size() == 4);
  d.add(1000, 1);
  CHECK(ranges_of(d) == std::vector<Range>{{0, 1001}});
}

TEST_CASE("removing a sub-range splits the range around it") {
  DirtyRanges d;
  d.add(0, 100);
  d.remove(40, 20);
  CHECK(ranges_of(d) == std::vector<Range>{{0, 40}, {60, 100}});
}

TEST_CASE("removing at the edges trims, removing a cover empties, removing elsewhere changes nothing") {
  DirtyRanges d;
  d.add(0, 100);
  d.remove(0, 10);
  d.remove(90, 50);
  CHECK(ranges_of(d) == std::vector<Range>{{10, 90}});
  d.remove(200, 10);
  CHECK(ranges_of(d) == std::vector<Range>{{10, 90}});
  d.remove(0, 1000);
  CHECK(d.empty());
}

TEST_CASE("one removal spanning several ranges trims the outer ones and drops the inner ones") {
  DirtyRanges d;
  d.add(0, 10);
  d.add(20, 10);
  d.add(40, 10);
  d.remove(5, 40);  // [5, 45)
  CHECK(ranges_of(d) == std::vector<Range>{{0, 5}, {45, 50}});
}

TEST_CASE("removal never collapses, even past max_ranges") {
  DirtyRanges d(2);
  d.add(0, 10);
  d.add(20, 10);
  d.remove(4, 2);
  CHECK(ranges_of(d) == std::vector<Range>{{0, 4}, {6, 10}, {20, 30}});
}

TEST_CASE("empty ranges are ignored by add and by remove") {
  DirtyRanges d;
  d.add(5, 0);
  CHECK(d.empty());
  d.add(0, 10);
  d.remove(5, 0);  // must not split [0, 10) into two touching halves
  CHECK(ranges_of(d) == std::vector<Range>{{0, 10}});
  d.add(10, 0);
  CHECK(ranges_of(d) == std::vector<Range>{{0, 10}});
}

TEST_CASE("clear empties the set") {
  DirtyRanges d;
  d.add(0, 10);
  d.add(20, 10);
  d.clear();
  CHECK(d.empty());
}

TEST_CASE("a range reaching past UINT64_MAX is cut there instead of wrapping") {
  DirtyRanges d;
  d.add(kMax - 10, 100);
  CHECK(ranges_of(d) == std::vector<Range>{{kMax - 10, kMax}});
  d.add(0, kMax);
  CHECK(ranges_of(d) == std::vector<Range>{{0, kMax}});
  d.remove(kMax - 1, kMax);
  CHECK(ranges_of(d) == std::vector<Range>{{0, kMax - 1}});
}

TEST_CASE("a range starting at UINT64_MAX is empty and ignored") {
  DirtyRanges d;
  d.add(kMax, 5);
  CHECK(d.empty());
  d.add(kMax - 4, 4);
  d.remove(kMax, 1);
  CHECK(ranges_of(d) == std::vector<Range>{{kMax - 4, kMax}});
}
