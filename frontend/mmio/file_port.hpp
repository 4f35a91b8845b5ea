// The fallback BarPort of librpcie-mmio.so: every access is one pread/pwrite of exactly
// `width` bytes at the BAR offset on the resource file (rpcie-hostd turns it into one MMIO
// access of that width). One port per mapping, so a faster port (a shared-memory ring with
// rpcie-hostd) can replace it mapping by mapping.
//
// Before a store, the dirty pages of the same device's memory-BAR mappings are written back
// (msync MS_SYNC): PCIe rule 3 across BARs (docs/protocol.md) — descriptors stored through a
// page-cache mapping reach the device before the doorbell register store that follows.
//
// load/store are async-signal-safe and thread-safe (pread/pwrite/msync; EINTR retried).
// open/close are the writer's (never concurrent with an access that can still use the port:
// TrapTable releases a port only when no reader can hold it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bar_probe.hpp"
#include "emulator/bar_port.hpp"

namespace rpcie::mmio {

class TrapTable;

class FilePort final : public BarPort {
 public:
  FilePort() = default;
  FilePort(const FilePort&) = delete;
  FilePort& operator=(const FilePort&) = delete;
  ~FilePort() override { close(); }

  // Takes ownership of `fd`. `writeback`: the table whose memory entries of `device` are
  // written back before each store (null: none).
  void open(int fd, const DeviceKey& device, const TrapTable* writeback) noexcept;
  void close() noexcept;
  int fd() const noexcept { return fd_; }

  // false: a short or failed transfer (the errno is kept in last_errno(), EIO for a short one).
  bool load(std::uint64_t offset, unsigned width, std::uint64_t& value) noexcept override;
  bool store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept override;
  int last_errno() const noexcept { return last_errno_; }

 private:
  int fd_ = -1;
  DeviceKey device_;
  const TrapTable* writeback_ = nullptr;
  int last_errno_ = 0;  // racy by design: a hint for the failure message only
};

}  // namespace rpcie::mmio
