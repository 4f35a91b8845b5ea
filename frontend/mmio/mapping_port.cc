#include "mapping_port.hpp"

#include <sys/mman.h>

#include <atomic>

#include "trap_table.hpp"

namespace rpcie::mmio {

namespace {
constinit std::atomic<std::uint64_t> g_stores_dropped{0};
}  // namespace

std::uint64_t stores_dropped_take() noexcept { return g_stores_dropped.exchange(0); }

// Also after the ring closed: stores hostd dropped before it ended are still to be told.
void MappingPort::stores_dropped_note() noexcept {
  if (ring_ == nullptr) return;
  const std::uint64_t dropped = ring_->store_failures_take();
  if (dropped != 0) g_stores_dropped.fetch_add(dropped);
}

void MappingPort::open(int fd, const BarFile& file, const TrapTable* writeback, DeviceRing* ring,
                       DeviceRingPool* rings) noexcept {
  close();
  // The file port writes back only when it carries the store itself (see store()).
  file_.open(fd, file.device, writeback);
  bar_ = file.bar;
  device_ = file.device;
  writeback_ = writeback;
  ring_ = ring;
  rings_ = rings;
}

void MappingPort::close() noexcept {
  file_.close();
  if (ring_ != nullptr && rings_ != nullptr) rings_->release(ring_);
  ring_ = nullptr;
  rings_ = nullptr;
}

bool MappingPort::load(std::uint64_t offset, unsigned width, std::uint64_t& value) noexcept {
  const bool ok = ring_usable() ? ring_->producer().load(bar_, offset, width, value, ring_->timeout_ms())
                                : file_.load(offset, width, value);
  stores_dropped_note();
  return ok;
}

bool MappingPort::store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept {
  if (!ring_usable()) {
    const bool ok = file_.store(offset, width, value);
    stores_dropped_note();
    return ok;
  }
  if (writeback_ != nullptr)
    writeback_->memory_each(device_, [](std::uintptr_t base, std::size_t length) {
      ::msync(reinterpret_cast<void*>(base), length, MS_SYNC);
    });
  const bool ok = ring_->producer().store(bar_, offset, width, value, ring_->timeout_ms());
  stores_dropped_note();  // earlier stores' fate, as far as hostd has got
  return ok;
}

MappingPort* MappingPortPool::take() noexcept {
  for (std::size_t i = 0; i < kCapacity; ++i)
    if (!used_[i]) {
      used_[i] = true;
      return &ports_[i];
    }
  return nullptr;
}

void MappingPortPool::release(BarPort* port) noexcept {
  for (std::size_t i = 0; i < kCapacity; ++i)
    if (&ports_[i] == port) {
      ports_[i].close();
      used_[i] = false;
    }
}

}  // namespace rpcie::mmio
