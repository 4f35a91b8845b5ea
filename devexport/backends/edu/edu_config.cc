#include "edu_config.hpp"

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace rpcie::dev::edu {

namespace {

// Type-0 header and MSI capability offsets (PCI Local Bus 3.0, section 6).
constexpr std::uint32_t kVendorId = 0x00;
constexpr std::uint32_t kDeviceId = 0x02;
constexpr std::uint32_t kCommand = 0x04;
constexpr std::uint32_t kStatus = 0x06;
constexpr std::uint32_t kRevision = 0x08;
constexpr std::uint32_t kClassCode = 0x09;  // 3 bytes: prog-if, subclass, base class
constexpr std::uint32_t kCacheLineSize = 0x0c;
constexpr std::uint32_t kHeaderType = 0x0e;
constexpr std::uint32_t kBar0 = 0x10;
constexpr std::uint32_t kSubsystemVendorId = 0x2c;
constexpr std::uint32_t kSubsystemId = 0x2e;
constexpr std::uint32_t kCapabilityPointer = 0x34;
constexpr std::uint32_t kInterruptLine = 0x3c;
constexpr std::uint32_t kInterruptPin = 0x3d;

constexpr std::uint32_t kMsiControl = kMsiCapOffset + 2;
constexpr std::uint32_t kMsiAddressLow = kMsiCapOffset + 4;
constexpr std::uint32_t kMsiAddressHigh = kMsiCapOffset + 8;
constexpr std::uint32_t kMsiData = kMsiCapOffset + 12;

constexpr std::uint8_t kCapIdMsi = 0x05;
constexpr std::uint16_t kStatusCapList = 0x0010;
// Memory space, bus master, parity and SERR# response, INTx disable. I/O space stays 0:
// the device has no I/O BAR, and the spec lets such a function hardwire the bit.
constexpr std::uint16_t kCommandWritable = 0x0002 | 0x0004 | 0x0040 | 0x0100 | 0x0400;
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
  put(writable_, kCommand, 2, kCommandWritable);
  put(writable_, kCacheLineSize, 1, 0xff);
  // Address bits only: the low 20 bits read 0, which is how size probing reports 1 MiB.
  put(writable_, kBar0, 4, static_cast<std::uint32_t>(~(kBar0Size - 1)));
  put(writable_, kInterruptLine, 1, 0xff);
  put(writable_, kMsiControl, 2, kMsiControlEnable);
  put(writable_, kMsiAddressLow, 4, 0xfffffffc);  // dword-aligned message address
  put(writable_, kMsiAddressHigh, 4, 0xffffffff);
  put(writable_, kMsiData, 2, 0xffff);
}

void ConfigSpace::reset() noexcept {
  bytes_.fill(0);
  put(bytes_, kVendorId, 2, kIdentity.vendor);
  put(bytes_, kDeviceId, 2, kIdentity.device);
  put(bytes_, kStatus, 2, kStatusCapList);
  put(bytes_, kRevision, 1, kIdentity.revision);
  put(bytes_, kClassCode, 3, kIdentity.class_code);
  put(bytes_, kHeaderType, 1, 0x00);  // type 0, single function
  // BAR0 low bits 0: memory space, 32-bit, not prefetchable.
  put(bytes_, kSubsystemVendorId, 2, kIdentity.subsystem_vendor);
  put(bytes_, kSubsystemId, 2, kIdentity.subsystem_device);
  put(bytes_, kCapabilityPointer, 1, kMsiCapOffset);
  put(bytes_, kInterruptPin, 1, 0x01);       // INTA#
  put(bytes_, kMsiCapOffset, 1, kCapIdMsi);  // next pointer 0: the only capability
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
