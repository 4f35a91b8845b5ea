// membar: parameters, identity and config header, BAR probing, MMIO of every width against
// the memory the exporter sees through bar_memory, and reset to power-on. The doorbell unit
// (doorbell=on): membar_doorbell_test.cc.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "backends/membar/membar.hpp"

using namespace rpcie;
using namespace rpcie::dev;

namespace {

std::unique_ptr<Backend> membar_make(std::map<std::string, std::string> params = {}) {
  auto made = membar_create(params);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message));
  return std::move(*made);
}

std::uint32_t cfg(Backend& b, std::uint32_t offset, unsigned width) {
  auto v = b.config_read(offset, width);
  REQUIRE(v);
  return *v;
}

bool message_has(const Error& e, const char* text) { return e.message.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("membar: default size is 64M, one 64-bit prefetchable BAR0") {
  auto b = membar_make();
  CHECK(b->name() == "membar");
  auto regions = b->regions();
  REQUIRE(regions.size() == 1);
  CHECK(regions[0].bar == 0);
  CHECK(regions[0].size == (64u << 20));
  CHECK(regions[0].kind == RegionKind::memory);
  CHECK(regions[0].is_64bit);
  CHECK_FALSE(regions[0].readonly);
  CHECK(b->vector_count() == 0);
  CHECK_FALSE(b->uses_dma());
  CHECK(b->bar_memory(0).size() == (64u << 20));
  CHECK(b->bar_memory(1).empty());
}

TEST_CASE("membar: size accepts K, M and G suffixes") {
  CHECK(membar_make({{"size", "4K"}})->regions()[0].size == 4096);
  CHECK(membar_make({{"size", "1M"}})->regions()[0].size == (1u << 20));
  CHECK(membar_make({{"size", "2MiB"}})->regions()[0].size == (2u << 20));
  CHECK(membar_make({{"size", "8192"}})->regions()[0].size == 8192);
  CHECK(membar_make({{"size", "1G"}})->regions()[0].size == (std::uint64_t{1} << 30));
}

TEST_CASE("membar: 16G is the largest size (only mapped, never touched, so ENOMEM is the one other answer)") {
  auto made = membar_create({{"size", "16G"}});
  if (made)
    CHECK((*made)->regions()[0].size == (std::uint64_t{16} << 30));
  else
    CHECK(made.error().code == ENOMEM);
}

TEST_CASE("membar: bad sizes and unknown keys are EINVAL naming the value or key") {
  for (const char* bad : {"3M", "1000", "2K", "0", "32G", "abc", "", "64X", "-4K", "4 K"}) {
    CAPTURE(bad);
    auto made = membar_create({{"size", bad}});
    REQUIRE_FALSE(made);
    CHECK(made.error().code == EINVAL);
    CHECK(message_has(made.error(), ("'" + std::string(bad) + "'").c_str()));
  }
  auto unknown = membar_create({{"colour", "blue"}});
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == EINVAL);
  CHECK(message_has(unknown.error(), "'colour'"));
}

TEST_CASE("membar: backend_create selects membar by name") {
  auto spec = export_spec_parse("m0=membar,size=8K");
  REQUIRE(spec);
  auto b = backend_create(*spec);
  REQUIRE(b);
  CHECK((*b)->name() == "membar");
  CHECK((*b)->regions()[0].size == 8192);
}

TEST_CASE("membar: identity is synthetic and matches the config header") {
  auto b = membar_make({{"size", "4K"}});
  const Identity& id = b->identity();
  CHECK(id.vendor == kMembarVendor);
  CHECK(id.device == kMembarDevice);
  CHECK(id.class_code == 0x058000);
  CHECK(id.subsystem_vendor == kMembarVendor);
  CHECK(id.subsystem_device == kMembarDevice);
  CHECK(id.revision == 0x01);

  CHECK(cfg(*b, 0x00, 4) == (std::uint32_t{kMembarDevice} << 16 | kMembarVendor));
  CHECK(cfg(*b, 0x00, 2) == kMembarVendor);
  CHECK(cfg(*b, 0x02, 2) == kMembarDevice);
  CHECK(cfg(*b, 0x08, 4) == (0x058000u << 8 | 0x01));
  CHECK(cfg(*b, 0x0b, 1) == 0x05);  // base class
  CHECK(cfg(*b, 0x0e, 1) == 0x00);  // header type 0, single function
  CHECK(cfg(*b, 0x2c, 4) == (std::uint32_t{kMembarDevice} << 16 | kMembarVendor));
  CHECK(cfg(*b, 0x34, 1) == 0);  // no capabilities
  CHECK(cfg(*b, 0x3d, 1) == 0);  // no interrupt pin
  for (std::uint32_t bar = 0x18; bar <= 0x24; bar += 4) CHECK(cfg(*b, bar, 4) == 0);
  CHECK(cfg(*b, 0x100, 4) == 0);  // no extended capabilities
  CHECK(cfg(*b, pci::kConfigSpaceSize - 4, 4) == 0);
}

