// PCI facts every part of rpcie shares: config-space sizes, BAR numbering, and the access
// rule (naturally aligned 1/2/4/8-byte accesses) with its splitting of longer ranges.
//
// Part of core's base (like result.hpp and units.hpp): backends, the front end and tools may
// all include it; it knows nothing of the transport. Header-only, no allocation, thread-safe.
#pragma once

#include <cstdint>

#include "rpcie/result.hpp"

namespace rpcie::pci {

// Config space of a PCI Express function (sysfs shows 4096 bytes) and of a conventional one.
inline constexpr std::uint32_t kConfigSpaceSize = 4096;
inline constexpr std::uint32_t kConfigSpaceLegacySize = 256;
// Base address registers of a type-0 function: BARs 0..5.
inline constexpr unsigned kBarCount = 6;
inline constexpr std::uint8_t kBarMax = kBarCount - 1;

// Type-0 configuration header (PCI Local Bus 3.0, section 6.1): register offsets.
inline constexpr std::uint32_t kCfgVendorId = 0x00;
inline constexpr std::uint32_t kCfgDeviceId = 0x02;
inline constexpr std::uint32_t kCfgCommand = 0x04;
inline constexpr std::uint32_t kCfgStatus = 0x06;
inline constexpr std::uint32_t kCfgRevision = 0x08;
inline constexpr std::uint32_t kCfgClassCode = 0x09;  // 3 bytes: prog-if, subclass, base class
inline constexpr std::uint32_t kCfgCacheLineSize = 0x0c;
inline constexpr std::uint32_t kCfgLatencyTimer = 0x0d;
inline constexpr std::uint32_t kCfgHeaderType = 0x0e;
inline constexpr std::uint32_t kCfgBar0 = 0x10;  // BAR n at kCfgBar0 + 4n
inline constexpr std::uint32_t kCfgBarEnd = kCfgBar0 + 4 * kBarCount;
inline constexpr std::uint32_t kCfgSubsystemVendorId = 0x2c;
inline constexpr std::uint32_t kCfgSubsystemId = 0x2e;
inline constexpr std::uint32_t kCfgRomAddress = 0x30;
inline constexpr std::uint32_t kCfgCapabilityPointer = 0x34;
inline constexpr std::uint32_t kCfgInterruptLine = 0x3c;
inline constexpr std::uint32_t kCfgInterruptPin = 0x3d;

// Command register bits.
inline constexpr std::uint16_t kCommandMemory = 0x0002;
inline constexpr std::uint16_t kCommandBusMaster = 0x0004;
inline constexpr std::uint16_t kCommandParity = 0x0040;
inline constexpr std::uint16_t kCommandSerr = 0x0100;
inline constexpr std::uint16_t kCommandIntxDisable = 0x0400;
// Status register: a capability list starts at kCfgCapabilityPointer.
inline constexpr std::uint16_t kStatusCapList = 0x0010;
// Capability IDs.
inline constexpr std::uint8_t kCapIdMsi = 0x05;
inline constexpr std::uint8_t kCapIdExpress = 0x10;
// Memory BAR flag bits (low bits of the register).
inline constexpr std::uint32_t kBarFlag64 = 0x4;  // type 10b
inline constexpr std::uint32_t kBarFlagPrefetchable = 0x8;

// What a BAR holds: device registers (every access has side effects, exact width), plain
// memory (prefetchable), or I/O ports. The values are the wire's (docs/protocol.md).
enum class BarKind : std::uint8_t { registers = 1, memory = 2, io = 3 };

// Widest access each space takes: config space 4 bytes, a BAR 8 bytes.
inline constexpr unsigned kConfigWidthMax = 4;
inline constexpr unsigned kBarWidthMax = 8;

// The access rule: `width` is 1, 2, 4 or 8 (at most `width_max`), `offset` is a multiple of
// it, and [offset, offset + width) lies inside a space of `size` bytes.
constexpr bool width_valid(unsigned width, unsigned width_max = kBarWidthMax) noexcept {
  return (width == 1 || width == 2 || width == 4 || width == 8) && width <= width_max;
}
constexpr bool access_aligned(std::uint64_t offset, unsigned width, unsigned width_max = kBarWidthMax) noexcept {
  return width_valid(width, width_max) && offset % width == 0;
}
constexpr bool access_valid(std::uint64_t offset, unsigned width, std::uint64_t size,
                            unsigned width_max = kBarWidthMax) noexcept {
  return access_aligned(offset, width, width_max) && offset < size && width <= size - offset;
}

// The widest access (at most `width_max`, a power of two) that is naturally aligned at
// `offset` and no longer than `remaining` (> 0).
constexpr unsigned access_width_at(std::uint64_t offset, std::uint64_t remaining, unsigned width_max) noexcept {
  unsigned w = width_max;
  while (w > 1 && (offset % w != 0 || remaining < w)) w /= 2;
  return w;
}

// Splits [offset, offset + length) into the widest valid accesses, in ascending order, and
// calls `access(offset, width)` (returning Result<void>) for each; the first error ends the
// walk and is returned.
template <class Access>
Result<void> access_split(std::uint64_t offset, std::uint64_t length, unsigned width_max, Access&& access) {
  while (length > 0) {
    const unsigned w = access_width_at(offset, length, width_max);
    RPCIE_TRY(access(offset, w));
    offset += w;
    length -= w;
  }
  return {};
}

// Calls `typed(T{})` with the unsigned integer T of `width` bytes (1, 2 or 4; 8 for any other
// width, which access_valid has already refused), so that one access of exactly that width
// is written once: `width_visit(w, [&]<class T>(T) { return load<T>(at); })`.
template <class Typed>
decltype(auto) width_visit(unsigned width, Typed&& typed) {
  switch (width) {
    case 1:
      return typed(std::uint8_t{});
    case 2:
      return typed(std::uint16_t{});
    case 4:
      return typed(std::uint32_t{});
    default:
      return typed(std::uint64_t{});
  }
}

}  // namespace rpcie::pci
