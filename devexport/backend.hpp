// rpcie device backends — the contract between rpcie-exportd and one exported device.
//
// A backend is one PCI function as the exporter sees it: its identity, config space, BARs,
// and, for devices that master the bus, DMA and interrupts. Backends never see libfabric,
// sessions or clients: the exporter gives a backend a DmaPort and an IrqSink when a client
// attaches and takes them away when it detaches.
//
// Threading: the exporter calls config_*, mmio_*, reset, attach and detach from one thread
// per attachment (the attachment's ordered queue), so these calls never overlap for one
// Backend object. A backend that works asynchronously (edu's factorial and DMA) runs its own
// worker thread and calls its DmaPort and IrqSink from there, or, once the exporter has
// called work_inline_enable(), runs work that is due at once from work_run() on the
// attachment's thread; either way it must not block in mmio_write waiting for that work.
// work_inline_enable() and work_run() are called like the others (never overlapping). identity(), regions() and name()
// are immutable after creation and safe from any thread (the exporter lists exports while they are attached).
//
// Errors: Result<...> with errno values. EINVAL for an access the contract rejects (bad
// width, misaligned, outside the region or config space), ENOTSUP for an optional operation
// the backend does not have, EPERM for an access the backend's safety policy refuses
// (pci-sysfs: a function bound to a host driver, a config write its table refuses), EIO
// for a device that failed. An access that is legal for the contract but that the device
// itself does not decode is not an error: it reads all-ones and ignores writes, as a PCIe
// device does (edu's spec says so).
//
// Ownership: the exporter owns each Backend (unique_ptr); the DmaPort and IrqSink given to
// attach() stay valid until detach() returns. detach() must stop using them before it
// returns (join or quiesce any worker that holds them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpcie/deadline.hpp"
#include "rpcie/pci.hpp"
#include "rpcie/result.hpp"

namespace rpcie::dev {

struct Identity {
  std::uint16_t vendor = 0xffff;
  std::uint16_t device = 0xffff;
  std::uint32_t class_code = 0;  // 24 bits: base class, subclass, programming interface
  std::uint16_t subsystem_vendor = 0;
  std::uint16_t subsystem_device = 0;
  std::uint8_t revision = 0;
};

enum class RegionKind : std::uint8_t {
  registers = 1,  // non-prefetchable memory BAR: every access has side effects (MMIO)
  memory = 2,     // prefetchable memory BAR: reads have no side effects, may be cached
  io = 3,         // I/O port BAR (listed for completeness; not accessible through rpcie)
};

struct Region {
  std::uint8_t bar = 0;    // 0..5 (a 64-bit BAR occupies bar and bar+1; listed once)
  std::uint64_t size = 0;  // bytes, a power of two
  RegionKind kind = RegionKind::registers;
  bool is_64bit = false;
  bool readonly = false;  // the backend refuses every write and side-effecting access
};

// Device-initiated transfers between the device and the attachment's DMA window: IOVA 0 is
// offset 0 of the client's window. Given at attach; thread-safe. How the bytes travel is
// the exporter's business (on-demand: one-sided RMA to the client's window for each call;
// mirror: a device-server copy of the window, synchronised at the ordering points).
//
// Ordering: a dma_write is visible to the client before any interrupt the backend raises
// through the IrqSink afterwards and before any MMIO read completion it returns afterwards
// (the exporter enforces this; the backend only has to raise the interrupt after its DMA
// call returned). A dma_read sees every host write the driver made before the MMIO write
// that started the device's work (ordering rule 3).
//
// Errors: EFAULT when [iova, iova+length) is not inside the window (nothing is transferred),
// EIO / ETIMEDOUT when the transport failed (the device should then abort the transfer),
// EAGAIN when the link to the client is lost and being resumed (docs/reliability.md,
// "Resumption"): nothing was done, and the device keeps the transfer to try again later;
// after a resume the exporter runs the device's due work (work_run) again.
class DmaPort {
 public:
  virtual ~DmaPort() = default;
  virtual std::uint64_t window_size() const noexcept = 0;
  // Host memory -> device: fills `into` from [iova, iova + into.size()).
  virtual Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline deadline) = 0;
  // Device -> host memory: writes `from` at [iova, iova + from.size()).
  virtual Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline deadline) = 0;
};

