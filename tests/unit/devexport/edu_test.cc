// The edu backend against its spec (shared/EDU.md; QEMU hw/misc/edu.c), through the
// Backend interface only, with the fake DmaPort (a byte vector as the client's window) and
// IrqSink of tests/support. Asynchronous results are awaited by bounded polling.
#include "backends/edu/edu.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../../support/eventually.hpp"
#include "../../support/fake_device_ports.hpp"
#include "rpcie/deadline.hpp"

using namespace std::chrono_literals;
using rpcie::Deadline;
using rpcie::dev::Backend;
using rpcie::test::eventually;
using rpcie::test::FakeDmaPort;
using rpcie::test::FakeIrqSink;

namespace {

constexpr std::uint64_t kMiB = 1 << 20;
constexpr std::size_t kWindowSize = 64 * 1024;

// BAR0 registers.
constexpr std::uint64_t kId = 0x00;
constexpr std::uint64_t kLiveness = 0x04;
constexpr std::uint64_t kFactorial = 0x08;
constexpr std::uint64_t kStatus = 0x20;
constexpr std::uint64_t kIrqStatus = 0x24;
constexpr std::uint64_t kIrqRaise = 0x60;
constexpr std::uint64_t kIrqAck = 0x64;
constexpr std::uint64_t kDmaSrc = 0x80;
constexpr std::uint64_t kDmaDst = 0x88;
constexpr std::uint64_t kDmaCount = 0x90;
constexpr std::uint64_t kDmaCmd = 0x98;

constexpr std::uint64_t kStatusComputing = 0x01;
constexpr std::uint64_t kStatusIrqOnFactorial = 0x80;
constexpr std::uint64_t kIrqFactorial = 0x001;
constexpr std::uint64_t kIrqDma = 0x100;
constexpr std::uint64_t kCmdStart = 0x1;
constexpr std::uint64_t kCmdToHost = 0x2;
constexpr std::uint64_t kCmdIrq = 0x4;
constexpr std::uint64_t kBuffer = 0x40000;  // the device buffer's device address
constexpr std::uint64_t kBufferSize = 4096;

std::unique_ptr<Backend> edu_make(const std::map<std::string, std::string>& params = {}) {
  auto made = rpcie::dev::edu_create(params);
  if (!made) FAIL("edu_create: " << made.error().message);
  return std::move(*made);
}

std::uint64_t rd(Backend& dev, std::uint64_t offset, unsigned width = 4) {
  auto value = dev.mmio_read(0, offset, width);
  if (!value) FAIL("mmio_read 0x" << std::hex << offset << ": " << value.error().message);
  return *value;
}

void wr(Backend& dev, std::uint64_t offset, std::uint64_t value, unsigned width = 4) {
  auto done = dev.mmio_write(0, offset, width, value);
  if (!done) FAIL("mmio_write 0x" << std::hex << offset << ": " << done.error().message);
}

std::uint32_t cfg(Backend& dev, std::uint32_t offset, unsigned width = 4) {
  auto value = dev.config_read(offset, width);
  if (!value) FAIL("config_read 0x" << std::hex << offset << ": " << value.error().message);
  return *value;
}

void cfg_wr(Backend& dev, std::uint32_t offset, std::uint32_t value, unsigned width = 4) {
  auto done = dev.config_write(offset, width, value);
  if (!done) FAIL("config_write 0x" << std::hex << offset << ": " << done.error().message);
}

// Polls `done` every millisecond until it holds or `timeout` passes; the last poll's answer.
std::uint32_t factorial_run(Backend& dev, std::uint32_t n) {
  wr(dev, kFactorial, n);
  REQUIRE(eventually([&] { return (rd(dev, kStatus) & kStatusComputing) == 0; }));
  return static_cast<std::uint32_t>(rd(dev, kFactorial));
}

void dma_start(Backend& dev, std::uint64_t src, std::uint64_t dst, std::uint64_t count, std::uint64_t cmd) {
  wr(dev, kDmaSrc, src, 8);
  wr(dev, kDmaDst, dst, 8);
  wr(dev, kDmaCount, count, 8);
  wr(dev, kDmaCmd, cmd | kCmdStart, 8);
}

bool dma_done(Backend& dev) {
  return eventually([&] { return (rd(dev, kDmaCmd, 8) & kCmdStart) == 0; });
}

// One transfer to completion: host memory (IOVA) -> device buffer, or the other way.
void dma_to_device(Backend& dev, std::uint64_t iova, std::uint64_t device_address, std::uint64_t count,
                   std::uint64_t extra_cmd = 0) {
  dma_start(dev, iova, device_address, count, extra_cmd);
  REQUIRE(dma_done(dev));
}

void dma_to_host(Backend& dev, std::uint64_t device_address, std::uint64_t iova, std::uint64_t count,
                 std::uint64_t extra_cmd = 0) {
  dma_start(dev, device_address, iova, count, kCmdToHost | extra_cmd);
  REQUIRE(dma_done(dev));
}

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(byte(rng));
  return out;
}

std::uint64_t checksum(const std::uint8_t* data, std::size_t n) {  // FNV-1a, 64-bit
  std::uint64_t h = 0xcbf29ce484222325;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 0x100000001b3;
  return h;
}

void window_put(FakeDmaPort& port, std::uint64_t iova, const std::vector<std::uint8_t>& bytes) {
  std::lock_guard guard(port.lock);
  std::copy(bytes.begin(), bytes.end(), port.window.begin() + static_cast<std::ptrdiff_t>(iova));
}

std::vector<std::uint8_t> window_get(FakeDmaPort& port, std::uint64_t iova, std::size_t n) {
  std::lock_guard guard(port.lock);
  auto first = port.window.begin() + static_cast<std::ptrdiff_t>(iova);
  return {first, first + static_cast<std::ptrdiff_t>(n)};
}

