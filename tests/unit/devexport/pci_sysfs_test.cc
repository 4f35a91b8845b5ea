// pci-sysfs against a fake sysfs tree built in a temporary directory (unbound and bound to
// a driver), against a real driver-bound function of this machine (read-only: nothing is
// ever written to the real sysfs), and its parameter checks.
//
//   $TMPDIR/rpcie-pci-sysfs-XXXXXX/
//     devices/0000:3a:00.1/          the fake function (sysfs-root=.../devices)
//       vendor device class subsystem_vendor subsystem_device revision   "0x....\n"
//       config                       256 bytes, type-0 header built below (classic_spec)
//       resource                     BAR0 32-bit MMIO 4K, BAR2/3 64-bit prefetchable 16K,
//                                    BAR4 I/O 32 bytes, a ROM line that is no BAR
//       resource0 resource2          regular files of the BAR sizes (mmap works on them)
//       driver -> ../../drivers/fakedrv   only in the "bound" variant
// (pci_sysfs_fake.hpp builds it). The safety policy (bridges, bus mastering, the config
// write table, reset and restore at detach) is tested in pci_sysfs_policy_test.cc.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../support/skip.hpp"
#include "backends/pci-sysfs/pci_sysfs.hpp"
#include "pci_sysfs_fake.hpp"

using namespace rpcie;
using namespace rpcie::dev;
using namespace rpcie::test;
namespace fs = std::filesystem;

namespace {

constexpr const char* kFakeBdf = "0000:3a:00.1";
constexpr std::uint16_t kFakeVendor = 0xabcd;
constexpr std::uint16_t kFakeDevice = 0x1234;
constexpr std::uint32_t kFakeClass = 0x020000;
constexpr std::size_t kFakeConfigSize = 256;

// The function of the (a) and (b) tests: a network controller with three BARs and one
// vendor-specific capability (0x40-0x7f) whose registers, and the space after it up to 0x100,
// a client may write with config-write=yes.
FakeSpec classic_spec(bool bound) {
  FakeSpec spec;
  spec.bdf = kFakeBdf;
  spec.class_code = kFakeClass;
  spec.bound = bound;
  std::string& config = spec.config;
  config = std::string(kFakeConfigSize, '\0');
  for (std::size_t i = 0x40; i < kFakeConfigSize; ++i) config[i] = static_cast<char>(i ^ 0x5a);
  le_put(config, 0x00, 2, kFakeVendor);
  le_put(config, 0x02, 2, kFakeDevice);
  le_put(config, 0x04, 2, 0x0002);  // memory space
  le_put(config, 0x06, 2, 0x0010);  // capabilities list
  le_put(config, 0x08, 4, kFakeClass << 8 | 0x02);
  le_put(config, 0x0e, 1, 0x00);        // type 0
  le_put(config, 0x10, 4, 0xfe000000);  // BAR0 32-bit MMIO
  le_put(config, 0x18, 4, 0x0000000c);  // BAR2 64-bit prefetchable, low half
  le_put(config, 0x1c, 4, 0x00000008);  // BAR3 high half: 0x8_0000_0000
  le_put(config, 0x20, 4, 0x0000c001);  // BAR4 I/O
  le_put(config, 0x2c, 2, 0xabcd);
  le_put(config, 0x2e, 2, 0x0001);
  le_put(config, 0x34, 1, 0x40);
  le_put(config, 0x3c, 2, 0x010b);    // INTA, line 11
  le_put(config, 0x40, 3, 0x400009);  // vendor-specific, last in the list, 0x40 bytes
  spec.resource =
      "0x00000000fe000000 0x00000000fe000fff 0x0000000000040200\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000000800000000 0x0000000800003fff 0x000000000014220c\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x000000000000c000 0x000000000000c01f 0x0000000000040101\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x00000000fd000000 0x00000000fd00ffff 0x0000000000046200\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
  spec.bars = {{0, pattern(4096, 1)}, {2, pattern(16384, 2)}};
  return spec;
}

struct ClassicFunction : FakeFunction {
  explicit ClassicFunction(bool bound) : FakeFunction(classic_spec(bound)) {}
};

std::unique_ptr<Backend> create_ok(const std::map<std::string, std::string>& params) {
  auto made = pci_sysfs_create(params);
  REQUIRE_MESSAGE(made, (made ? std::string() : made.error().describe()));
  return std::move(*made);
}

bool message_has(const Error& e, const std::string& text) { return e.message.find(text) != std::string::npos; }

// Every write path, every BAR access and reset must be EPERM naming `driver`.
void check_everything_refused(Backend& b, const std::string& driver) {
  // (offset, width); plain pairs because clang 15 cannot capture structured bindings.
  for (const auto& access : {std::pair{0x00u, 2u},
                             {0x04u, 2u},
                             {0x04u, 4u},
                             {0x10u, 4u},
                             {0x3cu, 1u},
                             {0x40u, 4u},
                             {0x100u, 4u},
                             {0xffcu, 4u}}) {
    CAPTURE(access.first);
    auto w = b.config_write(access.first, access.second, 0xffffffff >> (32 - 8 * access.second));
    REQUIRE_FALSE(w);
    CHECK(w.error().code == EPERM);
    CHECK(message_has(w.error(), driver));
  }
  for (const Region& r : b.regions()) {
    CAPTURE(int{r.bar});
    CHECK(r.readonly);
    if (r.kind == RegionKind::io) continue;
    for (unsigned width : {1u, 2u, 4u, 8u}) {
      auto rd = b.mmio_read(r.bar, 0, width);
      REQUIRE_FALSE(rd);
      CHECK(rd.error().code == EPERM);
      CHECK(message_has(rd.error(), driver));
      auto wr = b.mmio_write(r.bar, r.size - width, width, 0);
      REQUIRE_FALSE(wr);
      CHECK(wr.error().code == EPERM);
    }
  }
  auto reset = b.reset();
  REQUIRE_FALSE(reset);
  CHECK(reset.error().code == EPERM);
  CHECK(message_has(reset.error(), driver));
  CHECK(b.bar_memory(0).empty());
}

std::uint64_t sysfs_hex(const fs::path& path) {
  return std::strtoull(file_read(path).c_str(), nullptr, 16);  // strtoull takes the 0x prefix
}

}  // namespace

