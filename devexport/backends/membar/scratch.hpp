// membar's scratch unit (`scratch=on`): BAR4, a 4 KiB register BAR of plain registers.
// Internal to the membar backend; the rules are README.md's, the constants
// rpcie/membar_registers.hpp's.
//
// Contract:
//  - read()/write(): every access of width 1, 2, 4 or 8, naturally aligned inside the 4 KiB,
//    reads back what was stored there (little endian; a write stores the low `width` bytes
//    of `value`); anything else is EINVAL naming the access, and nothing changes. Unlike
//    BAR0 these are registers: never RMA, no bar_memory.
//  - power_on(): every byte back to zero (creation, reset, detach).
//  - Threading: called from the attachment's thread only (backend.hpp's mmio_* rule); no
//    lock of its own.
#pragma once

#include <array>
#include <cstdint>

#include "backend.hpp"
#include "rpcie/membar_registers.hpp"

namespace rpcie::dev::membar {

class Scratch {
 public:
  Result<std::uint64_t> read(std::uint64_t offset, unsigned width) const;
  Result<void> write(std::uint64_t offset, unsigned width, std::uint64_t value);
  void power_on() noexcept { bytes_.fill(0); }

 private:
  std::array<std::uint8_t, ::rpcie::membar::kScratchBarSize> bytes_{};
};

}  // namespace rpcie::dev::membar
