// The pci-sysfs safety policy on a fake sysfs tree (pci_sysfs_fake.hpp; no root, nothing
// written to the real sysfs): bridges refused at export, bus mastering off before a client
// is served, the config-write table (refused writes are EPERM and change no byte, allowed
// ones land, read-only bits keep the device's value), the MSI-X table guarded in its BAR,
// refusals logged at a bounded rate, and the function reset and restored at detach.
//
// The fake function ("secure_spec"), a PCI Express network controller:
//   0x04 Command 0x0006 (memory, BUS MASTER)    0x06 Status 0x2010 (caps; master abort seen)
//   0x10 BAR0 32-bit MMIO 16 KiB, MSI-X table at 0x2000 (8 entries), PBA at 0x3000
//   0x18 BAR2/3 64-bit prefetchable 16 KiB
//   0x40 Power Management -> 0x50 MSI (64-bit, per-vector masks, to 0x68) -> 0x70 MSI-X
//   -> 0x80 PCI Express v2 (FLR capable) -> 0xc0 vendor-specific (16 bytes); no capability
//   claims 0x68-0x6f, 0x7c-0x7f, 0xbc-0xbf, 0xd0-0xff
//   0x100 AER -> 0x140 SR-IOV (which the tables do not know: read-only)
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "backends/pci-sysfs/config_policy.hpp"
#include "backends/pci-sysfs/pci_sysfs.hpp"
#include "pci_sysfs_fake.hpp"
#include "rpcie/log.hpp"

using namespace rpcie;
using namespace rpcie::dev;
using namespace rpcie::test;