// ---- (a) unbound fake function ----------------------------------------------------------

TEST_CASE("pci-sysfs fake unbound: identity comes from the sysfs text files") {
  ClassicFunction f(false);
  auto b = create_ok(f.params());
  CHECK(b->name() == "pci-sysfs");
  const Identity& id = b->identity();
  CHECK(id.vendor == kFakeVendor);
  CHECK(id.device == kFakeDevice);
  CHECK(id.class_code == kFakeClass);
  CHECK(id.subsystem_vendor == 0xabcd);
  CHECK(id.subsystem_device == 0x0001);
  CHECK(id.revision == 0x02);
  CHECK(b->vector_count() == 0);
  CHECK_FALSE(b->uses_dma());
}

TEST_CASE("pci-sysfs fake unbound: the BAR table comes from the resource file") {
  ClassicFunction f(false);
  auto b = create_ok(f.params());
  auto regions = b->regions();
  REQUIRE(regions.size() == 3);
  CHECK(regions[0].bar == 0);
  CHECK(regions[0].size == 4096);
  CHECK(regions[0].kind == RegionKind::registers);
  CHECK_FALSE(regions[0].is_64bit);
  CHECK(regions[1].bar == 2);
  CHECK(regions[1].size == 16384);
  CHECK(regions[1].kind == RegionKind::memory);
  CHECK(regions[1].is_64bit);
  CHECK(regions[2].bar == 4);
  CHECK(regions[2].size == 32);
  CHECK(regions[2].kind == RegionKind::io);
  CHECK_FALSE(regions[2].is_64bit);
  for (const Region& r : regions) CHECK_FALSE(r.readonly);
}