// The device buffer as the driver can see it: copied out to a scratch place in the window.
std::vector<std::uint8_t> buffer_get(Backend& dev, FakeDmaPort& port) {
  constexpr std::uint64_t kScratch = kWindowSize - kBufferSize;
  dma_to_host(dev, kBuffer, kScratch, kBufferSize);
  return window_get(port, kScratch, kBufferSize);
}

// Random bytes into the whole device buffer, by DMA from IOVA 0; returns them.
std::vector<std::uint8_t> buffer_fill_random(Backend& dev, FakeDmaPort& port, unsigned seed) {
  auto data = random_bytes(kBufferSize, seed);
  window_put(port, 0, data);
  dma_to_device(dev, 0, kBuffer, kBufferSize);
  return data;
}

void check_power_on_registers(Backend& dev) {
  CHECK(rd(dev, kId) == 0x010000ed);
  CHECK(rd(dev, kLiveness) == 0);
  CHECK(rd(dev, kFactorial) == 0);
  CHECK(rd(dev, kStatus) == 0);
  CHECK(rd(dev, kIrqStatus) == 0);
  for (std::uint64_t reg : {kDmaSrc, kDmaDst, kDmaCount, kDmaCmd}) CHECK(rd(dev, reg, 8) == 0);
  CHECK(cfg(dev, 0x04, 2) == 0);       // command
  CHECK(cfg(dev, 0x10) == 0);          // BAR0
  CHECK(cfg(dev, 0x3c, 1) == 0);       // interrupt line
  CHECK(cfg(dev, 0x42, 2) == 0x0080);  // MSI control: disabled
  CHECK(cfg(dev, 0x44) == 0);          // MSI address
  CHECK(cfg(dev, 0x4c, 2) == 0);       // MSI data
}

// A transport that takes `hold` for each call: lets a test act while a DMA call is in flight.
class SlowDmaPort : public FakeDmaPort {
 public:
  using FakeDmaPort::FakeDmaPort;
  rpcie::Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline deadline) override {
    CallScope scope(*this);
    return FakeDmaPort::dma_read(iova, into, deadline);
  }
  rpcie::Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline deadline) override {
    CallScope scope(*this);
    return FakeDmaPort::dma_write(iova, from, deadline);
  }
  std::atomic<std::chrono::milliseconds> hold{300ms};
  std::atomic<bool> entered{false};  // a call has begun
  std::atomic<bool> in_call{false};

 private:
  struct CallScope {
    explicit CallScope(SlowDmaPort& port) : port_(port) {
      port_.in_call = true;
      port_.entered = true;
      std::this_thread::sleep_for(port_.hold.load());  // the transport's latency, not a sync
    }
    ~CallScope() { port_.in_call = false; }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    SlowDmaPort& port_;
  };
};

// An attached device with a 64 KiB window of type Port; `delay` as the parameter, none if
// empty. Detaches when it ends, unless the test destroyed the device itself.
template <class Port = FakeDmaPort>
struct Attached {
  explicit Attached(const std::string& delay = {})
      : dev(edu_make(delay.empty() ? std::map<std::string, std::string>{}
                                   : std::map<std::string, std::string>{{"delay", delay}})) {
    REQUIRE(dev->attach(&port, &irq));
  }
  ~Attached() {
    if (dev) dev->detach();
  }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

  Port port{kWindowSize};
  FakeIrqSink irq;
  std::unique_ptr<Backend> dev;
};

// Records, at each interrupt, whether the window already held the bytes expected at `iova`.
class WindowCheckingIrqSink : public FakeIrqSink {
 public:
  WindowCheckingIrqSink(FakeDmaPort& port, std::uint64_t iova, std::vector<std::uint8_t> expected)
      : port_(port), iova_(iova), expected_(std::move(expected)) {}
  void irq_raise(std::uint16_t vector) override {
    if (window_get(port_, iova_, expected_.size()) != expected_) ++raised_before_data;
    FakeIrqSink::irq_raise(vector);
  }
  std::atomic<int> raised_before_data{0};

 private:
  FakeDmaPort& port_;
  std::uint64_t iova_;
  std::vector<std::uint8_t> expected_;
};

}  // namespace

// ---- identity and config space ----

TEST_CASE("edu: identity, region, vector and DMA use are QEMU's edu") {
  auto dev = edu_make();
  CHECK(dev->name() == "edu");
  const auto& id = dev->identity();
  CHECK(id.vendor == 0x1234);
  CHECK(id.device == 0x11e8);
  CHECK(id.revision == 0x10);
  CHECK(id.class_code == 0x00ff00);
  CHECK(id.subsystem_vendor == 0x1af4);
  CHECK(id.subsystem_device == 0x1100);
  auto regions = dev->regions();
  REQUIRE(regions.size() == 1);
  CHECK(regions[0].bar == 0);
  CHECK(regions[0].size == kMiB);
  CHECK(regions[0].kind == rpcie::dev::RegionKind::registers);
  CHECK_FALSE(regions[0].is_64bit);
  CHECK_FALSE(regions[0].readonly);
  CHECK(dev->vector_count() == 1);
  CHECK(dev->uses_dma());
  CHECK(dev->bar_memory(0).empty());
}

TEST_CASE("edu: config header holds the identity, header type 0, capability list and pin A") {
  auto dev = edu_make();
  CHECK(cfg(*dev, 0x00, 2) == 0x1234);
  CHECK(cfg(*dev, 0x02, 2) == 0x11e8);
  CHECK(cfg(*dev, 0x00) == 0x11e81234);
  CHECK(cfg(*dev, 0x04, 2) == 0);             // command: all off at power-on
  CHECK((cfg(*dev, 0x06, 2) & 0x0010) != 0);  // status: capabilities list
  CHECK(cfg(*dev, 0x08, 1) == 0x10);          // revision
  CHECK(cfg(*dev, 0x08) == 0x00ff0010);       // class 0x00ff00 above the revision
  CHECK(cfg(*dev, 0x0e, 1) == 0x00);          // header type 0, single function
  for (std::uint32_t bar = 0x14; bar <= 0x24; bar += 4) CHECK(cfg(*dev, bar) == 0);
  CHECK(cfg(*dev, 0x2c, 2) == 0x1af4);
  CHECK(cfg(*dev, 0x2e, 2) == 0x1100);
  CHECK(cfg(*dev, 0x30) == 0);        // no expansion ROM
  CHECK(cfg(*dev, 0x34, 1) == 0x40);  // capability pointer
  CHECK(cfg(*dev, 0x3d, 1) == 0x01);  // interrupt pin A
  CHECK(cfg(*dev, 0x100) == 0);       // no extended capabilities
  CHECK(cfg(*dev, 0xffc) == 0);
}

