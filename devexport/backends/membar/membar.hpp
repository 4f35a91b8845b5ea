// membar backend: a PCI function whose only BAR is plain host memory.
//
// The software device of rpcie with no side effects at all: BAR0 is a 64-bit prefetchable
// memory BAR of `size` bytes (default 64M) backed by anonymous host memory, zero-filled at
// creation and by reset(). It masters nothing (no DMA, no interrupts), so it exercises the
// exporter's BAR paths — MMIO of every width and one-sided RMA through bar_memory(0) —
// without a device model in the way.
//
// Parameters (`--export NAME=membar[,size=SIZE]`):
//   size  BAR0 size, a power of two from 4K to 16G, with K/M/G suffixes (rpcie::size_parse).
//         Default 64M. EINVAL naming the value otherwise; any other key is EINVAL naming it.
//
// Identity (synthetic on purpose, so no host or guest driver binds it by accident):
//   vendor 0x1234, device 0x4d42 ("MB"), subsystem 0x1234:0x4d42, revision 0x01,
//   class 0x058000 (memory controller, other). Vendor 0x1234 is not a PCI-SIG assignment;
//   QEMU uses it for its own test devices (std-vga 0x1111, edu 0x11e8); 0x4d42 is used by
//   neither QEMU nor the pci.ids database.
//
// Config space: a type-0 header, no capabilities. Writable: command (memory space, bus
// master, parity, SERR, INTx disable), cache line size, latency timer, interrupt line and
// BAR0/BAR1 (the address bits above the size: writing all-ones reads back the size mask,
// as BAR probing expects). Everything else is read-only; extended space reads zero.
//
// MMIO: bar 0 only, widths 1/2/4/8 naturally aligned inside the BAR (EINVAL otherwise);
// reads and writes hit the memory directly, whatever the command register says (the same
// bytes are reachable by RMA through bar_memory(0), which has no decode gate either). A
// write stores the low `width` bytes of `value`. No write is a doorbell.
//
// reset() and detach(): the memory is zeroed and config space returns to power-on, so the
// next client never sees the previous client's data.
//
// Threading: as backend.hpp. bar_memory(0) stays valid for the backend's lifetime; the
// exporter may read and write it concurrently with mmio_* (plain memory: each aligned
// mmio access is a single access of its width, RMA sees it whole or not at all).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "backend.hpp"

namespace rpcie::dev {

inline constexpr std::uint16_t kMembarVendor = 0x1234;
inline constexpr std::uint16_t kMembarDevice = 0x4d42;
inline constexpr std::uint32_t kMembarClass = 0x058000;
inline constexpr std::uint64_t kMembarDefaultSize = std::uint64_t{64} << 20;
inline constexpr std::uint64_t kMembarMinSize = std::uint64_t{4} << 10;
inline constexpr std::uint64_t kMembarMaxSize = std::uint64_t{16} << 30;

// Creates a membar device from its export parameters (see above). ENOMEM when the host
// cannot map `size` bytes.
Result<std::unique_ptr<Backend>> membar_create(const std::map<std::string, std::string>& params);

}  // namespace rpcie::dev