namespace {

constexpr std::uint16_t kCommandAtStart = 0x0006;
constexpr std::uint16_t kCommandAttached = 0x0002;  // bus master cleared at attach

FakeSpec secure_spec() {
  FakeSpec spec;
  std::string& c = spec.config;
  c = std::string(4096, '\0');
  le_put(c, 0x00, 2, 0xabcd);
  le_put(c, 0x02, 2, 0x1234);
  le_put(c, 0x04, 2, kCommandAtStart);
  le_put(c, 0x06, 2, 0x2010);
  le_put(c, 0x08, 4, 0x02000002);  // class 0x020000, revision 2
  le_put(c, 0x0c, 1, 0x10);        // cache line size
  le_put(c, 0x10, 4, 0xfe000000);  // BAR0
  le_put(c, 0x18, 4, 0x0000000c);  // BAR2 64-bit prefetchable
  le_put(c, 0x1c, 4, 0x00000008);  // BAR3: 0x8_0000_0000
  le_put(c, 0x2c, 4, 0x0001abcd);
  le_put(c, 0x34, 1, 0x40);
  le_put(c, 0x3c, 2, 0x010b);
  // Power Management: PMC v3; PMCSR D0 with No_Soft_Reset.
  le_put(c, 0x40, 2, 0x5001);
  le_put(c, 0x42, 2, 0x0003);
  le_put(c, 0x44, 2, 0x0008);
  // MSI: 64-bit, per-vector masking, programmed by the host.
  le_put(c, 0x50, 2, 0x7005);
  le_put(c, 0x52, 2, 0x0180);
  le_put(c, 0x54, 4, 0xfee00000);
  le_put(c, 0x5c, 2, 0x0041);
  for (std::uint32_t i = 0x68; i < 0x70; ++i) c[i] = static_cast<char>(0xa0 + i);
  // MSI-X: 8 entries, table in BAR0 at 0x2000, PBA in BAR0 at 0x3000.
  le_put(c, 0x70, 2, 0x8011);
  le_put(c, 0x72, 2, 0x0007);
  le_put(c, 0x74, 4, 0x00002000);
  le_put(c, 0x78, 4, 0x00003000);
  // PCI Express v2 endpoint: FLR capable; Device Control MRRS 512, no snoop, relaxed
  // ordering; Device Status: a correctable error seen; Link Control: RCB.
  le_put(c, 0x80, 2, 0xc010);
  le_put(c, 0x82, 2, 0x0002);
  le_put(c, 0x84, 4, 0x10008000);
  le_put(c, 0x88, 2, 0x2810);
  le_put(c, 0x8a, 2, 0x0001);
  le_put(c, 0x90, 2, 0x0008);
  le_put(c, 0x92, 2, 0x1011);
  // Vendor-specific, 16 bytes, last in the list.
  le_put(c, 0xc0, 3, 0x100009);
  for (std::uint32_t i = 0xc3; i < 0x100; ++i) c[i] = static_cast<char>(i);
  // AER -> SR-IOV.
  le_put(c, 0x100, 4, 0x14010001);
  le_put(c, 0x104, 4, 0x00000010);
  le_put(c, 0x10c, 4, 0x00462030);
  le_put(c, 0x110, 4, 0x00000001);
  le_put(c, 0x114, 4, 0x00002000);
  le_put(c, 0x118, 4, 0x000000a0);
  le_put(c, 0x140, 4, 0x00010010);
  spec.resource =
      "0x00000000fe000000 0x00000000fe003fff 0x0000000000040200\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000000800000000 0x0000000800003fff 0x000000000014220c\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";
  spec.bars = {{0, pattern(16384, 1)}, {2, pattern(16384, 2)}};
  return spec;
}

// The config space as attach leaves it: bus mastering off.
std::string attached_config(const std::string& config) {
  std::string c = config;
  le_put(c, 0x04, 2, kCommandAttached);
  return c;
}

std::unique_ptr<Backend> create_ok(const std::map<std::string, std::string>& params) {
  auto made = pci_sysfs_create(params);
  REQUIRE_MESSAGE(made, (made ? std::string() : made.error().describe()));
  return std::move(*made);
}

bool message_has(const Error& e, const std::string& text) { return e.message.find(text) != std::string::npos; }

// An attached backend with config-write=yes.
std::unique_ptr<Backend> attached(const FakeFunction& f, const char* config_write = "yes") {
  auto b = create_ok(f.params({{"config-write", config_write}}));
  REQUIRE(b->attach(nullptr, nullptr));
  return b;
}

// What the process writes to stderr while `body` runs.
template <class Body>
std::string stderr_capture(Body&& body) {
  std::FILE* sink = std::tmpfile();
  REQUIRE(sink != nullptr);
  const int saved = ::dup(2);
  REQUIRE(saved >= 0);
  REQUIRE(::dup2(::fileno(sink), 2) == 2);
  body();
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(sink);
  for (int ch; (ch = std::fgetc(sink)) != EOF;) text.push_back(static_cast<char>(ch));
  std::fclose(sink);
  return text;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// ---- bridges -----------------------------------------------------------------------------

TEST_CASE("pci-sysfs policy: bridges are refused at export, bound or not, naming the function and its class") {
  struct Case {
    const char* bdf;
    std::uint32_t class_code;
    std::uint8_t header_type;
    const char* kind;
    const char* class_text;
  };
  for (const Case& k : {Case{"0000:00:00.0", 0x060000, 0x00, "a host bridge", "0x060000"},
                        Case{"0000:00:1c.0", 0x060400, 0x01, "a PCI-to-PCI bridge", "0x060400"},
                        Case{"0000:00:1f.0", 0x060100, 0x80, "an ISA bridge", "0x060100"},
                        Case{"0000:00:1e.0", 0x068000, 0x00, "a bridge", "0x068000"}}) {
    for (bool bound : {false, true}) {
      CAPTURE(k.class_text);
      CAPTURE(bound);
      FakeSpec spec = secure_spec();
      spec.bdf = k.bdf;
      spec.bound = bound;
      spec.class_code = k.class_code;
      le_put(spec.config, 0x09, 3, k.class_code);
      le_put(spec.config, 0x0e, 1, k.header_type);
      FakeFunction f(spec);
      const auto before = f.snapshot();
      auto made = pci_sysfs_create(f.params({{"config-write", "yes"}}));
      REQUIRE_FALSE(made);
      CHECK(made.error().code == EPERM);
      CHECK(made.error().message == std::string("pci-sysfs ") + k.bdf + ": refused: " + k.bdf + " is " + k.kind +
                                        " (class " + k.class_text + "); bridges cannot be exported");
      CHECK(f.snapshot() == before);
    }
  }
}

TEST_CASE("pci-sysfs policy: a type-1 or type-2 header is refused whatever the class says") {
  for (std::uint8_t type : {std::uint8_t{0x01}, std::uint8_t{0x02}, std::uint8_t{0x81}}) {
    CAPTURE(int{type});
    FakeSpec spec = secure_spec();
    le_put(spec.config, 0x0e, 1, type);
    FakeFunction f(spec);
    auto made = pci_sysfs_create(f.params());
    REQUIRE_FALSE(made);
    CHECK(made.error().code == EPERM);
    CHECK(message_has(made.error(), "has header type 0x" + std::to_string(type & 0x7f) + ", not 0"));
    CHECK(message_has(made.error(), "bridges cannot be exported"));
  }
}

// ---- bus mastering -------------------------------------------------------------------------

TEST_CASE("pci-sysfs policy: attach turns off bus mastering left on, with or without config-write") {
  for (const char* config_write : {"no", "yes"}) {
    CAPTURE(config_write);
    FakeFunction f(secure_spec());
    auto b = create_ok(f.params({{"config-write", config_write}}));
    CHECK(f.config_now() == f.config);  // creation writes nothing
    REQUIRE(b->attach(nullptr, nullptr));
    CHECK(f.config_now() == attached_config(f.config));  // only Command's bit 2 changed
    if (std::string(config_write) == "no")
      for (int mode : open_modes(f.dir / "config")) CHECK(mode == O_RDONLY);
    b->detach();
    CHECK(le_get(f.config_now(), 0x04, 2) == kCommandAttached);
  }
}

TEST_CASE("pci-sysfs policy: bus mastering that does not clear refuses the attach") {
  FakeFunction f(secure_spec());
  auto b = create_ok(f.params());
  // From now on writes to `config` go nowhere, while the backend reads the function it opened.
  fs::remove(f.dir / "config");
  fs::create_symlink("/dev/null", f.dir / "config");
  auto a = b->attach(nullptr, nullptr);
  REQUIRE_FALSE(a);
  CHECK(a.error().code == EPERM);
  CHECK(message_has(a.error(), "pci-sysfs 0000:3a:00.1: bus mastering is on and does not clear (Command 0x6)"));
}

// ---- the config-write table ----------------------------------------------------------------

TEST_CASE("pci-sysfs policy: config writes the table refuses are EPERM, refused whole, and change no byte") {
  FakeFunction f(secure_spec());
  auto b = attached(f);
  const std::string base = f.config_now();
  struct Refused {
    std::uint32_t offset;
    unsigned width;
    std::uint32_t value;
    const char* says;
  };
  for (const Refused& r : {
           // bus master, beside a permitted memory-space bit that must not land either
           Refused{0x04, 2, 0x0006, "Command bits 0x4 may not change: bus mastering stays off"},
           Refused{0x04, 1, 0x04, "Command bits 0x4 may not change"},
           Refused{0x04, 4, 0x20100406, "Command bits 0x4 may not change"},
           Refused{0x10, 4, 0xffffffff, "BAR0 bits 0x1ffffff may not change: it places the function"},
           Refused{0x12, 2, 0x0000, "BAR0 bits 0xfe000000 may not change"},
           Refused{0x14, 4, 0xffffffff, "BAR1 bits 0xffffffff may not change"},
           Refused{0x1c, 4, 0x00000000, "BAR3 bits 0x8 may not change"},
           Refused{0x30, 4, 0xfffff801, "Expansion ROM Base Address bits 0xfffff801 may not change"},
           Refused{0x44, 2, 0x000b,
                   "PMCSR (Power Management capability 0x01 at 0x40) bits 0x3 may not change: the "
                   "power state stays the host's"},
           Refused{0x44, 1, 0x09, "PMCSR (Power Management capability 0x01 at 0x40) bits 0x1 may not change"},
           Refused{0x52, 2, 0x0181, "MSI Message Control (MSI capability 0x05 at 0x50) bits 0x1 may not change"},
           Refused{0x54, 4, 0xfee01000, "MSI Message Address (MSI capability 0x05 at 0x50) bits 0x1000 may not change"},
           Refused{0x58, 4, 0x00000001, "MSI Message Upper Address (MSI capability 0x05 at 0x50) bits 0x1 may not"},
           Refused{0x5c, 2, 0x0042, "MSI Message Data (MSI capability 0x05 at 0x50) bits 0x3 may not change"},
           Refused{0x5c, 4, 0x00000040, "MSI Message Data (MSI capability 0x05 at 0x50) bits 0x1 may not change"},
           Refused{0x72, 2, 0x8007, "MSI-X Message Control (MSI-X capability 0x11 at 0x70) bits 0x8000 may not change"},
           Refused{0x88, 2, 0xa810,
                   "Device Control (PCI Express capability 0x10 at 0x80) bits 0x8000 may only be "
                   "written as 0: only the exporter resets the function"},
           Refused{0x88, 4, 0x0000a811, "Device Control (PCI Express capability 0x10 at 0x80) bits 0x8000 may only"},
           Refused{0x89, 1, 0x80, "Device Control (PCI Express capability 0x10 at 0x80) bits 0x8000 may only"},
       }) {
    CAPTURE(r.offset);
    CAPTURE(r.width);
    auto w = b->config_write(r.offset, r.width, r.value);
    REQUIRE_FALSE(w);
    CHECK(w.error().code == EPERM);
    CHECK(message_has(w.error(), "pci-sysfs 0000:3a:00.1: config write of "));
    CHECK(message_has(w.error(), "refused: " + std::string(r.says)));
    CHECK(f.config_now() == base);
  }
  // Writing a refused register with the value it has changes nothing, and is no error.
  CHECK(b->config_write(0x10, 4, 0xfe000000));
  CHECK(b->config_write(0x54, 4, 0xfee00000));
  CHECK(b->config_write(0x04, 2, kCommandAttached));
  CHECK(f.config_now() == base);
}

TEST_CASE("pci-sysfs policy: config writes the table allows land; read-only bits keep the device's value") {
  FakeFunction f(secure_spec());
  auto b = attached(f);
  std::string expect = f.config_now();
  const auto write = [&](std::uint32_t offset, unsigned width, std::uint32_t value) {
    CAPTURE(offset);
    auto w = b->config_write(offset, width, value);
    REQUIRE_MESSAGE(w, (w ? std::string() : w.error().describe()));
  };
  write(0x04, 2, 0x0403);  // I/O, memory, INTx disable
  le_put(expect, 0x04, 2, 0x0403);
  // Status is read-only: its bits keep the device's value, and its write-1-to-clear bits
  // are written as 0 (no change on a device; the fake file shows what was written).
  write(0x04, 4, 0xffff0402);
  le_put(expect, 0x04, 4, 0x00100402);
  write(0x0c, 1, 0x20);  // cache line size
  write(0x0d, 1, 0x40);  // latency timer
  write(0x0f, 1, 0xff);  // BIST: only "start"
  le_put(expect, 0x0c, 4, 0x40004020);
  write(0x3c, 1, 0x05);  // interrupt line
  le_put(expect, 0x3c, 1, 0x05);
  write(0x3d, 1, 0x04);                      // interrupt pin: read-only, dropped
  write(0x00, 4, 0);                         // IDs: read-only, dropped
  write(0x44, 2, 0x8300 | 0x0200 | 0x0008);  // data select 1; PME_En and PME_Status dropped
  le_put(expect, 0x44, 2, 0x0208);
  write(0x60, 4, 0x00000001);  // MSI mask bits
  le_put(expect, 0x60, 4, 1);
  write(0x68, 4, 0xdeadbeef);  // no capability's: through
  le_put(expect, 0x68, 4, 0xdeadbeef);
  write(0x72, 2, 0x4007);  // MSI-X function mask
  le_put(expect, 0x72, 2, 0x4007);
  write(0x88, 2, 0x38ff);  // MRRS 1024, no snoop, reporting enables; MPS (7:5) dropped
  le_put(expect, 0x88, 2, 0x381f);
  write(0x90, 2, 0x0010);  // Link Control (link disable): read-only, dropped
  write(0xa8, 2, 0xffff);  // Device Control 2 without ARI forwarding
  le_put(expect, 0xa8, 2, 0xffdf);
  write(0xc0, 4, 0xffffffff);  // vendor-specific: ID, next and length dropped, the rest lands
  le_put(expect, 0xc3, 1, 0xff);
  write(0xc4, 4, 0x11223344);
  le_put(expect, 0xc4, 4, 0x11223344);
  write(0x108, 4, 0xffffffff);  // AER uncorrectable mask: vfio-pci's bits
  le_put(expect, 0x108, 4, 0x03fff031);
  write(0x148, 2, 0x0001);  // SR-IOV control (VF enable): no table, read-only, dropped
  CHECK(f.config_now() == expect);
  CHECK(*b->config_read(0x88, 2) == 0x381f);
}

TEST_CASE("pci-sysfs policy: register writes into the MSI-X table are EPERM; around it they land") {
  for (const char* config_write : {"no", "yes"}) {
    CAPTURE(config_write);
    FakeFunction f(secure_spec());
    auto b = attached(f, config_write);
    const std::string bar0 = file_read(f.dir / "resource0");
    struct Access {
      std::uint64_t offset;
      unsigned width;
    };
    for (const Access& a : {Access{0x2000, 4}, Access{0x2008, 4}, Access{0x2004, 4}, Access{0x2040, 1},
                            Access{0x2078, 8}, Access{0x207c, 4}, Access{0x207e, 2}}) {
      CAPTURE(a.offset);
      auto w = b->mmio_write(0, a.offset, a.width, 0x1234);
      REQUIRE_FALSE(w);
      CHECK(w.error().code == EPERM);
      CHECK(message_has(w.error(), "refused: the MSI-X table (BAR0 0x2000..0x207f) holds interrupt message addresses"));
      CHECK(file_read(f.dir / "resource0") == bar0);
      auto r = b->mmio_read(0, a.offset, a.width);  // reads stay allowed
      REQUIRE(r);
      CHECK(*r == le_get(bar0, a.offset, a.width));
    }
    std::string expect = bar0;
    for (const Access& a : {Access{0x1ff8, 8}, Access{0x2080, 4}, Access{0x3000, 8}}) {
      REQUIRE(b->mmio_write(0, a.offset, a.width, 0xa5a5a5a5a5a5a5a5));
      le_put(expect, a.offset, a.width, 0xa5a5a5a5a5a5a5a5);
    }
    REQUIRE(b->mmio_write(2, 0x2000, 4, 0x11111111));  // another BAR at the same offset
    CHECK(file_read(f.dir / "resource0") == expect);
  }
}

TEST_CASE("pci-sysfs policy: refusals are logged at a bounded rate") {
  FakeFunction f(secure_spec());
  auto b = attached(f);
  const LogLevel level = log_level();
  log_level_set(LogLevel::warn);
  const std::string log = stderr_capture([&] {
    for (int i = 0; i < 20; ++i) CHECK(b->config_write(0x10, 4, 0xffffffff).error().code == EPERM);
    for (int i = 0; i < 20; ++i) CHECK(b->mmio_write(0, 0x2000, 4, 0).error().code == EPERM);
  });
  log_level_set(level);
  CAPTURE(log);
  CHECK(count(log, "\n") == 5);
  CHECK(count(log, "pci-sysfs 0000:3a:00.1: config write of 0xffffffff at 0x10 (width 4) refused: BAR0") == 5);
}

// ---- detach and reset ----------------------------------------------------------------------

namespace {

// Writes a client may make, all of which detach must undo.
void client_writes(Backend& b) {
  for (const auto& [offset, width, value] : {std::tuple{0x04u, 2u, 0x0403u},
                                             {0x0du, 1u, 0x40u},
                                             {0x3cu, 1u, 0x05u},
                                             {0x44u, 2u, 0x0208u},
                                             {0x60u, 4u, 0x1u},
                                             {0x68u, 4u, 0xdeadbeefu},
                                             {0x72u, 2u, 0x4007u},
                                             {0x88u, 2u, 0x381fu},
                                             {0xa8u, 2u, 0x0400u},
                                             {0xc4u, 4u, 0x11223344u},
                                             {0x114u, 4u, 0x0000f1c1u}}) {
    const unsigned at = offset;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(at);
    REQUIRE(b.config_write(at, width, value));
  }
}

}  // namespace

TEST_CASE("pci-sysfs policy: detach resets through sysfs and restores the config space of attach") {
  FakeSpec spec = secure_spec();
  spec.reset_file = true;
  FakeFunction f(spec);
  auto b = attached(f);
  const std::string at_attach = f.config_now();
  client_writes(*b);
  REQUIRE(f.config_now() != at_attach);
  CHECK(file_read(f.dir / "reset").empty());
  b->detach();
  CHECK(file_read(f.dir / "reset") == "1");
  CHECK(f.config_now() == at_attach);  // byte for byte: no neighbouring status was written
}

TEST_CASE("pci-sysfs policy: detach without a reset file restores the config space of attach") {
  FakeFunction f(secure_spec());
  auto b = attached(f);
  const std::string at_attach = f.config_now();
  client_writes(*b);
  b->detach();
  CHECK(f.config_now() == at_attach);
  CHECK_FALSE(fs::exists(f.dir / "reset"));
  // A second attachment starts from the same state and is restored again.
  REQUIRE(b->attach(nullptr, nullptr));
  client_writes(*b);
  b->detach();
  CHECK(f.config_now() == at_attach);
}

TEST_CASE("pci-sysfs policy: detach with config-write=no resets and leaves config as attach made it") {
  FakeSpec spec = secure_spec();
  spec.reset_file = true;
  FakeFunction f(spec);
  auto b = attached(f, "no");
  CHECK(b->mmio_write(0, 0x100, 4, 0x5a5a5a5a));
  b->detach();
  CHECK(file_read(f.dir / "reset") == "1");
  CHECK(f.config_now() == attached_config(f.config));
  for (int mode : open_modes(f.dir / "config")) CHECK(mode == O_RDONLY);
}

TEST_CASE("pci-sysfs policy: detach touches nothing once a host driver has bound") {
  FakeSpec spec = secure_spec();
  spec.reset_file = true;
  FakeFunction f(spec);
  auto b = attached(f);
  client_writes(*b);
  fs::create_directory_symlink("../../drivers/fakedrv", f.dir / "driver");
  const auto before = f.snapshot();
  b->detach();
  CHECK(f.snapshot() == before);
  CHECK(file_read(f.dir / "reset").empty());
}

TEST_CASE("pci-sysfs policy: reset() writes the sysfs reset file; without one it is ENOTSUP") {
  FakeSpec spec = secure_spec();
  spec.reset_file = true;
  FakeFunction with(spec);
  auto b = create_ok(with.params());
  REQUIRE(b->reset());
  CHECK(file_read(with.dir / "reset") == "1");
  FakeFunction without(secure_spec());
  auto r = create_ok(without.params())->reset();
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOTSUP);
  CHECK(message_has(r.error(), "no sysfs reset file"));
}

// ---- the table on its own -------------------------------------------------------------------

namespace {

void put(std::vector<std::uint8_t>& c, std::size_t at, unsigned width, std::uint32_t value) {
  for (unsigned i = 0; i < width; ++i) c[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
}

}  // namespace

TEST_CASE("ConfigPolicy: a looping capability list ends; an unknown capability is read-only up to the next") {
  std::vector<std::uint8_t> c(256, 0);
  put(c, 0x06, 2, 0x0010);
  put(c, 0x34, 1, 0x48);
  put(c, 0x48, 2, 0x6005);    // MSI, 32-bit, no masks: 0x48-0x53; 0x54-0x5f nobody's
  put(c, 0x60, 2, 0x800d);    // 0x0d, not in the tables: read-only up to 0x80
  put(c, 0x80, 3, 0x084809);  // vendor-specific, 8 bytes, and back to 0x48: a loop
  const ConfigPolicy p = ConfigPolicy::build(c);
  CHECK(p.size() == 256);
  CHECK_FALSE(p.msix_table());
  auto address = p.write_merge(0x4c, 4, 0x1000, 0);
  REQUIRE_FALSE(address);
  CHECK(address.error().code == EPERM);
  CHECK(address.error().message ==
        "MSI Message Address (MSI capability 0x05 at 0x48) bits 0x1000 may not change: MSI and MSI-X stay as the host "
        "set them: a message is a memory write by the device, and pci-sysfs delivers no interrupts");
  auto data = p.write_merge(0x50, 2, 0x1, 0);
  REQUIRE_FALSE(data);
  CHECK(message_has(data.error(), "MSI Message Data (MSI capability 0x05 at 0x48) bits 0x1 may not change"));
  for (std::uint32_t at : {0x60u, 0x64u, 0x7cu}) {
    CAPTURE(at);
    auto w = p.write_merge(at, 4, 0xffffffff, 0x12345678);
    REQUIRE(w);
    CHECK_FALSE(w->any);
  }
  for (std::uint32_t at : {0x54u, 0x5cu, 0x84u, 0x88u, 0xfcu}) {
    CAPTURE(at);
    auto w = p.write_merge(at, 4, 0xcafef00d, 0x12345678);
    REQUIRE(w);
    CHECK(w->any);
    CHECK(w->value == 0xcafef00d);
  }
  auto header = p.write_merge(0x80, 4, 0xffffffff, 0x00084809);  // ID, next, length kept
  REQUIRE(header);
  CHECK(header->value == 0xff084809);
}

TEST_CASE("ConfigPolicy: the MSI-X table location comes from the capability") {
  std::vector<std::uint8_t> c(256, 0);
  put(c, 0x06, 2, 0x0010);
  put(c, 0x34, 1, 0x40);
  put(c, 0x40, 2, 0x0011);
  put(c, 0x42, 2, 0x001f);      // 32 entries
  put(c, 0x44, 4, 0x00004003);  // BAR3 at 0x4000
  put(c, 0x48, 4, 0x00006003);
  const auto table = ConfigPolicy::build(c).msix_table();
  REQUIRE(table);
  CHECK(table->bar == 3);
  CHECK(table->offset == 0x4000);
  CHECK(table->length == 32 * 16);
}

TEST_CASE("ConfigPolicy: restore brings back writable bits only, never write-1-to-clear ones") {
  std::vector<std::uint8_t> c(256, 0);
  const ConfigPolicy p = ConfigPolicy::build(c);
  // Command+Status: saved memory space on, now I/O on and a status error bit set.
  auto v = p.restore_merge(0x04, 4, 0x00100002, 0x20100001);
  REQUIRE(v);
  CHECK(*v == 0x00100002);  // Command as saved; status read-only kept, its W1C bit written 0
  CHECK_FALSE(p.restore_merge(0x06, 2, 0x0010, 0x2010));  // nothing writable differs
  CHECK_FALSE(p.restore_merge(0x00, 4, 0x12345678, 0x87654321));
}