TEST_CASE("edu: BAR0 size probing reports 1 MiB of 32-bit non-prefetchable memory") {
  auto dev = edu_make();
  CHECK(cfg(*dev, 0x10) == 0);  // memory, 32-bit, not prefetchable; no address yet
  cfg_wr(*dev, 0x10, 0xffffffff);
  CHECK(cfg(*dev, 0x10) == 0xfff00000);  // ~(1 MiB - 1)
  cfg_wr(*dev, 0x10, 0xfe10000f);        // an address; the type bits stay
  CHECK(cfg(*dev, 0x10) == 0xfe100000);
  cfg_wr(*dev, 0x12, 0xabcd, 2);  // the upper half alone
  CHECK(cfg(*dev, 0x10) == 0xabc00000);
  cfg_wr(*dev, 0x14, 0xffffffff);  // no BAR1: hardwired 0
  CHECK(cfg(*dev, 0x14) == 0);
}

TEST_CASE("edu: MSI capability at 0x40 with one 64-bit vector, enable/address/data writable") {
  auto dev = edu_make();
  CHECK(cfg(*dev, 0x40, 1) == 0x05);    // MSI
  CHECK(cfg(*dev, 0x41, 1) == 0x00);    // the last capability
  CHECK(cfg(*dev, 0x42, 2) == 0x0080);  // 64-bit, one vector, disabled, no masking
  cfg_wr(*dev, 0x42, 0xffff, 2);
  CHECK(cfg(*dev, 0x42, 2) == 0x0081);  // only the enable bit is writable
  cfg_wr(*dev, 0x44, 0xfee01003);
  CHECK(cfg(*dev, 0x44) == 0xfee01000);  // dword-aligned address
  cfg_wr(*dev, 0x48, 0x12345678);
  CHECK(cfg(*dev, 0x48) == 0x12345678);
  cfg_wr(*dev, 0x4c, 0xffff4021);
  CHECK(cfg(*dev, 0x4c, 2) == 0x4021);  // 16-bit data
  CHECK(cfg(*dev, 0x4e, 2) == 0);
  cfg_wr(*dev, 0x40, 0xffffffff);  // id, next pointer stay; control enable only
  CHECK(cfg(*dev, 0x40) == 0x00810005);
  cfg_wr(*dev, 0x42, 0, 2);
  CHECK(cfg(*dev, 0x42, 2) == 0x0080);
}

TEST_CASE("edu: config writes change only the writable bits") {
  auto dev = edu_make();
  cfg_wr(*dev, 0x04, 0xffff, 2);
  CHECK(cfg(*dev, 0x04, 2) == 0x0546);  // memory, master, parity, SERR, INTx disable
  cfg_wr(*dev, 0x04, 0x0006, 2);
  CHECK(cfg(*dev, 0x04, 2) == 0x0006);
  cfg_wr(*dev, 0x00, 0xffffffff);  // IDs are read-only
  CHECK(cfg(*dev, 0x00) == 0x11e81234);
  cfg_wr(*dev, 0x06, 0xffff, 2);  // status: nothing to clear, cap bit stays
  CHECK(cfg(*dev, 0x06, 2) == 0x0010);
  cfg_wr(*dev, 0x08, 0xffffffff);  // revision, class
  CHECK(cfg(*dev, 0x08) == 0x00ff0010);
  cfg_wr(*dev, 0x2c, 0xffffffff);
  CHECK(cfg(*dev, 0x2c) == 0x11001af4);
  cfg_wr(*dev, 0x34, 0xff, 1);
  CHECK(cfg(*dev, 0x34, 1) == 0x40);
  cfg_wr(*dev, 0x3c, 0xffffff0b);  // interrupt line writable, pin read-only
  CHECK(cfg(*dev, 0x3c) == 0x0000010b);
  cfg_wr(*dev, 0x0c, 0x10, 1);  // cache line size
  CHECK(cfg(*dev, 0x0c, 1) == 0x10);
  cfg_wr(*dev, 0x800, 0xffffffff);  // nothing in extended space
  CHECK(cfg(*dev, 0x800) == 0);
}

TEST_CASE("edu: config accesses of a bad width or place are EINVAL") {
  auto dev = edu_make();
  struct Access {
    std::uint32_t offset;
    unsigned width;
  };
  for (const auto& a : {Access{0, 0}, Access{0, 3}, Access{0, 8}, Access{1, 2}, Access{2, 4}, Access{0x42, 4},
                        Access{0x1000, 1}, Access{0xffe, 4}, Access{0xffffffff, 1}}) {
    CAPTURE(a.offset);
    CAPTURE(a.width);
    auto value = dev->config_read(a.offset, a.width);
    REQUIRE_FALSE(value);
    CHECK(value.error().code == EINVAL);
    auto done = dev->config_write(a.offset, a.width, 0);
    REQUIRE_FALSE(done);
    CHECK(done.error().code == EINVAL);
  }
}

// ---- BAR0 registers ----

TEST_CASE("edu: ID register reads 0x010000ed and ignores writes") {
  auto dev = edu_make();
  CHECK(rd(*dev, kId) == 0x010000ed);
  wr(*dev, kId, 0x12345678);
  CHECK(rd(*dev, kId) == 0x010000ed);
}

