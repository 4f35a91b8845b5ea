// edu backend: QEMU's educational PCI device (docs/specs/edu.rst, hw/misc/edu.c) in
// software — registers with side effects, a factorial unit, a 4 KiB DMA engine and one MSI
// vector. rpcie's reference device: every exporter path can be tested with it, and public
// drivers exist for it. Register table and deviations from QEMU: README.md in this folder.
//
// Parameters (`--export NAME=edu[,delay=DURATION]`):
//   delay=DURATION  how long the device takes to finish each factorial and each DMA
//                   transfer (rpcie::duration_parse syntax: "0", "250us", "200ms", "1.5s").
//                   Default 0: as soon as the device's worker thread gets to it — never
//                   inside the MMIO write that starts the work.
// Any other key is EINVAL naming the key; a bad value is EINVAL naming key and value.
//
// The returned Backend:
//  - identity 1234:11e8 rev 0x10, class 0x00ff00, subsystem 1af4:1100; BAR0 1 MiB of
//    32-bit non-prefetchable registers; one MSI vector (0) that carries every interrupt
//    (factorial 0x01, DMA 0x100, software 0x60 raises); uses_dma() is true.
//  - Threading: a worker thread, started here and joined when the Backend is destroyed,
//    finishes factorials and DMA transfers and calls the DmaPort and IrqSink; it never holds
//    the device lock while doing so. Everything else follows backend.hpp.
//  - attach(dma, irq): the ports the worker uses from now on; EBUSY if already attached.
//    Without attach the factorial still works (no interrupt is delivered: the bits still
//    appear in the interrupt status) and DMA transfers are not performed (logged).
//  - detach(): cancels pending work, waits until the worker is out of any DmaPort/IrqSink
//    call (bounded by that call's own deadline, 5 s for DMA), forgets the ports, and
//    returns the device to its power-on state. It does not wait for a `delay` to pass.
//  - reset(): power-on state (registers, config space, DMA buffer zeroed); pending work is
//    cancelled and an in-flight DMA call is waited for, so no transfer of the old job lands
//    after reset() returns (EIO if that call overran its deadline).
//  - mmio_write_is_doorbell(): true only for the DMA command register (BAR0 0x98).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backend.hpp"

namespace rpcie::dev {

Result<std::unique_ptr<Backend>> edu_create(const std::map<std::string, std::string>& params);

}  // namespace rpcie::dev
