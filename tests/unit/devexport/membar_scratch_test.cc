// membar with scratch=on: BAR4 is a 4 KiB register BAR of plain registers (every naturally
// aligned access of width 1/2/4/8 reads back what was stored, little endian), zero at
// power-on, reset and detach; BAR probing of BAR4; independent of doorbell=on.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/membar/membar.hpp"
#include "rpcie/membar_registers.hpp"

using namespace rpcie;
using namespace rpcie::dev;

namespace {

namespace reg = rpcie::membar;

std::unique_ptr<Backend> membar_make(std::map<std::string, std::string> params) {
  auto made = membar_create(params);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message));
  return std::move(*made);
}

std::uint32_t cfg(Backend& b, std::uint32_t offset, unsigned width) {
  auto v = b.config_read(offset, width);
  REQUIRE(v);
  return *v;
}

std::uint64_t rd4(Backend& b, std::uint64_t offset, unsigned width) {
  auto v = b.mmio_read(reg::kScratchBar, offset, width);
  REQUIRE_MESSAGE(v, (v ? "" : v.error().message));
  return *v;
}

void wr4(Backend& b, std::uint64_t offset, unsigned width, std::uint64_t value) {
  auto r = b.mmio_write(reg::kScratchBar, offset, width, value);
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
}

std::uint64_t low_bytes(std::uint64_t value, unsigned width) {
  return width == 8 ? value : value & ((std::uint64_t{1} << (8 * width)) - 1);
}

}  // namespace

TEST_CASE("membar scratch: BAR4 is a 4 KiB 32-bit register BAR, alone or beside the doorbell's BAR2") {
  SUBCASE("scratch only") {
    auto b = membar_make({{"size", "4K"}, {"scratch", "on"}});
    auto regions = b->regions();
    REQUIRE(regions.size() == 2);
    CHECK(regions[0].bar == 0);
    CHECK(regions[1].bar == reg::kScratchBar);
    CHECK(regions[1].size == reg::kScratchBarSize);
    CHECK(regions[1].kind == RegionKind::registers);
    CHECK_FALSE(regions[1].is_64bit);
    CHECK(b->vector_count() == 0);                                 // the doorbell's vector only comes with doorbell=on
    CHECK(b->bar_memory(reg::kScratchBar).empty());                // never RMA
    CHECK_FALSE(b->mmio_read(reg::kRegisterBar, reg::kRegId, 4));  // no BAR2 without doorbell=on
  }
  SUBCASE("scratch and doorbell") {
    auto b = membar_make({{"size", "4K"}, {"scratch", "yes"}, {"doorbell", "on"}});
    auto regions = b->regions();
    REQUIRE(regions.size() == 3);
    CHECK(regions[1].bar == reg::kRegisterBar);
    CHECK(regions[2].bar == reg::kScratchBar);
    CHECK(b->vector_count() == 1);
    CHECK(*b->mmio_read(reg::kRegisterBar, reg::kRegId, 4) == reg::kIdValue);
    wr4(*b, 0, 4, 0xdeadbeef);
    CHECK(rd4(*b, 0, 4) == 0xdeadbeef);
    CHECK(*b->mmio_read(reg::kRegisterBar, reg::kRegId, 4) == reg::kIdValue);
  }
  SUBCASE("scratch=off is no BAR4") {
    auto b = membar_make({{"size", "4K"}, {"scratch", "off"}});
    CHECK(b->regions().size() == 1);
    auto r = b->mmio_read(reg::kScratchBar, 0, 4);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
  }
}

TEST_CASE("membar scratch: a bad switch value is EINVAL naming it") {
  auto made = membar_create({{"scratch", "maybe"}});
  REQUIRE_FALSE(made);
  CHECK(made.error().code == EINVAL);
  CHECK(made.error().message.find("'maybe'") != std::string::npos);
}