TEST_CASE("edu: liveness register returns the inverse of the last write") {
  auto dev = edu_make();
  CHECK(rd(*dev, kLiveness) == 0);
  wr(*dev, kLiveness, 0x12345678);
  CHECK(rd(*dev, kLiveness) == 0xedcba987);
  wr(*dev, kLiveness, 0);
  CHECK(rd(*dev, kLiveness) == 0xffffffff);
  wr(*dev, kLiveness, 0xffffffff);
  CHECK(rd(*dev, kLiveness) == 0);
}

TEST_CASE("edu: factorial computes n! wrapping at 32 bits, with no interrupt by default") {
  Attached<> a;
  struct Case {
    std::uint32_t n;
    std::uint32_t factorial;
  };
  for (const auto& c :
       {Case{0, 1}, Case{1, 1}, Case{5, 120}, Case{10, 3628800}, Case{12, 479001600}, Case{13, 1932053504},
        Case{20, 2192834560}, Case{33, 2147483648}, Case{34, 0}, Case{100, 0}, Case{0xffffffff, 0}}) {
    CAPTURE(c.n);
    CHECK(factorial_run(*a.dev, c.n) == c.factorial);
  }
  CHECK(rd(*a.dev, kIrqStatus) == 0);
  CHECK(a.irq.count(0) == 0);
}

TEST_CASE("edu: factorial raises interrupt 0x01 when status bit 0x80 is set") {
  Attached<> a;
  wr(*a.dev, kStatus, kStatusIrqOnFactorial);
  wr(*a.dev, kFactorial, 6);
  CHECK(a.irq.wait(0, 1) == 1);
  CHECK(rd(*a.dev, kFactorial) == 720);
  CHECK(rd(*a.dev, kStatus) == kStatusIrqOnFactorial);
  CHECK(rd(*a.dev, kIrqStatus) == kIrqFactorial);
  wr(*a.dev, kIrqAck, kIrqFactorial);
  CHECK(rd(*a.dev, kIrqStatus) == 0);
  CHECK(factorial_run(*a.dev, 3) == 6);
  CHECK(a.irq.wait(0, 2) == 2);
}

TEST_CASE("edu: factorial works without attach and delivers no interrupt") {
  auto dev = edu_make();
  wr(*dev, kStatus, kStatusIrqOnFactorial);
  CHECK(factorial_run(*dev, 7) == 5040);
  CHECK(rd(*dev, kIrqStatus) == kIrqFactorial);  // the bit is there; no sink to tell
}

TEST_CASE("edu: status shows computing, and factorial writes are ignored while busy") {
  Attached<> a("200ms");
  wr(*a.dev, kFactorial, 5);
  CHECK((rd(*a.dev, kStatus) & kStatusComputing) != 0);
  wr(*a.dev, kFactorial, 6);           // ignored: the unit is busy
  CHECK(rd(*a.dev, kFactorial) == 5);  // QEMU shows n until n! is ready
  CHECK(eventually([&] { return (rd(*a.dev, kStatus) & kStatusComputing) == 0; }));
  CHECK(rd(*a.dev, kFactorial) == 120);
  CHECK(factorial_run(*a.dev, 4) == 24);  // idle again: writes are taken
}

TEST_CASE("edu: status bit 0x01 is read-only and bit 0x80 read-write") {
  auto dev = edu_make();
  wr(*dev, kStatus, 0xffffffff);
  CHECK(rd(*dev, kStatus) == kStatusIrqOnFactorial);
  wr(*dev, kStatus, kStatusComputing);
  CHECK(rd(*dev, kStatus) == 0);
}

TEST_CASE("edu: interrupt raise ORs into the status and raises vector 0; acknowledge clears bits") {
  Attached<> a;
  wr(*a.dev, kIrqRaise, 0x10);
  CHECK(a.irq.count(0) == 1);  // raised within the write: no worker involved
  CHECK(rd(*a.dev, kIrqStatus) == 0x10);
  wr(*a.dev, kIrqRaise, 0x03);
  CHECK(a.irq.count(0) == 2);
  CHECK(rd(*a.dev, kIrqStatus) == 0x13);
  wr(*a.dev, kIrqAck, 0x11);
  CHECK(rd(*a.dev, kIrqStatus) == 0x02);
  wr(*a.dev, kIrqAck, 0xffffffff);
  CHECK(rd(*a.dev, kIrqStatus) == 0);
  wr(*a.dev, kIrqStatus, 0x5);  // read-only
  CHECK(rd(*a.dev, kIrqStatus) == 0);
  wr(*a.dev, kIrqRaise, 0);  // nothing pending: nothing to raise
  CHECK(a.irq.count(0) == 2);
}

// ---- DMA ----

TEST_CASE("edu: DMA round trip host -> device -> host keeps random data") {
  Attached<> a;
  const auto data = random_bytes(kBufferSize, 1);
  window_put(a.port, 0x1000, data);
  dma_to_device(*a.dev, 0x1000, kBuffer, kBufferSize, kCmdIrq);
  dma_to_host(*a.dev, kBuffer, 0x6000, kBufferSize, kCmdIrq);
  CHECK(checksum(window_get(a.port, 0x6000, kBufferSize).data(), kBufferSize) == checksum(data.data(), kBufferSize));
  CHECK(window_get(a.port, 0x6000, kBufferSize) == data);
  CHECK(a.irq.wait(0, 2) == 2);
  CHECK(rd(*a.dev, kIrqStatus) == kIrqDma);
  CHECK(rd(*a.dev, kDmaCmd, 8) == (kCmdToHost | kCmdIrq));  // the start bit cleared, the rest stays

  // Partial, unaligned pieces inside the buffer.
  const auto piece = random_bytes(100, 2);
  window_put(a.port, 0x2001, piece);
  dma_to_device(*a.dev, 0x2001, kBuffer + 0x123, piece.size());
  dma_to_host(*a.dev, kBuffer + 0x123, 0x9003, piece.size());
  CHECK(window_get(a.port, 0x9003, piece.size()) == piece);
  dma_to_host(*a.dev, kBuffer + kBufferSize - 1, 0xa000, 1);  // the last byte
  CHECK(window_get(a.port, 0xa000, 1)[0] == data.back());
  CHECK(a.irq.count(0) == 2);  // no interrupt bit in the later commands
}