TEST_CASE("pci-sysfs fake unbound: config reads at every width match the file; past its end all-ones") {
  ClassicFunction f(false);
  auto b = create_ok(f.params());
  CHECK(*b->config_read(0, 4) == (std::uint32_t{kFakeDevice} << 16 | kFakeVendor));
  for (unsigned width : {1u, 2u, 4u}) {
    for (std::uint32_t offset = 0; offset < kFakeConfigSize; offset += width) {
      CAPTURE(offset);
      CAPTURE(width);
      auto v = b->config_read(offset, width);
      REQUIRE(v);
      CHECK(*v == le_get(f.config, offset, width));
    }
    for (std::uint32_t offset : {std::uint32_t(kFakeConfigSize), 0x400u, pci::kConfigSpaceSize - width}) {
      CAPTURE(offset);
      auto v = b->config_read(offset, width);
      REQUIRE(v);
      CHECK(*v == (width == 4 ? 0xffffffffu : (1u << (8 * width)) - 1));
    }
  }
  CHECK(b->config_read(0, 8).error().code == EINVAL);
  CHECK(b->config_read(0, 3).error().code == EINVAL);
  CHECK(b->config_read(2, 4).error().code == EINVAL);
  CHECK(b->config_read(pci::kConfigSpaceSize, 1).error().code == EINVAL);
}

TEST_CASE("pci-sysfs fake unbound: BAR reads and writes at every width go through resourceN") {
  ClassicFunction f(false);
  auto b = create_ok(f.params());
  for (const auto& bar_file : {std::pair{0, "resource0"}, {2, "resource2"}}) {
    CAPTURE(bar_file.second);
    const char* file = bar_file.second;
    const std::string before = file_read(f.dir / file);
    const auto bar_index = static_cast<std::uint8_t>(bar_file.first);
    for (unsigned width : {1u, 2u, 4u, 8u}) {
      for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{width} * 3, before.size() - width}) {
        CAPTURE(width);
        CAPTURE(offset);
        auto v = b->mmio_read(bar_index, offset, width);
        REQUIRE(v);
        CHECK(*v == le_get(before, offset, width));
      }
    }
    REQUIRE(b->mmio_write(bar_index, 0x10, 8, 0x1122334455667788));
    REQUIRE(b->mmio_write(bar_index, 0x20, 4, 0xdeadbeef));
    REQUIRE(b->mmio_write(bar_index, 0x26, 2, 0xcafe));
    REQUIRE(b->mmio_write(bar_index, 0x29, 1, 0x5a));
    REQUIRE(b->mmio_write(bar_index, before.size() - 8, 8, 0x0102030405060708));
    std::string expect = before;
    le_put(expect, 0x10, 8, 0x1122334455667788);
    le_put(expect, 0x20, 4, 0xdeadbeef);
    le_put(expect, 0x26, 2, 0xcafe);
    le_put(expect, 0x29, 1, 0x5a);
    le_put(expect, before.size() - 8, 8, 0x0102030405060708);
    CHECK(file_read(f.dir / file) == expect);  // a shared mapping of the file: the file sees it
    CHECK(*b->mmio_read(bar_index, 0x20, 4) == 0xdeadbeef);
  }
}

TEST_CASE("pci-sysfs fake unbound: BAR accesses outside the contract are EINVAL and touch nothing") {
  ClassicFunction f(false);
  auto b = create_ok(f.params());
  const auto before = f.snapshot();
  CHECK(b->mmio_read(0, 4096, 1).error().code == EINVAL);
  CHECK(b->mmio_read(0, 4092, 8).error().code == EINVAL);
  CHECK(b->mmio_read(0, 2, 4).error().code == EINVAL);
  CHECK(b->mmio_read(0, 0, 3).error().code == EINVAL);
  CHECK(b->mmio_read(1, 0, 4).error().code == EINVAL);  // no BAR1
  CHECK(b->mmio_read(3, 0, 4).error().code == EINVAL);  // BAR2's upper half
  CHECK(b->mmio_read(4, 0, 4).error().code == EINVAL);  // I/O port BAR
  CHECK(b->mmio_read(6, 0, 4).error().code == EINVAL);
  CHECK(b->mmio_write(2, 16384, 4, 0).error().code == EINVAL);
  CHECK(b->mmio_write(4, 0, 1, 0).error().code == EINVAL);
  CHECK(b->mmio_write(0, 1, 2, 0).error().code == EINVAL);
  CHECK(f.snapshot() == before);
}