// Where a backend raises interrupts (MSI-style: one message per raise). Thread-safe; may
// block briefly (it flushes DMA writes ahead of the interrupt). `vector` < vector_count().
class IrqSink {
 public:
  virtual ~IrqSink() = default;
  virtual void irq_raise(std::uint16_t vector) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Backend type name as on the command line: "edu", "membar", "pci-sysfs".
  virtual std::string_view name() const noexcept = 0;
  virtual const Identity& identity() const noexcept = 0;
  // The BARs that exist, in BAR order.
  virtual std::span<const Region> regions() const noexcept = 0;
  // Interrupt vectors the device can raise (0: none).
  virtual std::uint16_t vector_count() const noexcept { return 0; }
  // Whether the device masters the bus (needs a DmaPort with a window).
  virtual bool uses_dma() const noexcept { return false; }

  // Config space, `width` 1, 2 or 4 at an offset aligned to it, inside pci::kConfigSpaceSize.
  virtual Result<std::uint32_t> config_read(std::uint32_t offset, unsigned width) = 0;
  virtual Result<void> config_write(std::uint32_t offset, unsigned width, std::uint32_t value) {
    (void)offset, (void)width, (void)value;
    return fail(ENOTSUP, "config space is read-only for this device");
  }

  // One MMIO access of exactly `width` bytes (1, 2, 4 or 8) at an offset aligned to it,
  // inside the BAR. `value` of a write fits in `width`.
  virtual Result<std::uint64_t> mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width) = 0;
  virtual Result<void> mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value) = 0;

  // For BARs that are plain memory (no side effects): the bytes themselves, so that the
  // exporter can register them for one-sided RMA and copy without per-access calls. Empty
  // when the BAR is not plain memory (the exporter then goes through mmio or bar_copy).
  virtual std::span<std::uint8_t> bar_memory(std::uint8_t bar) noexcept {
    (void)bar;
    return {};
  }

  // Mirror mode: whether an MMIO write at this place can start device work that reads host
  // memory (a doorbell), so that the exporter must bring the window mirror up to date
  // before performing it (ordering rule 3). The default is the safe answer.
  virtual bool mmio_write_is_doorbell(std::uint8_t bar, std::uint64_t offset) const noexcept {
    (void)bar, (void)offset;
    return true;
  }

  // A client attached / detached. attach() starts whatever the device runs on its own;
  // detach() stops it, stops using dma/irq, and returns the device to its power-on state
  // where the backend can (so that the next client finds it fresh).
  virtual Result<void> attach(DmaPort* dma, IrqSink* irq) {
    (void)dma, (void)irq;
    return {};
  }
  virtual void detach() noexcept {}

  // Function-level reset: power-on state. ENOTSUP where not possible (pci-sysfs without a
  // sysfs reset file).
  virtual Result<void> reset() { return fail(ENOTSUP, "reset is not supported by this device"); }

  // Optional: device work on the exporter's attachment thread. An asynchronous device
  // (edu's factorial and DMA) would hand each job from mmio_write to a worker thread; that
  // hand-off, a condition-variable wake-up (tens of microseconds on a VM), is most of the
  // cost of a short job. work_inline_enable() is the exporter's promise to call work_run()
  // on the attachment's thread after every request it has handled, before it waits for the
  // next one. From then on the backend may leave the jobs that are due at once (no
  // configured delay) to work_run(); delayed jobs keep their own timing (worker thread).
  // The write that starts work has then completed before the work runs — never inside
  // mmio_write, as on hardware, where the write is posted and the device works afterwards.
  // work_run() performs what is due now, may call the DmaPort and IrqSink (the same
  // ordering rules hold), and returns when nothing due is left; with nothing due it is
  // cheap. Defaults: no inline work.
  virtual void work_inline_enable() noexcept {}
  virtual void work_run() noexcept {}
};

// Parameters of one export: `--export NAME=BACKEND[,key=value...]`.
struct ExportSpec {
  std::string name;                           // [A-Za-z0-9_.-]{1,64}
  std::string backend;                        // "edu", "membar", "pci-sysfs"
  std::map<std::string, std::string> params;  // backend keys, in the order-free form given
};

// Parses "NAME=BACKEND[,key=value...]". EINVAL with a message naming the fault: empty or
// bad name, missing backend, a key without '=', an empty key, a duplicate key.
Result<ExportSpec> export_spec_parse(std::string_view text);

// Creates the backend a spec names, checking its parameters: every key must be known to
// that backend and every value valid (EINVAL naming the key), an unknown backend is EINVAL
// naming the backends there are. Keys the exporter itself handles (`dma`, `shared`,
// `allow`) are removed from params by the exporter before this is called.
Result<std::unique_ptr<Backend>> backend_create(const ExportSpec& spec);

}  // namespace rpcie::dev