TEST_CASE("edu: DMA done interrupt 0x100 is raised only after the bytes are in the window") {
  FakeDmaPort port(kWindowSize);
  const auto data = random_bytes(kBufferSize, 3);
  WindowCheckingIrqSink irq(port, 0x8000, data);
  auto dev = edu_make();
  REQUIRE(dev->attach(&port, &irq));
  window_put(port, 0x1000, data);
  dma_to_device(*dev, 0x1000, kBuffer, kBufferSize);
  dma_start(*dev, kBuffer, 0x8000, kBufferSize, kCmdToHost | kCmdIrq);
  REQUIRE(irq.wait(0, 1) == 1);
  CHECK(irq.raised_before_data == 0);
  CHECK(rd(*dev, kIrqStatus) == kIrqDma);
  CHECK(dma_done(*dev));
  dev->detach();
}

TEST_CASE("edu: DMA with the device side outside the buffer is not performed") {
  Attached<> a;
  const auto data = buffer_fill_random(*a.dev, a.port, 4);
  const auto window_before = window_get(a.port, 0, kWindowSize);
  const int reads = a.port.reads;
  const int writes = a.port.writes;

  struct Bad {
    std::uint64_t device_address;
    std::uint64_t count;
  };
  for (const auto& b : {Bad{kBuffer - 16, 32}, Bad{kBuffer + kBufferSize - 16, 32}, Bad{kBuffer, kBufferSize + 1},
                        Bad{kBuffer + kBufferSize, 1}, Bad{0, 16}, Bad{UINT64_MAX - 8, 32}, Bad{kBuffer, UINT64_MAX}}) {
    CAPTURE(b.device_address);
    CAPTURE(b.count);
    dma_to_device(*a.dev, 0x100, b.device_address, b.count, kCmdIrq);
    dma_to_host(*a.dev, b.device_address, 0x100, b.count, kCmdIrq);
  }
  CHECK(a.port.reads == reads);  // not a byte moved either way
  CHECK(a.port.writes == writes);
  CHECK(window_get(a.port, 0, kWindowSize) == window_before);
  CHECK(buffer_get(*a.dev, a.port) == data);
  // Each command still completes, interrupt included (QEMU's model completes them too).
  CHECK(a.irq.wait(0, 14) == 14);
  CHECK(rd(*a.dev, kIrqStatus) == kIrqDma);
}

TEST_CASE("edu: DMA with the host side outside the window is not performed") {
  Attached<> a;
  const auto data = buffer_fill_random(*a.dev, a.port, 5);
  const auto window_before = window_get(a.port, 0, kWindowSize);

  for (std::uint64_t iova : {kWindowSize - 16, std::uint64_t{kWindowSize}, std::uint64_t{1} << 40, UINT64_MAX - 8}) {
    CAPTURE(iova);
    dma_to_device(*a.dev, iova, kBuffer, 32);
    dma_to_host(*a.dev, kBuffer, iova, 32);
  }
  CHECK(window_get(a.port, 0, kWindowSize) == window_before);
  CHECK(buffer_get(*a.dev, a.port) == data);
  CHECK(rd(*a.dev, kId) == 0x010000ed);  // still alive
}

TEST_CASE("edu: DMA without attach is not performed") {
  auto dev = edu_make();
  dma_start(*dev, 0, kBuffer, 64, kCmdIrq);
  CHECK(dma_done(*dev));
  CHECK(rd(*dev, kIrqStatus) == kIrqDma);
  // The buffer stayed zero: attach now and look.
  FakeDmaPort port(kWindowSize);
  FakeIrqSink irq;
  std::fill(port.window.begin(), port.window.end(), std::uint8_t{0xaa});
  REQUIRE(dev->attach(&port, &irq));
  CHECK(buffer_get(*dev, port) == std::vector<std::uint8_t>(kBufferSize, 0));
  dev->detach();
}

TEST_CASE("edu: DMA registers ignore writes while a transfer runs") {
  Attached<> a("200ms");
  const auto data = random_bytes(64, 6);
  window_put(a.port, 0x100, data);
  dma_start(*a.dev, 0x100, kBuffer, 64, 0);
  CHECK((rd(*a.dev, kDmaCmd, 8) & kCmdStart) != 0);  // reads 1 until done
  wr(*a.dev, kDmaSrc, 0x200, 8);
  wr(*a.dev, kDmaDst, kBuffer + 0x200, 8);
  wr(*a.dev, kDmaCount, 8, 8);
  wr(*a.dev, kDmaCmd, kCmdStart | kCmdToHost | kCmdIrq, 8);
  wr(*a.dev, kDmaSrc, 0x300);  // 4-byte writes too
  CHECK(rd(*a.dev, kDmaSrc, 8) == 0x100);
  CHECK(rd(*a.dev, kDmaDst, 8) == kBuffer);
  CHECK(rd(*a.dev, kDmaCount, 8) == 64);
  CHECK(rd(*a.dev, kDmaCmd, 8) == kCmdStart);
  REQUIRE(dma_done(*a.dev));
  CHECK(rd(*a.dev, kDmaCmd, 8) == 0);
  CHECK(a.port.reads == 1);
  CHECK(a.port.writes == 0);  // the ignored to-host command never ran
  CHECK(a.irq.count(0) == 0);
  wr(*a.dev, kDmaSrc, 0x200, 8);  // idle again: writes are taken
  CHECK(rd(*a.dev, kDmaSrc, 8) == 0x200);
  std::vector<std::uint8_t> expected(kBufferSize, 0);
  std::copy(data.begin(), data.end(), expected.begin());
  CHECK(buffer_get(*a.dev, a.port) == expected);
}