TEST_CASE("pci-sysfs fake unbound: config writes are EPERM without config-write=yes") {
  ClassicFunction f(false);
  auto b = create_ok(f.params());
  const auto before = f.snapshot();
  auto w = b->config_write(0x3c, 1, 0x0a);
  REQUIRE_FALSE(w);
  CHECK(w.error().code == EPERM);
  CHECK(message_has(w.error(), "config-write=yes"));
  CHECK(create_ok(f.params({{"config-write", "no"}}))->config_write(0x04, 2, 0).error().code == EPERM);
  CHECK(f.snapshot() == before);
  for (int mode : open_modes(f.dir / "config")) CHECK(mode == O_RDONLY);
}

TEST_CASE("pci-sysfs fake unbound: with config-write=yes config writes hit the file") {
  ClassicFunction f(false);
  auto b = create_ok(f.params({{"config-write", "yes"}}));
  REQUIRE(b->config_write(0x3c, 1, 0x0a));
  REQUIRE(b->config_write(0x04, 2, 0x0402));      // memory space, INTx disable
  REQUIRE(b->config_write(0x44, 4, 0x11223344));  // the vendor-specific capability's registers
  REQUIRE(b->config_write(0x80, 4, 0x55667788));  // space no capability claims
  std::string expect = f.config;
  le_put(expect, 0x3c, 1, 0x0a);
  le_put(expect, 0x04, 2, 0x0402);
  le_put(expect, 0x44, 4, 0x11223344);
  le_put(expect, 0x80, 4, 0x55667788);
  CHECK(file_read(f.dir / "config") == expect);
  CHECK(*b->config_read(0x44, 4) == 0x11223344);
  // The capability's ID, next pointer and length are read-only: dropped, the rest lands.
  REQUIRE(b->config_write(0x40, 4, 0xffffffff));
  le_put(expect, 0x43, 1, 0xff);
  CHECK(file_read(f.dir / "config") == expect);
  // Past the file's end: not decoded, ignored, and the file does not grow.
  REQUIRE(b->config_write(0x100, 4, 0xffffffff));
  REQUIRE(b->config_write(0xffe, 2, 0xffff));
  CHECK(file_read(f.dir / "config") == expect);
  // BARs and the expansion ROM would move the host's device: refused even now.
  for (std::uint32_t offset : {0x10u, 0x14u, 0x18u, 0x1cu, 0x20u, 0x24u, 0x30u}) {
    CAPTURE(offset);
    auto w = b->config_write(offset, 4, 0xffffffff);
    REQUIRE_FALSE(w);
    CHECK(w.error().code == EPERM);
  }
  CHECK(b->config_write(0x12, 2, 0xffff).error().code == EPERM);
  CHECK(b->config_write(0x27, 1, 0xff).error().code == EPERM);
  CHECK(b->config_write(0x0f, 1, 0));  // the byte before BAR0 is not a BAR
  CHECK(b->config_write(0x28, 4, 0));  // CardBus CIS pointer, after BAR5
  CHECK(file_read(f.dir / "config").substr(0x10, 0x18) == f.config.substr(0x10, 0x18));
  CHECK(b->config_write(0x3c, 8, 0).error().code == EINVAL);
  CHECK(b->config_write(0x3d, 2, 0).error().code == EINVAL);
}

TEST_CASE("pci-sysfs fake unbound: reset without a sysfs reset file is not supported") {
  ClassicFunction f(false);
  auto b = create_ok(f.params());
  auto r = b->reset();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOTSUP);
  CHECK(b->bar_memory(0).empty());
  CHECK(b->mmio_write_is_doorbell(0, 0));
}

TEST_CASE("pci-sysfs fake unbound: a driver that binds later makes every write and BAR access EPERM") {
  ClassicFunction f(false);
  auto b = create_ok(f.params({{"config-write", "yes"}}));
  REQUIRE(b->mmio_read(0, 0, 4));
  fs::create_directory_symlink("../../drivers/fakedrv", f.dir / "driver");
  const auto before = f.snapshot();
  for (auto r : {b->mmio_read(0, 0, 4), b->mmio_read(2, 8, 8)}) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EPERM);
    CHECK(message_has(r.error(), "fakedrv"));
  }
  CHECK(b->mmio_write(0, 0, 4, 1).error().code == EPERM);
  CHECK(b->config_write(0x3c, 1, 1).error().code == EPERM);
  CHECK(b->reset().error().code == EPERM);
  CHECK(b->config_read(0, 2));  // config reads stay allowed
  CHECK(f.snapshot() == before);
}

