// The BarPort of one register-BAR mapping in librpcie-mmio.so: through the device's ring to
// rpcie-hostd when hostd gave one (stores posted, no system call on the fast path), else
// through the file port (one pread/pwrite per access). A ring that closes (hostd detached the
// device or stopped) sends later accesses to the file port, which then reports what hostd
// answers there.
//
// Before a store, the same device's memory-BAR mappings are written back (msync MS_SYNC),
// whichever way the store goes: PCIe rule 3 across BARs (docs/protocol.md).
//
// After each access through a ring (or of a port whose ring has closed), the posted stores
// hostd reported dropped are added to a process-wide count (stores_dropped_take): after a load
// that count covers every earlier store on the device.
//
// load/store: async-signal-safe, thread-safe. open/close: the writer's (see FilePort).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "bar_probe.hpp"
#include "device_ring.hpp"
#include "emulator/bar_port.hpp"
#include "file_port.hpp"

namespace rpcie::mmio {

class TrapTable;

class MappingPort final : public BarPort {
 public:
  MappingPort() = default;
  MappingPort(const MappingPort&) = delete;
  MappingPort& operator=(const MappingPort&) = delete;

  // Takes ownership of `fd` (the BAR file, for the file port) and one reference of `ring`
  // (null: no ring; DeviceRingPool::release gives it back at close).
  void open(int fd, const BarFile& file, const TrapTable* writeback, DeviceRing* ring, DeviceRingPool* rings) noexcept;
  void close() noexcept;
  bool ring_used() const noexcept { return ring_ != nullptr; }
  int last_errno() const noexcept { return file_.last_errno(); }

  bool load(std::uint64_t offset, unsigned width, std::uint64_t& value) noexcept override;
  bool store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept override;

 private:
  bool ring_usable() const noexcept { return ring_ != nullptr && !ring_->producer().closed(); }
  void stores_dropped_note() noexcept;

  FilePort file_;
  unsigned bar_ = 0;
  DeviceKey device_;
  const TrapTable* writeback_ = nullptr;
  DeviceRing* ring_ = nullptr;
  DeviceRingPool* rings_ = nullptr;
};

// Posted stores rpcie-hostd dropped (could not carry to the device: no link, a timeout) that
// ports have learnt of since the previous take, over all ports of the process; each is handed
// out once. Lock-free, async-signal-safe.
std::uint64_t stores_dropped_take() noexcept;

// A fixed pool of ports (no allocation). Writer-side only: callers serialize take/release.
class MappingPortPool {
 public:
  static constexpr std::size_t kCapacity = 256;
  // A closed port to open, or null when all are in use.
  MappingPort* take() noexcept;
  // Closes `port` and makes it available again (TrapTable::PortRelease).
  void release(BarPort* port) noexcept;

 private:
  std::array<MappingPort, kCapacity> ports_;
  std::array<bool, kCapacity> used_{};
};

}  // namespace rpcie::mmio