TEST_CASE("edu: a DMA command without the start bit is ignored") {
  Attached<> a;
  wr(*a.dev, kDmaCmd, kCmdToHost | kCmdIrq, 8);
  CHECK(rd(*a.dev, kDmaCmd, 8) == 0);
  dma_to_host(*a.dev, kBuffer, 0, 8, kCmdIrq);
  CHECK(rd(*a.dev, kDmaCmd, 8) == (kCmdToHost | kCmdIrq));
  wr(*a.dev, kDmaCmd, 0, 8);  // QEMU drops the whole write
  CHECK(rd(*a.dev, kDmaCmd, 8) == (kCmdToHost | kCmdIrq));
  CHECK(a.port.writes == 1);
}

TEST_CASE("edu: 4-byte DMA register accesses reach the low half; +4 offsets do not decode") {
  auto dev = edu_make();
  for (std::uint64_t reg : {kDmaSrc, kDmaDst, kDmaCount}) {
    CAPTURE(reg);
    wr(*dev, reg, 0x1122334455667788, 8);
    CHECK(rd(*dev, reg, 8) == 0x1122334455667788);
    CHECK(rd(*dev, reg, 4) == 0x55667788);
    CHECK(rd(*dev, reg + 4, 4) == 0xffffffff);
    wr(*dev, reg + 4, 0xaabbccdd);  // ignored
    CHECK(rd(*dev, reg, 8) == 0x1122334455667788);
    wr(*dev, reg, 0xaabbccdd);  // zero-extends, as QEMU's model does
    CHECK(rd(*dev, reg, 8) == 0xaabbccdd);
  }
  CHECK(rd(*dev, kDmaCmd + 4, 4) == 0xffffffff);
}

// ---- access rules ----

TEST_CASE("edu: accesses of an illegal width, misaligned or outside BAR0 are EINVAL") {
  auto dev = edu_make();
  struct Access {
    std::uint8_t bar;
    std::uint64_t offset;
    unsigned width;
  };
  for (const auto& a : {Access{0, 0, 0}, Access{0, 0, 3}, Access{0, 0, 16}, Access{0, 0x80, 5},          // widths
                        Access{0, 0x02, 4}, Access{0, 0x81, 4}, Access{0, 0x84, 8}, Access{0, 0x01, 2},  // alignment
                        Access{0, 0x07, 8}, Access{0, kMiB, 1}, Access{0, kMiB, 4}, Access{0, kMiB + 8, 8},  // bounds
                        Access{0, UINT64_MAX - 7, 8}, Access{1, 0, 4}, Access{5, 0, 4}, Access{6, 0, 4}}) {
    CAPTURE(a.bar);
    CAPTURE(a.offset);
    CAPTURE(a.width);
    auto value = dev->mmio_read(a.bar, a.offset, a.width);
    REQUIRE_FALSE(value);
    CHECK(value.error().code == EINVAL);
    auto done = dev->mmio_write(a.bar, a.offset, a.width, 0);
    REQUIRE_FALSE(done);
    CHECK(done.error().code == EINVAL);
  }
  CHECK(rd(*dev, kMiB - 4) == 0xffffffff);  // the last dword is inside
}

TEST_CASE("edu: legal widths the device does not decode read all-ones and ignore writes") {
  Attached<> a;
  // Below 0x80 only 4-byte accesses decode.
  for (std::uint64_t reg : {kId, kLiveness, kFactorial, kStatus, kIrqStatus, kIrqRaise}) {
    CAPTURE(reg);
    CHECK(rd(*a.dev, reg, 1) == 0xff);
    CHECK(rd(*a.dev, reg, 2) == 0xffff);
    CHECK(rd(*a.dev, reg + 2, 2) == 0xffff);
    if (reg % 8 == 0) CHECK(rd(*a.dev, reg, 8) == UINT64_MAX);
  }
  wr(*a.dev, kLiveness, 0x1234, 2);
  wr(*a.dev, kLiveness, 0x12, 1);
  wr(*a.dev, kFactorial, 5, 8);
  wr(*a.dev, kFactorial, 5, 2);
  wr(*a.dev, kStatus, kStatusIrqOnFactorial, 1);
  wr(*a.dev, kIrqRaise, 1, 2);
  wr(*a.dev, kIrqRaise, 1, 1);
  // From 0x80 on 4 and 8 bytes decode, 1 and 2 do not.
  for (std::uint64_t reg : {kDmaSrc, kDmaDst, kDmaCount, kDmaCmd}) {
    CAPTURE(reg);
    CHECK(rd(*a.dev, reg, 1) == 0xff);
    CHECK(rd(*a.dev, reg, 2) == 0xffff);
    wr(*a.dev, reg, 0x1, 1);
    wr(*a.dev, reg, 0x1, 2);
  }
  check_power_on_registers(*a.dev);
  CHECK(a.irq.count(0) == 0);
}

TEST_CASE("edu: undefined offsets read all-ones and ignore writes") {
  Attached<> a;
  for (std::uint64_t offset : std::initializer_list<std::uint64_t>{0x0c, 0x10, 0x1c, 0x28, 0x5c, 0x68, 0x7c, 0xa0, 0xfc,
                                                                   0x100, kBuffer, kMiB - 4}) {
    CAPTURE(offset);
    CHECK(rd(*a.dev, offset) == 0xffffffff);
    wr(*a.dev, offset, 0x1);
    CHECK(rd(*a.dev, offset) == 0xffffffff);
  }
  for (std::uint64_t offset : std::initializer_list<std::uint64_t>{0xa0, 0xa8, kBuffer, kMiB - 8}) {
    CAPTURE(offset);
    CHECK(rd(*a.dev, offset, 8) == UINT64_MAX);
    wr(*a.dev, offset, 0x1, 8);
  }
  CHECK(rd(*a.dev, kIrqRaise) == 0xffffffff);  // write-only registers
  CHECK(rd(*a.dev, kIrqAck) == 0xffffffff);
  check_power_on_registers(*a.dev);
  CHECK(a.irq.count(0) == 0);
  CHECK(a.port.reads + a.port.writes == 0);
}