TEST_CASE("pci-sysfs fake unbound: a resource file that cannot be mapped goes through pread/pwrite") {
  // /dev/null cannot be mapped; it takes writes and reads nothing: enough to see that the
  // backend falls back to exact-width pwrite/pread and reports a short read as EIO.
  ClassicFunction f(false);
  fs::remove(f.dir / "resource0");
  fs::create_symlink("/dev/null", f.dir / "resource0");
  auto b = create_ok(f.params());
  CHECK(b->mmio_write(0, 8, 4, 0x12345678));
  auto r = b->mmio_read(0, 8, 4);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EIO);
  CHECK(*b->mmio_read(2, 0, 8) == le_get(pattern(16384, 2), 0, 8));  // BAR2 still mapped
}

TEST_CASE("pci-sysfs fake unbound: an upper-case bdf names the same function") {
  ClassicFunction f(false);
  auto b = create_ok({{"bdf", "0000:3A:00.1"}, {"sysfs-root", (f.root / "devices").string()}});
  CHECK(b->identity().vendor == kFakeVendor);
}

// ---- (b) fake function bound to a driver -------------------------------------------------

TEST_CASE("pci-sysfs fake bound: read-only export, every write, BAR access and reset EPERM, files unchanged") {
  for (const char* config_write : {"no", "yes"}) {
    CAPTURE(config_write);
    ClassicFunction f(true);
    const auto before = f.snapshot();
    auto b = create_ok(f.params({{"config-write", config_write}}));
    CHECK(b->identity().vendor == kFakeVendor);
    REQUIRE(b->regions().size() == 3);
    CHECK(*b->config_read(0, 4) == (std::uint32_t{kFakeDevice} << 16 | kFakeVendor));
    CHECK(*b->config_read(0x3c, 1) == 0x0b);
    check_everything_refused(*b, "fakedrv");
    REQUIRE(b->attach(nullptr, nullptr));
    b->detach();
    CHECK(f.snapshot() == before);
    // config-write=yes does not even open config for writing while a driver is bound.
    for (int mode : open_modes(f.dir / "config")) CHECK(mode == O_RDONLY);
  }
}

TEST_CASE("pci-sysfs fake bound: resourceN files are never opened") {
  ClassicFunction f(true);
  fs::remove(f.dir / "resource0");
  fs::remove(f.dir / "resource2");
  auto b = create_ok(f.params());
  CHECK(b->regions().size() == 3);
  CHECK(b->mmio_read(0, 0, 4).error().code == EPERM);
}

// ---- (c) a real function of this machine ---------------------------------------------------

namespace {

// The first function under /sys/bus/pci/devices with a driver bound that is no bridge
// (bridges are refused at export), or empty.
std::string real_bound_function() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/bus/pci/devices", ec)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const fs::path dir = fs::path("/sys/bus/pci/devices") / name;
    if (fs::is_symlink(dir / "driver", ec) && (sysfs_hex(dir / "class") >> 16) != 0x06) return name;
  }
  return {};
}

}  // namespace

