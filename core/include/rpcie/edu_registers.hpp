// The edu device's identity and BAR0 register map (QEMU docs/specs/edu.rst; shared/EDU.md):
// the reference device of rpcie. One home for the facts that the emulating backend
// (devexport/backends/edu), the sample driver, the device checks and the benchmark share.
// Header-only constants, part of core's base like pci.hpp: it knows nothing of the transport.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rpcie::edu {

inline constexpr std::uint16_t kVendor = 0x1234;
inline constexpr std::uint16_t kDevice = 0x11e8;
inline constexpr std::uint64_t kBar0Size = std::uint64_t{1} << 20;

// BAR0 registers (byte offsets). Below kRegWideStart 4-byte accesses decode; from there on
// 8-byte accesses too.
inline constexpr std::uint64_t kRegId = 0x00;         // ro: 0xMMmm00ed (major, minor)
inline constexpr std::uint64_t kRegLiveness = 0x04;   // rw: reads the inverse of the last write
inline constexpr std::uint64_t kRegFactorial = 0x08;  // rw: n, then n! when done
inline constexpr std::uint64_t kRegStatus = 0x20;     // rw: kStatus* bits
inline constexpr std::uint64_t kRegIrqStatus = 0x24;  // ro: kIrq* bits raised
inline constexpr std::uint64_t kRegIrqRaise = 0x60;   // wo: raise these bits
inline constexpr std::uint64_t kRegIrqAck = 0x64;     // wo: clear these bits
inline constexpr std::uint64_t kRegDmaSrc = 0x80;
inline constexpr std::uint64_t kRegDmaDst = 0x88;
inline constexpr std::uint64_t kRegDmaCount = 0x90;
inline constexpr std::uint64_t kRegDmaCmd = 0x98;  // kDmaCmd* bits
inline constexpr std::uint64_t kRegWideStart = 0x80;

inline constexpr std::uint32_t kIdValue = 0x010000ed;  // major 1, minor 0
inline constexpr std::uint32_t kStatusComputing = 0x01;
inline constexpr std::uint32_t kStatusIrqOnFactorial = 0x80;
inline constexpr std::uint32_t kIrqFactorial = 0x001;
inline constexpr std::uint32_t kIrqDma = 0x100;
inline constexpr std::uint64_t kDmaCmdStart = 0x1;
inline constexpr std::uint64_t kDmaCmdToHost = 0x2;  // else from host memory to the buffer
inline constexpr std::uint64_t kDmaCmdIrq = 0x4;
// The device's own 4 KiB DMA buffer, at this device address.
inline constexpr std::uint64_t kDmaBufferAddress = 0x40000;
inline constexpr std::size_t kDmaBufferSize = 4096;

}  // namespace rpcie::edu
