// pci-sysfs backend: a real PCI function of this host, through its sysfs files.
//
// `--export NAME=pci-sysfs,bdf=DDDD:BB:DD.F[,config-write=yes|no]`
//
// Parameters:
//   bdf           the function's sysfs name, e.g. 0000:00:01.0 (hex domain, bus, device
//                 00-1f, function 0-7). Required. EINVAL when malformed; ENOENT naming the
//                 path when the host has no such function.
//   config-write  yes|no (default no): whether config space writes reach the function.
//   sysfs-root    FOR TESTS ONLY: the directory holding the functions, default
//                 /sys/bus/pci/devices. Tests point it at a fake tree.
// Any other key is EINVAL naming it.
//
// What the client sees:
//   identity()   from the sysfs text files vendor, device, class, subsystem_vendor,
//                subsystem_device, revision.
//   regions()    from the first six lines of `resource` (one Region per decoded BAR; a
//                64-bit BAR's upper half is not listed).
//   config_read  pread of `config`. What the file does not return — past its end (256 bytes
//                for a conventional function) or past the 64 bytes the kernel gives a
//                reader without CAP_SYS_ADMIN — reads all-ones, as an absent register does.
//   mmio_*       through resourceN: an exact-width volatile access to its mmap, or one
//                pread/pwrite of `width` bytes where the file cannot be mapped. I/O port
//                BARs are EINVAL (the contract does not reach them).
//   reset        writes the function's sysfs `reset` file (the kernel's function reset);
//                ENOTSUP where the function has none; EPERM while a driver is bound.
//   attach       (unbound) turns bus mastering off if it was left on; EPERM, and no client
//                served, when it does not clear. Saves the config space (config-write=yes).
//   detach       (unbound) resets through sysfs where the function can be reset, then
//                restores the registers a client may write to their values at attach,
//                Command last. Nothing when a driver has bound since.
//   No DMA, no interrupts.
//
// Safety policy — a host device is never taken from the host by accident, and a client
// never makes it reach the device server's memory:
//   * Bridges (class 0x06xxxx, or a header type other than 0) are refused at creation
//     (EPERM naming the function and its class), bound or not: what is done to a bridge
//     reaches everything behind it.
//   * Bound to a host driver (a `driver` link in its sysfs directory) at creation: exported
//     read-only. Every region is marked readonly; identity and config reads work; every
//     config write, every BAR access (reads too: a read can have side effects, e.g. virtio's
//     ISR register clears on read) and reset are EPERM naming the driver. config-write=yes
//     does not change that. No file is opened for writing and no resourceN is opened at all.
//   * Not bound: BAR reads and writes go through resourceN (opened read-write: the
//     function has no other user), except writes into the MSI-X table (EPERM). Config
//     writes are EPERM unless config-write=yes, and then limited by the table of
//     config_policy.hpp (README.md has it): never bus mastering, BARs, expansion ROM,
//     MSI/MSI-X address, data or enable, initiate-FLR or the power state. A write that
//     would change a refused bit is refused whole (EPERM, logged at a bounded rate).
//   * A driver that binds after creation is noticed at the next write or BAR access,
//     which then fails with EPERM, so the host driver and a client never share a function.
//   * Besides config and resourceN the backend writes only `reset` (at detach, or when
//     reset() is called); never remove, enable, rescan, driver_override, bind, ...
//
// Threading: as backend.hpp; nothing is shared between calls but immutable state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"

namespace rpcie::dev {

// Resource flags as the `resource` file shows them (include/linux/ioport.h).
inline constexpr std::uint64_t kIoresourceIo = 0x100;
inline constexpr std::uint64_t kIoresourceMem = 0x200;
inline constexpr std::uint64_t kIoresourcePrefetch = 0x2000;
inline constexpr std::uint64_t kIoresourceMem64 = 0x100000;

// The BAR table from the text of a function's `resource` file: lines "0x<start> 0x<end>
// 0x<flags>", the first six being BARs 0-5. A line with start and end both 0, or with
// neither the I/O nor the memory flag, is no BAR; the line after a 64-bit BAR is its upper
// half. EIO naming the line when a line is malformed or a size is not a power of two.
Result<std::vector<Region>> pci_resource_parse(std::string_view text);

// Creates the backend for one function (see above). Errors name the parameter or the file.
Result<std::unique_ptr<Backend>> pci_sysfs_create(const std::map<std::string, std::string>& params);

}  // namespace rpcie::dev
