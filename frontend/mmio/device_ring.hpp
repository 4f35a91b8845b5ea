// A device's MMIO ring (ring/ring.hpp) as librpcie-mmio.so holds it: the connection to
// rpcie-hostd's control socket (hostd serves the ring for as long as it stays open), the
// ring's shared memory, and the producer every register-BAR mapping of the device uses. One
// per device and process, so that accesses to any of its register BARs keep program order.
//
// open/close and the pool are the writer's (mmap/munmap, under the preload's writer lock);
// producer() is used from the SIGSEGV handler (async-signal-safe, thread-safe).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "bar_probe.hpp"
#include "ring/ring.hpp"

namespace rpcie::mmio {

class DeviceRing {
 public:
  DeviceRing() = default;
  DeviceRing(const DeviceRing&) = delete;
  DeviceRing& operator=(const DeviceRing&) = delete;
  ~DeviceRing() { close(); }

  // Asks hostd on `control_path` for the ring of the device whose BAR file `bar_fd` is, and
  // maps it. false with nothing held when hostd cannot be reached within about a second,
  // refuses (no permission, an old hostd), or answers anything unexpected: the caller then
  // uses the file port.
  bool open(const char* control_path, int bar_fd) noexcept;
  void close() noexcept;
  bool is_open() const noexcept { return producer_.attached(); }

  RingProducer& producer() noexcept { return producer_; }
  // How long an access may wait: hostd's own timeout plus a margin, so that hostd's answer
  // (EIO after its deadline) comes before ours.
  int timeout_ms() const noexcept { return timeout_ms_; }

  // Posted stores hostd reported it could not perform (the ring's store_failures) since the
  // previous take, by any thread: each is handed out once. After a load returned, every store
  // before it has been counted. Lock-free, async-signal-safe; 0 when the ring is not open.
  // A child after fork shares the ring with its parent and so sees the parent's too.
  std::uint64_t store_failures_take() noexcept;

 private:
  int socket_ = -1;
  void* memory_ = nullptr;
  std::size_t bytes_ = 0;
  int timeout_ms_ = 0;
  RingProducer producer_;
  std::atomic<std::uint64_t> store_failures_taken_{0};
};

// The process's device rings, shared by mappings of the same device (refcounted). Writer-side
// only: callers serialize acquire/release. No allocation.
class DeviceRingPool {
 public:
  static constexpr std::size_t kCapacity = 64;
  // The open ring of `device`, opened on first use; null when it cannot be had (see
  // DeviceRing::open) or the pool is full.
  DeviceRing* acquire(const DeviceKey& device, const char* control_path, int bar_fd) noexcept;
  // One mapping fewer; the last one closes the ring (hostd then stops serving it).
  void release(DeviceRing* ring) noexcept;

 private:
  struct Slot {
    DeviceKey device;
    unsigned users = 0;
    DeviceRing ring;
  };
  std::array<Slot, kCapacity> slots_;
};

// The device directory's name (the BDF, e.g. "10000:00:01.0") of BAR file `bar_fd`, into
// `bdf` (NUL-terminated); false if the path is not a device directory's resourceN.
bool bar_fd_bdf(int bar_fd, char* bdf, std::size_t size) noexcept;

// The control socket: `RPCIE_CONTROL` if set and not empty, else /run/rpcie.sock (as the CLI).
const char* control_path_default() noexcept;

}  // namespace rpcie::mmio
