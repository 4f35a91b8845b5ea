// A real harness for the MMIO emulator: a PROT_NONE range stands for a BAR, a SIGSEGV
// handler calls instruction_emulate, and a fake device backed by an array records every
// access (load/store, offset, width, value) in order. Tests execute real instructions
// (inline asm, glibc) on the range.
#pragma once

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "emulator.hpp"

namespace rpcie::mmio::test {

inline constexpr std::size_t kBarBytes = 3 * 4096;
inline constexpr std::uint64_t kBarOffset = 0x10000;  // the range's first byte in the BAR
inline constexpr std::size_t kLogMax = 1 << 16;

struct Access {
  bool store;
  std::uint64_t offset;  // within the range (BAR offset - kBarOffset)
  unsigned width;
  std::uint64_t value;
};

class FakeBar final : public BarPort {
 public:
  bool load(std::uint64_t offset, unsigned width, std::uint64_t& value) noexcept override {
    value = 0;
    std::memcpy(&value, bytes + (offset - kBarOffset), width);
    record({false, offset - kBarOffset, width, value});
    if (fail) return false;
    return true;
  }
  bool store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept override {
    record({true, offset - kBarOffset, width, value});
    if (fail) return false;
    std::memcpy(bytes + (offset - kBarOffset), &value, width);
    return true;
  }
  void reset() noexcept { count.store(0); }
  std::size_t size() const noexcept { return count.load() > kLogMax ? kLogMax : count.load(); }

  std::uint8_t bytes[kBarBytes] = {};
  Access log[kLogMax] = {};
  std::atomic<std::size_t> count{0};
  std::atomic<bool> fail{false};

 private:
  void record(const Access& a) noexcept {
    const std::size_t i = count.fetch_add(1);
    if (i < kLogMax) log[i] = a;
  }
};

class OneRange final : public TrapLookup {
 public:
  const TrapRange* find(std::uintptr_t address) const noexcept override {
    return address - range.base < range.length ? &range : nullptr;
  }
  TrapRange range;
};

// The process-wide fixture: the PROT_NONE range, its fake device and the SIGSEGV handler.
struct Harness {
  std::uint8_t* bar = nullptr;
  FakeBar device;
  OneRange traps;
  std::atomic<FailMode> mode{FailMode::all_ones};
  std::atomic<unsigned> last_failed{0};  // Emulation::failed of the last `done` emulation
};
Harness& harness();
// Installs the SIGSEGV handler; every test calls it first (doctest installs its own crash
// handler around each test case).
void harness_arm();
inline FakeBar& device() { return harness().device; }
inline std::uint8_t* bar() { return harness().bar; }
// harness_arm, then the device's bytes set to `first + i * step` (byte i), its log cleared,
// failures off and FailMode::all_ones: the state each test starts from.
void device_fill(unsigned step, unsigned first);

// Arms the calling thread to survive a non-`done` emulation: the handler stores it and jumps
// back to the sigsetjmp in EXPECT_FAULT. Unarmed, any non-`done` outcome aborts the test.
struct Escape {
  sigjmp_buf jump;
  bool armed = false;
  Emulation emulation;
};
Escape& escape();

#define RPCIE_EXPECT_FAULT(statement)              \
  [&]() -> const ::rpcie::mmio::Emulation& {       \
    auto& escape_ = ::rpcie::mmio::test::escape(); \
    escape_.emulation = {};                        \
    if (sigsetjmp(escape_.jump, 1) == 0) {         \
      escape_.armed = true;                        \
      statement;                                   \
    }                                              \
    escape_.armed = false;                         \
    return escape_.emulation;                      \
  }()

// RFLAGS status bits, and the flags a test loads before an instruction (bit 1 is reserved 1).
inline constexpr std::uint64_t kStatus = 0x8d5;

}  // namespace rpcie::mmio::test