// Skips (tests/support/skip.hpp) on a machine without a bound PCI function.
TEST_CASE("pci-sysfs real bound function: read-only export") {
  const std::string bdf = real_bound_function();
  if (bdf.empty()) {
    rpcie::test::skip("no PCI function with a bound driver under /sys/bus/pci/devices: read-only export not checked");
    return;
  }
  MESSAGE("real function " << bdf);
  const fs::path dir = fs::path("/sys/bus/pci/devices") / bdf;
  const std::string driver = fs::read_symlink(dir / "driver").filename();
  for (const char* config_write : {"no", "yes"}) {
    CAPTURE(config_write);
    auto b = create_ok({{"bdf", bdf}, {"config-write", config_write}});
    const Identity& id = b->identity();
    CHECK(id.vendor == sysfs_hex(dir / "vendor"));
    CHECK(id.device == sysfs_hex(dir / "device"));
    CHECK(id.class_code == sysfs_hex(dir / "class"));
    CHECK(id.subsystem_vendor == sysfs_hex(dir / "subsystem_vendor"));
    CHECK(id.subsystem_device == sysfs_hex(dir / "subsystem_device"));
    CHECK(id.revision == sysfs_hex(dir / "revision"));
    CHECK(*b->config_read(0, 4) == (std::uint32_t{id.device} << 16 | id.vendor));
    CHECK(*b->config_read(0, 2) == id.vendor);
    CHECK(*b->config_read(0x0b, 1) == id.class_code >> 16);
    for (const Region& r : b->regions()) {
      CHECK(r.readonly);
      if (r.kind == RegionKind::io) continue;
      auto rd = b->mmio_read(r.bar, 0, 4);
      REQUIRE_FALSE(rd);
      CHECK(rd.error().code == EPERM);
      CHECK(message_has(rd.error(), driver));
    }
    // The vendor ID register is read-only in every device: even a write that slipped
    // through would change nothing. None does: EPERM before any system call.
    auto w = b->config_write(0, 2, id.vendor);
    REQUIRE_FALSE(w);
    CHECK(w.error().code == EPERM);
    CHECK(message_has(w.error(), driver));
    CHECK(b->reset().error().code == EPERM);
    for (int mode : open_modes(dir / "config")) CHECK(mode == O_RDONLY);
  }
}

TEST_CASE("pci-sysfs real bound function: an unprivileged reader sees 64 bytes") {
  const std::string bdf = real_bound_function();
  if (bdf.empty() || ::geteuid() != 0) {
    rpcie::test::skip(bdf.empty() ? "no PCI function with a bound driver: the unprivileged reader not checked"
                                  : "needs root to drop to an unprivileged reader: not checked");
    return;
  }
  auto root_view = create_ok({{"bdf", bdf}});
  const std::uint32_t id = *root_view->config_read(0, 4);
  // The child drops to nobody; the kernel then returns only the first 64 bytes of config.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    auto b = pci_sysfs_create({{"bdf", bdf}});
    if (!b) ::_exit(11);
    auto head = (*b)->config_read(0, 4);
    auto beyond = (*b)->config_read(0x40, 4);
    auto beyond_byte = (*b)->config_read(0xff, 1);
    if (!head || *head != id) ::_exit(12);
    if (!beyond || *beyond != 0xffffffff) ::_exit(13);
    if (!beyond_byte || *beyond_byte != 0xff) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// ---- (d) parameters -------------------------------------------------------------------------

TEST_CASE("pci-sysfs params: malformed bdf is EINVAL naming it") {
  for (const char* bad : {"", "0000:00:01", "00:01.0", "0000:00:01.0 ", " 0000:00:01.0", "0000:00:20.0", "0000:00:01.8",
                          "g000:00:01.0", "0000-00-01.0", "0000:000:1.0", "0000:00:01:0", "0000:00:1f.a"}) {
    CAPTURE(bad);
    auto b = pci_sysfs_create({{"bdf", bad}});
    REQUIRE_FALSE(b);
    CHECK(b.error().code == EINVAL);
    CHECK(message_has(b.error(), "'" + std::string(bad) + "'"));
  }
  auto missing = pci_sysfs_create({{"config-write", "no"}});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == EINVAL);
  CHECK(message_has(missing.error(), "bdf"));
}

TEST_CASE("pci-sysfs params: a function that does not exist is ENOENT naming the path") {
  auto real = pci_sysfs_create({{"bdf", "ffff:ff:1f.7"}});
  REQUIRE_FALSE(real);
  CHECK(real.error().code == ENOENT);
  CHECK(message_has(real.error(), "/sys/bus/pci/devices/ffff:ff:1f.7"));
  ClassicFunction f(false);
  auto fake = pci_sysfs_create({{"bdf", "0000:3a:00.2"}, {"sysfs-root", (f.root / "devices").string()}});
  REQUIRE_FALSE(fake);
  CHECK(fake.error().code == ENOENT);
  CHECK(message_has(fake.error(), (f.root / "devices" / "0000:3a:00.2").string()));
}

