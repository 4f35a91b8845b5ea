// One logical memory access of an emulated instruction: `length` bytes (1..64) at an
// address that may lie on a trapped range, on ordinary memory, or across both.
//
// On a trapped range the bytes become BAR accesses through the range's port: naturally
// aligned pieces of 1, 2, 4 or 8 bytes, the widest that fit, in ascending order (what KVM
// does for a wide access; an aligned 1/2/4/8-byte access stays one access of its width).
// Ordinary memory is read or written directly (a bad address there faults inside the
// handler and ends the program, as the instruction itself would have).
//
// A failed BAR access (the port returned false) is counted; under FailMode::all_ones a load
// reads all ones and a store is dropped; under FailMode::sigbus the access stops and
// reports the failing address.
#pragma once

#include <cstdint>

#include "bar_port.hpp"
#include "emulator.hpp"

namespace rpcie::mmio {

class Bus {
 public:
  Bus(const TrapLookup& traps, FailMode mode) noexcept : traps_(traps), mode_(mode) {}

  // false only under FailMode::sigbus when a BAR access failed: failed_address() says where.
  bool load(std::uintptr_t address, unsigned length, std::uint8_t* out) noexcept;
  bool store(std::uintptr_t address, unsigned length, const std::uint8_t* in) noexcept;
  bool trapped(std::uintptr_t address) const noexcept { return traps_.find(address) != nullptr; }
  std::uintptr_t failed_address() const noexcept { return failed_address_; }
  // BAR accesses of this bus that failed (in either mode).
  unsigned failed_count() const noexcept { return failed_count_; }

 private:
  template <bool kStore>
  bool transfer(std::uintptr_t address, unsigned length, std::uint8_t* bytes) noexcept;
  template <bool kStore>
  bool bar_transfer(const TrapRange& range, std::uintptr_t address, unsigned length, std::uint8_t* bytes) noexcept;

  const TrapLookup& traps_;
  FailMode mode_;
  std::uintptr_t failed_address_ = 0;
  unsigned failed_count_ = 0;
};

// Little-endian packing of up to 8 bytes.
std::uint64_t bytes_value(const std::uint8_t* bytes, unsigned length) noexcept;
void value_bytes(std::uint64_t value, unsigned length, std::uint8_t* bytes) noexcept;

}  // namespace rpcie::mmio
