// The edu function's PCI configuration space: a type-0 header and one MSI capability, with
// the writable bits of a real function (everything else reads back what it was). Internal
// to the edu backend. Not thread-safe: only the attachment's thread touches it.
#pragma once

#include <array>
#include <cstdint>

#include "backend.hpp"

namespace rpcie::dev::edu {

// QEMU's defaults for the device (subsystem IDs are QEMU's for every device it emulates).
inline constexpr Identity kIdentity{
    .vendor = 0x1234,
    .device = 0x11e8,
    .class_code = 0x00ff00,
    .subsystem_vendor = 0x1af4,
    .subsystem_device = 0x1100,
    .revision = 0x10,
};
inline constexpr std::uint64_t kBar0Size = std::uint64_t{1} << 20;
inline constexpr std::uint32_t kMsiCapOffset = 0x40;

class ConfigSpace {
 public:
  ConfigSpace() noexcept;  // power-on state

  // `width` 1, 2 or 4 at an offset aligned to it inside kConfigSize; EINVAL otherwise.
  Result<std::uint32_t> read(std::uint32_t offset, unsigned width) const;
  // Changes only the writable bits: command, cache line size, BAR0 address bits, interrupt
  // line, MSI enable/address/data. Writes to any other bit are ignored, as on hardware.
  Result<void> write(std::uint32_t offset, unsigned width, std::uint32_t value);
  void reset() noexcept;

 private:
  std::array<std::uint8_t, kConfigSize> bytes_{};
  std::array<std::uint8_t, kConfigSize> writable_{};  // per byte: the bits a write changes
};

}  // namespace rpcie::dev::edu