TEST_CASE("membar: BAR0/BAR1 probing reads back the size mask, then takes an address") {
  SUBCASE("64M") {
    auto b = membar_make();
    CHECK(cfg(*b, 0x10, 4) == 0xc);  // 64-bit prefetchable memory, unassigned
    REQUIRE(b->config_write(0x10, 4, 0xffffffff));
    REQUIRE(b->config_write(0x14, 4, 0xffffffff));
    CHECK(cfg(*b, 0x10, 4) == (0xfc000000u | 0xc));
    CHECK(cfg(*b, 0x14, 4) == 0xffffffff);
    REQUIRE(b->config_write(0x10, 4, 0xe0000000));
    REQUIRE(b->config_write(0x14, 4, 0x00000001));
    CHECK(cfg(*b, 0x10, 4) == 0xe000000c);
    CHECK(cfg(*b, 0x14, 4) == 1);
    // Flag bits stay whatever is written.
    REQUIRE(b->config_write(0x10, 1, 0x00));
    CHECK(cfg(*b, 0x10, 1) == 0xc);
  }
  SUBCASE("8G: the size reaches into BAR1") {
    auto made = membar_create({{"size", "8G"}});
    if (!made) {
      CHECK(made.error().code == ENOMEM);
      return;
    }
    auto& b = *made;
    REQUIRE(b->config_write(0x10, 4, 0xffffffff));
    REQUIRE(b->config_write(0x14, 4, 0xffffffff));
    CHECK(cfg(*b, 0x10, 4) == 0xc);
    CHECK(cfg(*b, 0x14, 4) == 0xfffffffe);
  }
  SUBCASE("BARs 2-5, ROM and read-only registers ignore writes") {
    auto b = membar_make({{"size", "4K"}});
    for (std::uint32_t off : {0x00u, 0x08u, 0x18u, 0x1cu, 0x20u, 0x24u, 0x2cu, 0x30u, 0x34u, 0x100u}) {
      CAPTURE(off);
      const std::uint32_t before = cfg(*b, off, 4);
      REQUIRE(b->config_write(off, 4, 0xffffffff));
      CHECK(cfg(*b, off, 4) == before);
    }
  }
}

TEST_CASE("membar: command, cache line, latency and interrupt line are writable") {
  auto b = membar_make({{"size", "4K"}});
  REQUIRE(b->config_write(0x04, 2, 0xffff));
  CHECK(cfg(*b, 0x04, 2) == 0x0546);
  CHECK(cfg(*b, 0x06, 2) == 0);  // status untouched
  REQUIRE(b->config_write(0x04, 2, 0x0002));
  CHECK(cfg(*b, 0x04, 2) == 0x0002);
  REQUIRE(b->config_write(0x0c, 1, 0x10));
  REQUIRE(b->config_write(0x0d, 1, 0x40));
  REQUIRE(b->config_write(0x3c, 1, 0x0b));
  CHECK(cfg(*b, 0x0c, 2) == 0x4010);
  CHECK(cfg(*b, 0x3c, 1) == 0x0b);
}

TEST_CASE("membar: config accesses outside the contract are EINVAL") {
  auto b = membar_make({{"size", "4K"}});
  CHECK(b->config_read(0, 8).error().code == EINVAL);
  CHECK(b->config_read(0, 3).error().code == EINVAL);
  CHECK(b->config_read(2, 4).error().code == EINVAL);
  CHECK(b->config_read(1, 2).error().code == EINVAL);
  CHECK(b->config_read(pci::kConfigSpaceSize, 1).error().code == EINVAL);
  CHECK(b->config_write(0x3c, 8, 0).error().code == EINVAL);
  CHECK(b->config_write(0x3d, 2, 0).error().code == EINVAL);
  CHECK(b->config_write(pci::kConfigSpaceSize, 4, 0).error().code == EINVAL);
}

TEST_CASE("membar: mmio at every width reads back what was written, little-endian") {
  auto b = membar_make({{"size", "4K"}});
  auto mem = b->bar_memory(0);
  REQUIRE(b->mmio_write(0, 0x00, 8, 0x0807060504030201));
  CHECK(*b->mmio_read(0, 0x00, 8) == 0x0807060504030201);
  CHECK(*b->mmio_read(0, 0x00, 4) == 0x04030201);
  CHECK(*b->mmio_read(0, 0x04, 4) == 0x08070605);
  CHECK(*b->mmio_read(0, 0x02, 2) == 0x0403);
  CHECK(*b->mmio_read(0, 0x07, 1) == 0x08);
  REQUIRE(b->mmio_write(0, 0x10, 4, 0xdeadbeef));
  REQUIRE(b->mmio_write(0, 0x14, 2, 0xcafe));
  REQUIRE(b->mmio_write(0, 0x17, 1, 0x5a));
  CHECK(*b->mmio_read(0, 0x10, 8) == 0x5a00cafedeadbeef);
  // The last byte and the last quadword of the BAR.
  REQUIRE(b->mmio_write(0, 4095, 1, 0x77));
  CHECK(*b->mmio_read(0, 4088, 8) == 0x7700000000000000);
  CHECK(mem[4095] == 0x77);
}