TEST_CASE("edu: only the DMA command register is a doorbell") {
  auto dev = edu_make();
  CHECK(dev->mmio_write_is_doorbell(0, kDmaCmd));
  for (std::uint64_t offset : {kId, kLiveness, kFactorial, kStatus, kIrqRaise, kIrqAck, kDmaSrc, kDmaDst, kDmaCount,
                               kDmaCmd + 4, std::uint64_t{0xa0}}) {
    CAPTURE(offset);
    CHECK_FALSE(dev->mmio_write_is_doorbell(0, offset));
  }
  CHECK_FALSE(dev->mmio_write_is_doorbell(1, kDmaCmd));
}

// ---- parameters ----

TEST_CASE("edu: bad parameters are EINVAL naming the key or the value") {
  struct Bad {
    std::string key;
    std::string value;
    std::string named;
  };
  for (const auto& b : {Bad{"dma", "mirror", "dma"}, Bad{"foo", "1", "foo"}, Bad{"Delay", "1s", "Delay"},
                        Bad{"delay", "abc", "abc"}, Bad{"delay", "", "delay"}, Bad{"delay", "-1s", "-1s"},
                        Bad{"delay", "100000s", "100000s"}, Bad{"delay", "10 parsecs", "10 parsecs"}}) {
    CAPTURE(b.key);
    CAPTURE(b.value);
    auto made = rpcie::dev::edu_create({{b.key, b.value}});
    REQUIRE_FALSE(made);
    CHECK(made.error().code == EINVAL);
    CHECK(made.error().message.find(b.named) != std::string::npos);
    CHECK(made.error().message.find(b.key) != std::string::npos);
  }
  for (const char* good : {"0", "250us", "10ms", "1.5s"}) {
    CAPTURE(good);
    CHECK(rpcie::dev::edu_create({{"delay", good}}));
  }
}

// ---- lifecycle ----

TEST_CASE("edu: detach during a delayed job returns promptly and leaves the power-on state") {
  Attached<> a("10s");
  Backend& dev = *a.dev;
  wr(dev, kLiveness, 1);
  cfg_wr(dev, 0x04, 0x0006, 2);
  cfg_wr(dev, 0x10, 0xfe000000);
  cfg_wr(dev, 0x42, 1, 2);
  wr(dev, kStatus, kStatusIrqOnFactorial);
  wr(dev, kFactorial, 10);
  dma_start(dev, 0, kBuffer, 64, kCmdIrq);
  REQUIRE((rd(dev, kStatus) & kStatusComputing) != 0);
  REQUIRE((rd(dev, kDmaCmd) & kCmdStart) != 0);

  const auto started = std::chrono::steady_clock::now();
  dev.detach();
  CHECK(std::chrono::steady_clock::now() - started < 1s);
  CHECK(a.irq.count(0) == 0);
  CHECK(a.port.reads == 0);
  check_power_on_registers(dev);
}

TEST_CASE("edu: after detach the next client finds a zeroed buffer") {
  Attached<> a;
  buffer_fill_random(*a.dev, a.port, 9);
  wr(*a.dev, kIrqRaise, 0x1);
  a.dev->detach();
  FakeDmaPort next(kWindowSize);
  std::fill(next.window.begin(), next.window.end(), std::uint8_t{0xaa});
  REQUIRE(a.dev->attach(&next, &a.irq));
  check_power_on_registers(*a.dev);
  CHECK(buffer_get(*a.dev, next) == std::vector<std::uint8_t>(kBufferSize, 0));
}

TEST_CASE("edu: reset restores the power-on state and cancels a job in progress") {
  Attached<> a("200ms");
  const auto data = buffer_fill_random(*a.dev, a.port, 7);
  wr(*a.dev, kLiveness, 1);
  wr(*a.dev, kIrqRaise, 0x42);
  cfg_wr(*a.dev, 0x04, 0x0006, 2);
  cfg_wr(*a.dev, 0x10, 0xfe000000);
  cfg_wr(*a.dev, 0x3c, 11, 1);
  cfg_wr(*a.dev, 0x42, 1, 2);
  cfg_wr(*a.dev, 0x44, 0xfee00000);
  cfg_wr(*a.dev, 0x4c, 0x41, 2);
  wr(*a.dev, kStatus, kStatusIrqOnFactorial);
  wr(*a.dev, kFactorial, 10);
  const int raised = a.irq.count(0);

  REQUIRE(a.dev->reset());
  check_power_on_registers(*a.dev);
  // The cancelled factorial never completes: no result, no interrupt.
  CHECK_FALSE(eventually([&] { return rd(*a.dev, kFactorial) != 0 || a.irq.count(0) != raised; }, 600ms));
  CHECK(buffer_get(*a.dev, a.port) == std::vector<std::uint8_t>(kBufferSize, 0));
  CHECK(factorial_run(*a.dev, 4) == 24);  // and the device works on
}

TEST_CASE("edu: reset cancels a delayed DMA: no byte moves") {
  Attached<> a("200ms");
  window_put(a.port, 0, random_bytes(64, 8));
  dma_start(*a.dev, 0, kBuffer, 64, kCmdIrq);
  REQUIRE(a.dev->reset());
  CHECK(rd(*a.dev, kDmaCmd, 8) == 0);
  CHECK_FALSE(eventually([&] { return a.port.reads != 0 || a.irq.count(0) != 0; }, 600ms));
}

TEST_CASE("edu: reset during a DMA call waits for it and drops its result") {
  Attached<SlowDmaPort> a;
  window_put(a.port, 0, random_bytes(64, 10));
  dma_start(*a.dev, 0, kBuffer, 64, kCmdIrq);
  REQUIRE(eventually([&] { return a.port.entered.load(); }));
  REQUIRE(a.dev->reset());
  CHECK_FALSE(a.port.in_call);  // no transfer of the old job lands after reset returned
  CHECK(rd(*a.dev, kDmaCmd, 8) == 0);
  CHECK(rd(*a.dev, kIrqStatus) == 0);
  CHECK_FALSE(eventually([&] { return a.irq.count(0) != 0; }, 300ms));
  a.port.hold = 0ms;
  CHECK(buffer_get(*a.dev, a.port) == std::vector<std::uint8_t>(kBufferSize, 0));
}

