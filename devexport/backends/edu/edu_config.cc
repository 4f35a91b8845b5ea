#include "edu_config.hpp"

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace rpcie::dev::edu {

namespace {

// MSI capability registers (PCI Local Bus 3.0, section 6.8.1).
constexpr std::uint32_t kMsiControl = kMsiCapOffset + 2;
constexpr std::uint32_t kMsiAddressLow = kMsiCapOffset + 4;
constexpr std::uint32_t kMsiAddressHigh = kMsiCapOffset + 8;
constexpr std::uint32_t kMsiData = kMsiCapOffset + 12;

// Memory space, bus master, parity and SERR# response, INTx disable. I/O space stays 0:
// the device has no I/O BAR, and the spec lets such a function hardwire the bit.
constexpr std::uint16_t kCommandWritable =
    pci::kCommandMemory | pci::kCommandBusMaster | pci::kCommandParity | pci::kCommandSerr | pci::kCommandIntxDisable;
// 64-bit address capable, one vector (multiple message capable 0), no per-vector masking.
constexpr std::uint16_t kMsiControl64Bit = 0x0080;
constexpr std::uint16_t kMsiControlEnable = 0x0001;

template <std::size_t N>
void put(std::array<std::uint8_t, N>& bytes, std::uint32_t offset, unsigned width, std::uint32_t value) {
  for (unsigned i = 0; i < width; ++i) bytes[offset + i] = static_cast<std::uint8_t>(value >> (8 * i));
}

Result<void> config_access_check(std::uint32_t offset, unsigned width, std::string_view what) {
  if (pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax)) return {};
  return fail(EINVAL, fmt::format("edu: config {} of {} bytes at 0x{:x}: use 1, 2 or 4 bytes, aligned, below 0x{:x}",
                                  what, width, offset, pci::kConfigSpaceSize));
}

}  // namespace

ConfigSpace::ConfigSpace() noexcept {
  reset();
  put(writable_, pci::kCfgCommand, 2, kCommandWritable);
  put(writable_, pci::kCfgCacheLineSize, 1, 0xff);
  // Address bits only: the low 20 bits read 0, which is how size probing reports 1 MiB.
  put(writable_, pci::kCfgBar0, 4, static_cast<std::uint32_t>(~(kBar0Size - 1)));
  put(writable_, pci::kCfgInterruptLine, 1, 0xff);
  put(writable_, kMsiControl, 2, kMsiControlEnable);
  put(writable_, kMsiAddressLow, 4, 0xfffffffc);  // dword-aligned message address
  put(writable_, kMsiAddressHigh, 4, 0xffffffff);
  put(writable_, kMsiData, 2, 0xffff);
}

void ConfigSpace::reset() noexcept {
  bytes_.fill(0);
  put(bytes_, pci::kCfgVendorId, 2, kIdentity.vendor);
  put(bytes_, pci::kCfgDeviceId, 2, kIdentity.device);
  put(bytes_, pci::kCfgStatus, 2, pci::kStatusCapList);
  put(bytes_, pci::kCfgRevision, 1, kIdentity.revision);
  put(bytes_, pci::kCfgClassCode, 3, kIdentity.class_code);
  put(bytes_, pci::kCfgHeaderType, 1, 0x00);  // type 0, single function
  // BAR0 low bits 0: memory space, 32-bit, not prefetchable.
  put(bytes_, pci::kCfgSubsystemVendorId, 2, kIdentity.subsystem_vendor);
  put(bytes_, pci::kCfgSubsystemId, 2, kIdentity.subsystem_device);
  put(bytes_, pci::kCfgCapabilityPointer, 1, kMsiCapOffset);
  put(bytes_, pci::kCfgInterruptPin, 1, 0x01);    // INTA#
  put(bytes_, kMsiCapOffset, 1, pci::kCapIdMsi);  // next pointer 0: the only capability
  put(bytes_, kMsiControl, 2, kMsiControl64Bit);
}

Result<std::uint32_t> ConfigSpace::read(std::uint32_t offset, unsigned width) const {
  if (auto ok = config_access_check(offset, width, "read"); !ok) return tl::unexpected(std::move(ok.error()));
  std::uint32_t value = 0;
  for (unsigned i = 0; i < width; ++i) value |= std::uint32_t{bytes_[offset + i]} << (8 * i);
  return value;
}

Result<void> ConfigSpace::write(std::uint32_t offset, unsigned width, std::uint32_t value) {
  if (auto ok = config_access_check(offset, width, "write"); !ok) return ok;
  for (unsigned i = 0; i < width; ++i) {
    auto byte = static_cast<std::uint8_t>(value >> (8 * i));
    std::uint8_t mask = writable_[offset + i];
    bytes_[offset + i] = static_cast<std::uint8_t>((bytes_[offset + i] & ~mask) | (byte & mask));
  }
  return {};
}

}  // namespace rpcie::dev::edu