TEST_CASE("pci-sysfs params: config-write is yes or no; unknown keys are EINVAL naming them") {
  ClassicFunction f(false);
  auto maybe = pci_sysfs_create(f.params({{"config-write", "maybe"}}));
  REQUIRE_FALSE(maybe);
  CHECK(maybe.error().code == EINVAL);
  CHECK(message_has(maybe.error(), "'maybe'"));
  auto unknown = pci_sysfs_create(f.params({{"bar", "0"}}));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == EINVAL);
  CHECK(message_has(unknown.error(), "'bar'"));
  CHECK(pci_sysfs_create(f.params({{"sysfs-root", ""}})).error().code == EINVAL);
}

TEST_CASE("pci-sysfs params: backend_create selects pci-sysfs by name") {
  ClassicFunction f(false);
  auto spec = export_spec_parse("nic=pci-sysfs,bdf=0000:3a:00.1,sysfs-root=" + (f.root / "devices").string());
  REQUIRE(spec);
  auto b = backend_create(*spec);
  REQUIRE(b);
  CHECK((*b)->name() == "pci-sysfs");
}

TEST_CASE("pci-sysfs fake: a malformed identity or resource file fails creation with EIO naming it") {
  ClassicFunction f(false);
  file_write(f.dir / "vendor", "abcd\n");
  auto bad_vendor = pci_sysfs_create(f.params());
  REQUIRE_FALSE(bad_vendor);
  CHECK(bad_vendor.error().code == EIO);
  CHECK(message_has(bad_vendor.error(), (f.dir / "vendor").string()));
  file_write(f.dir / "vendor", "0xabcd\n");
  file_write(f.dir / "resource", "0x1000 0x2ffe 0x200\n");
  auto bad_resource = pci_sysfs_create(f.params());
  REQUIRE_FALSE(bad_resource);
  CHECK(bad_resource.error().code == EIO);
  CHECK(message_has(bad_resource.error(), (f.dir / "resource").string()));
  fs::remove(f.dir / "revision");
  auto missing = pci_sysfs_create(f.params());
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ENOENT);
}

// ---- the resource decoder -------------------------------------------------------------------

TEST_CASE("pci_resource_parse: kinds, 64-bit upper halves, absent lines, only six BARs") {
  auto regions = pci_resource_parse(
      "0x0000004000000000 0x000000400007ffff 0x0000000000140204\n"  // this machine's virtio BAR0
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000000000001000 0x00000000000010ff 0x0000000000000000\n"  // neither I/O nor memory
      "0x00000000fe000000 0x00000000fe0fffff 0x0000000000042208\n"  // 32-bit prefetchable
      "0x0000000000000000 0x0000000000000fff 0x0000000000000200\n"  // unassigned: start 0
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x00000000fd000000 0x00000000fd00ffff 0x0000000000046200\n");
  REQUIRE(regions);
  REQUIRE(regions->size() == 3);
  CHECK((*regions)[0].bar == 0);
  CHECK((*regions)[0].size == 0x80000);
  CHECK((*regions)[0].kind == RegionKind::registers);
  CHECK((*regions)[0].is_64bit);
  CHECK((*regions)[1].bar == 3);
  CHECK((*regions)[1].size == 0x100000);
  CHECK((*regions)[1].kind == RegionKind::memory);
  CHECK_FALSE((*regions)[1].is_64bit);
  CHECK((*regions)[2].bar == 4);
  CHECK((*regions)[2].size == 0x1000);
  auto empty = pci_resource_parse("");
  REQUIRE(empty);
  CHECK(empty->empty());
  auto short_file = pci_resource_parse("0x1000 0x1fff 0x200");  // no newline, one line
  REQUIRE(short_file);
  CHECK(short_file->size() == 1);
}

TEST_CASE("pci_resource_parse: malformed lines and sizes that are not powers of two are EIO") {
  for (const char* bad : {"0x1000 0x1fff\n", "1000 1fff 200\n", "0x1000 0x1fff 0x200 junk\n", "garbage\n",
                          "0x2000 0x1fff 0x200\n", "0x1000 0x2ffe 0x200\n", "0x0 0xffffffffffffffff 0x200\n", "\n"}) {
    CAPTURE(bad);
    auto r = pci_resource_parse(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EIO);
  }
}
