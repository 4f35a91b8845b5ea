// rpcie/pci.hpp: the access rule (naturally aligned 1/2/4/8-byte accesses inside a space)
// the split of a range into the widest such accesses, and the typed call of one width.
#include "rpcie/pci.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <utility>
#include <vector>

using namespace rpcie;

TEST_CASE("access_valid: widths, alignment, bounds") {
  CHECK(pci::access_valid(0, 4, 16));
  CHECK(pci::access_valid(12, 4, 16));
  CHECK(pci::access_valid(8, 8, 16));
  CHECK(pci::access_valid(15, 1, 16));
  CHECK_FALSE(pci::access_valid(16, 1, 16));
  CHECK_FALSE(pci::access_valid(14, 4, 16));
  CHECK_FALSE(pci::access_valid(2, 4, 16));
  CHECK_FALSE(pci::access_valid(0, 3, 16));
  CHECK_FALSE(pci::access_valid(0, 16, 16));
  CHECK_FALSE(pci::access_valid(0, 0, 16));
  CHECK_FALSE(pci::access_valid(UINT64_MAX - 7, 8, UINT64_MAX));
  CHECK(pci::access_valid(UINT64_MAX - 15, 8, UINT64_MAX));
}

TEST_CASE("access_valid: config space takes at most 4 bytes, up to its last byte") {
  CHECK(pci::access_valid(pci::kConfigSpaceSize - 4, 4, pci::kConfigSpaceSize, pci::kConfigWidthMax));
  CHECK_FALSE(pci::access_valid(0, 8, pci::kConfigSpaceSize, pci::kConfigWidthMax));
  CHECK_FALSE(pci::access_valid(pci::kConfigSpaceSize, 1, pci::kConfigSpaceSize, pci::kConfigWidthMax));
  CHECK(pci::access_aligned(UINT64_MAX - 7, 8));  // alignment alone knows no size
  CHECK_FALSE(pci::access_aligned(6, 4));
}

namespace {
std::vector<std::pair<std::uint64_t, unsigned>> split(std::uint64_t offset, std::uint64_t length, unsigned width_max) {
  std::vector<std::pair<std::uint64_t, unsigned>> out;
  auto r = pci::access_split(offset, length, width_max, [&](std::uint64_t at, unsigned w) -> Result<void> {
    out.emplace_back(at, w);
    return {};
  });
  CHECK(r.has_value());
  return out;
}
using Pieces = std::vector<std::pair<std::uint64_t, unsigned>>;
}  // namespace

TEST_CASE("access_split: widest aligned pieces, in ascending order, covering the range exactly") {
  CHECK(split(0, 8, 8) == Pieces{{0, 8}});
  CHECK(split(1, 15, 8) == Pieces{{1, 1}, {2, 2}, {4, 4}, {8, 8}});
  CHECK(split(1, 15, 4) == Pieces{{1, 1}, {2, 2}, {4, 4}, {8, 4}, {12, 4}});
  CHECK(split(6, 3, 8) == Pieces{{6, 2}, {8, 1}});
  CHECK(split(3, 0, 8).empty());
}

TEST_CASE("access_split: the first error ends the walk and is returned") {
  int calls = 0;
  auto r = pci::access_split(0, 16, 4, [&](std::uint64_t at, unsigned) -> Result<void> {
    ++calls;
    if (at == 8) return fail(EIO, "device gone");
    return {};
  });
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EIO);
  CHECK(calls == 3);
}

TEST_CASE("width_visit: one typed call of exactly the access width") {
  const auto size_of = [](unsigned width) { return pci::width_visit(width, []<class T>(T) { return sizeof(T); }); };
  CHECK(size_of(1) == 1);
  CHECK(size_of(2) == 2);
  CHECK(size_of(4) == 4);
  CHECK(size_of(8) == 8);
  std::uint64_t stored = 0;
  pci::width_visit(2, [&]<class T>(T) { stored = static_cast<T>(0x12345678u); });
  CHECK(stored == 0x5678);  // truncated to the 2-byte type
}
