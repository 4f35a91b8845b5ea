// membar backend: a PCI function whose BAR0 is plain host memory.
//
// The software device of rpcie with no side effects at all: BAR0 is a 64-bit prefetchable
// memory BAR of `size` bytes (default 64M) backed by anonymous host memory, zero-filled at
// creation and by reset(). It masters nothing (no DMA), so it exercises the exporter's BAR
// paths — MMIO of every width and one-sided RMA through bar_memory(0) — without a device
// model in the way. With doorbell=on it adds BAR2, a 4 KiB register BAR whose doorbell
// hashes a range of BAR0 and raises interrupt vector 0 (doorbell.hpp; register table in
// README.md and rpcie/membar_registers.hpp): a device for ordering across BARs. With
// scratch=on it adds BAR4, a 4 KiB register BAR of plain registers that read back what was
// stored at any width 1/2/4/8 (scratch.hpp): a target for every instruction a trapped
// program may use on a register BAR.
//
// Parameters (`--export NAME=membar[,size=SIZE][,doorbell=on|off][,scratch=on|off]`):
//   size      BAR0 size, a power of two from 4K to 16G, with K/M/G suffixes
//             (rpcie::size_parse). Default 64M. EINVAL naming the value otherwise.
//   doorbell  on/yes/true or off/no/false (default off). EINVAL naming the value otherwise.
//   scratch   the same switch for BAR4 (default off); independent of doorbell.
// Any other key is EINVAL naming it.
//
// Identity (synthetic on purpose, so no host or guest driver binds it by accident):
//   vendor 0x1234, device 0x4d42 ("MB"), subsystem 0x1234:0x4d42, revision 0x01,
//   class 0x058000 (memory controller, other). Vendor 0x1234 is not a PCI-SIG assignment;
//   QEMU uses it for its own test devices (std-vga 0x1111, edu 0x11e8); 0x4d42 is used by
//   neither QEMU nor the pci.ids database.
//
// Config space: a type-0 header, no capabilities. Writable: command (memory space, bus
// master, parity, SERR, INTx disable), cache line size, latency timer, interrupt line and
// BAR0/BAR1 (and BAR2 with doorbell=on, BAR4 with scratch=on; the address bits above the
// size: writing all-ones
// reads back the size mask, as BAR probing expects). Everything else is read-only;
// extended space reads zero. With doorbell=on the interrupt pin reads 1 (INTA).
//
// MMIO: BAR0 widths 1/2/4/8 naturally aligned inside the BAR (EINVAL otherwise); reads and
// writes hit the memory directly, whatever the command register says (the same bytes are
// reachable by RMA through bar_memory(0), which has no decode gate either). A write stores
// the low `width` bytes of `value`. BAR2 (doorbell=on): exactly the register table's
// widths and offsets, EINVAL otherwise. BAR4 (scratch=on): widths 1/2/4/8 naturally aligned
// inside its 4 KiB, EINVAL otherwise. No write is a doorbell in mmio_write_is_doorbell's
// sense: the device reads its own BAR0, never host memory.
//
// attach(dma, irq): with doorbell=on, `irq` receives vector 0 from then on (null: none).
// reset() and detach(): a doorbell in progress is cancelled, the registers (BAR2, BAR4) cleared, the
// memory zeroed and config space returned to power-on, so the next client never sees the
// previous client's data.
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