TEST_CASE("membar scratch: BAR4 probing reads back the 4 KiB size mask, then takes an address") {
  auto b = membar_make({{"size", "4K"}, {"scratch", "on"}});
  const std::uint32_t bar4 = 0x10 + 4 * reg::kScratchBar;
  CHECK(cfg(*b, bar4, 4) == 0);  // 32-bit non-prefetchable memory, unassigned
  REQUIRE(b->config_write(bar4, 4, 0xffffffff));
  CHECK(cfg(*b, bar4, 4) == 0xfffff000);
  REQUIRE(b->config_write(bar4, 4, 0xfebc1234));
  CHECK(cfg(*b, bar4, 4) == 0xfebc1000);
  // BAR2, BAR3 and BAR5 stay unimplemented without doorbell=on.
  for (std::uint32_t off : {0x18u, 0x1cu, 0x24u}) {
    REQUIRE(b->config_write(off, 4, 0xffffffff));
    CHECK(cfg(*b, off, 4) == 0);
  }
}

TEST_CASE("membar scratch: every width at every aligned offset reads back what was stored, little endian") {
  auto b = membar_make({{"size", "4K"}, {"scratch", "on"}});
  std::vector<std::uint8_t> model(reg::kScratchBarSize, 0);
  std::mt19937_64 rng(11);
  for (unsigned width : {1u, 2u, 4u, 8u}) {
    for (std::uint64_t off = 0; off < reg::kScratchBarSize; off += width) {
      const std::uint64_t value = rng();
      wr4(*b, off, width, value);
      for (unsigned i = 0; i < width; ++i) model[off + i] = static_cast<std::uint8_t>(value >> (8 * i));
      CHECK(rd4(*b, off, width) == low_bytes(value, width));
    }
  }
  // Read the whole BAR back at each width against the byte model (little endian).
  for (unsigned width : {1u, 2u, 4u, 8u}) {
    for (std::uint64_t off = 0; off < reg::kScratchBarSize; off += width) {
      std::uint64_t want = 0;
      for (unsigned i = 0; i < width; ++i) want |= std::uint64_t{model[off + i]} << (8 * i);
      CAPTURE(off);
      CHECK(rd4(*b, off, width) == want);
    }
  }
  // A narrow store changes only its bytes.
  wr4(*b, 0x100, 8, 0x1122334455667788);
  wr4(*b, 0x102, 2, 0xabcd);
  wr4(*b, 0x107, 1, 0xee);
  CHECK(rd4(*b, 0x100, 8) == 0xee223344abcd7788);
  CHECK(rd4(*b, 0x104, 4) == 0xee223344);
}

TEST_CASE("membar scratch: unaligned, out of range and bad widths are EINVAL and change nothing") {
  auto b = membar_make({{"size", "4K"}, {"scratch", "on"}});
  wr4(*b, 0x10, 8, 0x0102030405060708);
  struct Bad {
    std::uint64_t offset;
    unsigned width;
  };
  for (Bad bad : {Bad{0x11, 2}, Bad{0x12, 4}, Bad{0x14, 8}, Bad{0x10, 3}, Bad{0x10, 16}, Bad{0x10, 0}, Bad{4096, 1},
                  Bad{4096 - 4, 8}, Bad{~std::uint64_t{0} - 7, 8}}) {
    CAPTURE(bad.offset);
    CAPTURE(bad.width);
    auto r = b->mmio_read(reg::kScratchBar, bad.offset, bad.width);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().message.find("BAR4") != std::string::npos);
    auto w = b->mmio_write(reg::kScratchBar, bad.offset, bad.width, ~std::uint64_t{0});
    REQUIRE_FALSE(w);
    CHECK(w.error().code == EINVAL);
  }
  CHECK(rd4(*b, 0x10, 8) == 0x0102030405060708);
  CHECK(rd4(*b, 4088, 8) == 0);
}

TEST_CASE("membar scratch: reset and detach zero every register") {
  auto b = membar_make({{"size", "4K"}, {"scratch", "on"}});
  REQUIRE(b->attach(nullptr, nullptr));
  wr4(*b, 0, 8, ~std::uint64_t{0});
  wr4(*b, 4088, 8, 0x55);
  REQUIRE(b->config_write(0x10 + 4 * reg::kScratchBar, 4, 0xffffffff));
  REQUIRE(b->reset());
  CHECK(rd4(*b, 0, 8) == 0);
  CHECK(rd4(*b, 4088, 8) == 0);
  CHECK(cfg(*b, 0x10 + 4 * reg::kScratchBar, 4) == 0);
  wr4(*b, 0x800, 4, 0x12345678);
  b->detach();
  CHECK(rd4(*b, 0x800, 4) == 0);
}
