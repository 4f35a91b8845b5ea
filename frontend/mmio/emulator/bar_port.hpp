// The two seams of the MMIO emulator (librpcie-mmio.so): where an emulated access goes
// (BarPort), and which address ranges are trapped register-BAR mappings (TrapLookup).
//
// Both are called from the SIGSEGV handler, on whichever thread faulted: implementations
// must be async-signal-safe (no allocation, no lock that interrupted code may hold, errno
// preserved) and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rpcie::mmio {

class BarPort {
 public:
  virtual ~BarPort() = default;
  // One access of exactly `width` bytes (1, 2, 4 or 8), naturally aligned, at `offset` in
  // the BAR. A store is posted: it may return before the device has it, but a later load on
  // the same port observes it (PCIe: a read does not pass earlier posted writes). false: the
  // access failed (refused width, link lost past its timeout); the emulator then applies
  // the failed-request rule (loads read all ones, stores are dropped, or SIGBUS).
  virtual bool load(std::uint64_t offset, unsigned width, std::uint64_t& value) noexcept = 0;
  virtual bool store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept = 0;
};

// A trapped range: [base, base + length) of the program's address space stands for BAR
// offsets [bar_offset, bar_offset + length) behind `port`.
struct TrapRange {
  std::uintptr_t base = 0;
  std::size_t length = 0;
  std::uint64_t bar_offset = 0;
  BarPort* port = nullptr;
};

class TrapLookup {
 public:
  virtual ~TrapLookup() = default;
  // The trapped range holding `address`, or null. The returned range stays valid until the
  // emulation of the current instruction ends.
  virtual const TrapRange* find(std::uintptr_t address) const noexcept = 0;
};

}  // namespace rpcie::mmio