TEST_CASE("membar: a write stores the low `width` bytes of the value only") {
  auto b = membar_make({{"size", "4K"}});
  REQUIRE(b->mmio_write(0, 0x20, 1, 0x1ff));
  REQUIRE(b->mmio_write(0, 0x22, 2, 0x12345678));
  CHECK(*b->mmio_read(0, 0x20, 4) == 0x567800ff);
}

TEST_CASE("membar: bar_memory aliases mmio both ways") {
  auto b = membar_make({{"size", "8K"}});
  auto mem = b->bar_memory(0);
  REQUIRE(mem.size() == 8192);
  CHECK(std::all_of(mem.begin(), mem.end(), [](std::uint8_t x) { return x == 0; }));
  REQUIRE(b->mmio_write(0, 0x1000, 4, 0xa1b2c3d4));
  CHECK(mem[0x1000] == 0xd4);
  CHECK(mem[0x1003] == 0xa1);
  const std::uint8_t pattern[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  std::memcpy(mem.data() + 0x1ff8, pattern, sizeof pattern);
  CHECK(*b->mmio_read(0, 0x1ff8, 8) == 0x0807060504030201);
  CHECK(b->bar_memory(0).data() == mem.data());  // stable for the backend's lifetime
}

TEST_CASE("membar: out of bounds, bad width, misaligned and other BARs are EINVAL") {
  auto b = membar_make({{"size", "4K"}});
  CHECK(b->mmio_read(0, 4096, 1).error().code == EINVAL);
  CHECK(b->mmio_read(0, 4092, 8).error().code == EINVAL);
  CHECK(b->mmio_read(0, 0, 3).error().code == EINVAL);
  CHECK(b->mmio_read(0, 0, 16).error().code == EINVAL);
  CHECK(b->mmio_read(0, 0, 0).error().code == EINVAL);
  CHECK(b->mmio_read(0, 2, 4).error().code == EINVAL);
  CHECK(b->mmio_read(0, 4, 8).error().code == EINVAL);
  CHECK(b->mmio_read(1, 0, 4).error().code == EINVAL);
  CHECK(b->mmio_read(5, 0, 4).error().code == EINVAL);
  CHECK(b->mmio_write(0, 4096, 4, 0).error().code == EINVAL);
  CHECK(b->mmio_write(0, 1, 2, 0).error().code == EINVAL);
  CHECK(b->mmio_write(0, 0, 5, 0).error().code == EINVAL);
  CHECK(b->mmio_write(2, 0, 4, 0).error().code == EINVAL);
  CHECK(b->mmio_write(0, UINT64_MAX - 3, 4, 0).error().code == EINVAL);
  // Nothing was written by the refused accesses.
  auto mem = b->bar_memory(0);
  CHECK(std::all_of(mem.begin(), mem.end(), [](std::uint8_t x) { return x == 0; }));
}

TEST_CASE("membar: no write is a doorbell") {
  auto b = membar_make({{"size", "4K"}});
  CHECK_FALSE(b->mmio_write_is_doorbell(0, 0));
  CHECK_FALSE(b->mmio_write_is_doorbell(0, 4088));
}

TEST_CASE("membar: reset zeroes the memory and returns config to power-on") {
  auto b = membar_make({{"size", "64K"}});
  auto mem = b->bar_memory(0);
  std::memset(mem.data() + 0x3000, 0xab, 100);
  REQUIRE(b->mmio_write(0, 0xfff8, 8, ~std::uint64_t{0}));
  REQUIRE(b->config_write(0x04, 2, 0x0006));
  REQUIRE(b->config_write(0x10, 4, 0xffffffff));
  REQUIRE(b->config_write(0x3c, 1, 0x0a));
  REQUIRE(b->reset());
  CHECK(std::all_of(mem.begin(), mem.end(), [](std::uint8_t x) { return x == 0; }));
  CHECK(cfg(*b, 0x04, 2) == 0);
  CHECK(cfg(*b, 0x10, 4) == 0xc);
  CHECK(cfg(*b, 0x3c, 1) == 0);
  CHECK(cfg(*b, 0x00, 4) == (std::uint32_t{kMembarDevice} << 16 | kMembarVendor));
  CHECK(b->bar_memory(0).data() == mem.data());  // the same memory, still registered
}

TEST_CASE("membar: detach leaves nothing for the next client") {
  auto b = membar_make({{"size", "4K"}});
  REQUIRE(b->attach(nullptr, nullptr));
  REQUIRE(b->mmio_write(0, 8, 8, 0x1122334455667788));
  REQUIRE(b->config_write(0x04, 2, 0x0002));
  b->detach();
  CHECK(*b->mmio_read(0, 8, 8) == 0);
  CHECK(cfg(*b, 0x04, 2) == 0);
}