TEST_CASE("edu: detach during a DMA call returns only after the call ended") {
  Attached<SlowDmaPort> a;
  dma_start(*a.dev, kBuffer, 0, 64, kCmdToHost | kCmdIrq);
  REQUIRE(eventually([&] { return a.port.entered.load(); }));
  a.dev->detach();
  CHECK_FALSE(a.port.in_call);
  CHECK_FALSE(eventually([&] { return a.irq.count(0) != 0; }, 300ms));
  check_power_on_registers(*a.dev);
}

TEST_CASE("edu: attach twice is EBUSY; attach after detach works") {
  Attached<> a;
  auto again = a.dev->attach(&a.port, &a.irq);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == EBUSY);
  a.dev->detach();
  REQUIRE(a.dev->attach(&a.port, &a.irq));
  wr(*a.dev, kIrqRaise, 1);
  CHECK(a.irq.count(0) == 1);
  a.dev->detach();
  wr(*a.dev, kIrqRaise, 1);  // detached: the sink is no longer used
  CHECK(a.irq.count(0) == 1);
}

TEST_CASE("edu: destroying a device in the middle of a delayed job returns promptly") {
  Attached<> a("10s");
  wr(*a.dev, kFactorial, 10);
  dma_start(*a.dev, 0, kBuffer, 64, 0);
  a.dev->detach();
  wr(*a.dev, kFactorial, 10);  // and one started while detached
  const auto started = std::chrono::steady_clock::now();
  a.dev.reset();
  CHECK(std::chrono::steady_clock::now() - started < 1s);
}

// ---- inline work (Backend::work_inline_enable / work_run) ----

// Records the thread of each DMA call, so that a test can tell who ran the job.
class ThreadRecordingDmaPort : public FakeDmaPort {
 public:
  using FakeDmaPort::FakeDmaPort;
  rpcie::Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline deadline) override {
    record();
    return FakeDmaPort::dma_read(iova, into, deadline);
  }
  rpcie::Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline deadline) override {
    record();
    return FakeDmaPort::dma_write(iova, from, deadline);
  }
  std::vector<std::thread::id> threads;

 private:
  void record() {
    std::lock_guard guard(lock);
    threads.push_back(std::this_thread::get_id());
  }
};

TEST_CASE("edu: with inline work and no delay, a DMA runs in work_run() after the write, not inside it") {
  ThreadRecordingDmaPort port(kWindowSize);
  const auto data = random_bytes(kBufferSize, 11);
  WindowCheckingIrqSink irq(port, 0x8000, data);
  auto dev = edu_make();
  dev->work_inline_enable();
  REQUIRE(dev->attach(&port, &irq));
  window_put(port, 0x1000, data);
  dma_start(*dev, 0x1000, kBuffer, kBufferSize, kCmdIrq);
  // The write has completed; the transfer has not started, and no worker takes it.
  std::this_thread::sleep_for(20ms);
  CHECK((rd(*dev, kDmaCmd, 8) & kCmdStart) != 0);
  CHECK(port.reads == 0);
  CHECK(irq.count(0) == 0);
  dev->work_run();
  CHECK((rd(*dev, kDmaCmd, 8) & kCmdStart) == 0);
  CHECK(irq.count(0) == 1);
  CHECK(rd(*dev, kIrqStatus) == kIrqDma);
  wr(*dev, kIrqAck, kIrqDma);

  // Back to the host, with the window checked at the interrupt: data before the interrupt.
  // (The first interrupt found 0x8000 still empty, as it should: nothing went there yet.)
  REQUIRE(irq.raised_before_data == 1);
  dma_start(*dev, kBuffer, 0x8000, kBufferSize, kCmdToHost | kCmdIrq);
  CHECK(irq.count(0) == 1);
  dev->work_run();
  CHECK(irq.count(0) == 2);
  CHECK(irq.raised_before_data == 1);
  CHECK(window_get(port, 0x8000, kBufferSize) == data);
  REQUIRE(port.threads.size() == 2);
  CHECK(port.threads[0] == std::this_thread::get_id());
  CHECK(port.threads[1] == std::this_thread::get_id());
  dev->detach();
}

TEST_CASE("edu: with inline work and no delay, a factorial finishes in work_run() with its interrupt") {
  Attached<> a;
  a.dev->work_inline_enable();
  wr(*a.dev, kStatus, kStatusIrqOnFactorial);
  wr(*a.dev, kFactorial, 10);
  std::this_thread::sleep_for(20ms);
  CHECK((rd(*a.dev, kStatus) & kStatusComputing) != 0);
  CHECK(a.irq.count(0) == 0);
  a.dev->work_run();
  CHECK((rd(*a.dev, kStatus) & kStatusComputing) == 0);
  CHECK(rd(*a.dev, kFactorial) == 3628800);
  CHECK(a.irq.count(0) == 1);
  CHECK(rd(*a.dev, kIrqStatus) == kIrqFactorial);
}

TEST_CASE("edu: work_run() with nothing due, or without inline work enabled, does nothing") {
  Attached<> a("10s");
  a.dev->work_run();  // not enabled: the worker keeps every job
  wr(*a.dev, kFactorial, 5);
  a.dev->work_inline_enable();
  a.dev->work_run();  // delayed: not due for 10 s
  CHECK((rd(*a.dev, kStatus) & kStatusComputing) != 0);
  CHECK(a.irq.count(0) == 0);
}

TEST_CASE("edu: with inline work and a delay, the worker still finishes jobs on its own") {
  Attached<> a("2ms");
  a.dev->work_inline_enable();
  const auto data = buffer_fill_random(*a.dev, a.port, 12);  // awaits the worker's DMA
  CHECK(buffer_get(*a.dev, a.port) == data);
  CHECK(factorial_run(*a.dev, 6) == 720);
}
