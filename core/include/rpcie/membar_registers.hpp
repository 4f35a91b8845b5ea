// The membar device's register BARs (BAR2 with `doorbell=on`, BAR4 with `scratch=on`): the
// facts that the emulating backend (devexport/backends/membar), the device checks and the
// tests share.
// Register table and behaviour: devexport/backends/membar/README.md. Header-only, part of
// core's base like edu_registers.hpp: it knows nothing of the transport.
//
// A doorbell hashes bytes [OFFSET, OFFSET+LENGTH) of the memory BAR (BAR0) with 64-bit
// FNV-1a and reports the result; it exists to test ordering across BARs (data written into
// the memory BAR, then a register store that makes the device read it).
#pragma once

#include <cstdint>
#include <span>

namespace rpcie::membar {

inline constexpr std::uint8_t kRegisterBar = 2;
inline constexpr std::uint64_t kRegisterBarSize = 4096;

// BAR2 registers (byte offsets). Each decodes at exactly one width (the k*Width next to
// it); any other width or offset is refused (EINVAL).
inline constexpr std::uint64_t kRegId = 0x00;        // ro, 4 B: kIdValue
inline constexpr std::uint64_t kRegOffset = 0x08;    // rw, 8 B: first byte of the range in BAR0
inline constexpr std::uint64_t kRegLength = 0x10;    // rw, 8 B: bytes in the range
inline constexpr std::uint64_t kRegDoorbell = 0x18;  // rw, 4 B: any write starts a hash
inline constexpr std::uint64_t kRegResult = 0x20;    // ro, 8 B: FNV-1a of the last range served
inline constexpr std::uint64_t kRegStatus = 0x28;    // ro, 4 B: kStatus* bits
inline constexpr std::uint64_t kRegCount = 0x2c;     // ro, 4 B: doorbells served (wraps)

inline constexpr std::uint32_t kIdValue = 0x4d420001;  // "MB", version 1
inline constexpr std::uint32_t kStatusBusy = 0x1;      // a doorbell is being served
inline constexpr std::uint32_t kStatusError = 0x2;     // the last range was outside BAR0

inline constexpr std::uint16_t kDoorbellVector = 0;  // raised once per doorbell served

// 64-bit FNV-1a, continued from `hash` over `bytes` (start from kFnvOffsetBasis).
inline constexpr std::uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;
inline constexpr std::uint64_t fnv1a_update(std::uint64_t hash, std::span<const std::uint8_t> bytes) noexcept {
  for (const std::uint8_t b : bytes) hash = (hash ^ b) * kFnvPrime;
  return hash;
}

// BAR4 (`scratch=on`): 4 KiB of plain registers. Every naturally aligned access of width
// 1, 2, 4 or 8 reads back what was stored (little endian); zero at power-on and reset. A
// target for trapped programs that may use any width at any offset.
inline constexpr std::uint8_t kScratchBar = 4;
inline constexpr std::uint64_t kScratchBarSize = 4096;

}  // namespace rpcie::membar
