// The edu function's PCI configuration space: a type-0 header and one MSI capability, with
// the writable bits of a real function (everything else reads back what it was). Internal
// to the edu backend. Not thread-safe: only the attachment's thread touches it.
#pragma once

#include <array>
#include <cstdint>

#include "backend.hpp"
#include "rpcie/edu_registers.hpp"

namespace rpcie::dev::edu {

// The register map and identity of the device this backend emulates.
using namespace ::rpcie::edu;

// QEMU's defaults for the device (subsystem IDs are QEMU's for every device it emulates).
inline constexpr Identity kIdentity{
    .vendor = ::rpcie::edu::kVendor,
    .device = ::rpcie::edu::kDevice,
    .class_code = 0x00ff00,
    .subsystem_vendor = 0x1af4,
    .subsystem_device = 0x1100,
    .revision = 0x10,
};
inline constexpr std::uint32_t kMsiCapOffset = 0x40;

class ConfigSpace {
 public:
  ConfigSpace() noexcept;  // power-on state

  // `width` 1, 2 or 4 at an offset aligned to it inside pci::kConfigSpaceSize; EINVAL otherwise.
  Result<std::uint32_t> read(std::uint32_t offset, unsigned width) const;
  // Changes only the writable bits: command, cache line size, BAR0 address bits, interrupt
  // line, MSI enable/address/data. Writes to any other bit are ignored, as on hardware.
  Result<void> write(std::uint32_t offset, unsigned width, std::uint32_t value);
  void reset() noexcept;

 private:
  std::array<std::uint8_t, pci::kConfigSpaceSize> bytes_{};
  std::array<std::uint8_t, pci::kConfigSpaceSize> writable_{};  // per byte: the bits a write changes
};

}  // namespace rpcie::dev::edu
