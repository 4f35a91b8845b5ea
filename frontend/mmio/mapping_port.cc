#include "mapping_port.hpp"

#include <sys/mman.h>

#include "trap_table.hpp"

namespace rpcie::mmio {

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
  if (!ring_usable()) return file_.load(offset, width, value);
  return ring_->producer().load(bar_, offset, width, value, ring_->timeout_ms());
}

bool MappingPort::store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept {
  if (!ring_usable()) return file_.store(offset, width, value);
  if (writeback_ != nullptr)
    writeback_->memory_each(device_, [](std::uintptr_t base, std::size_t length) {
      ::msync(reinterpret_cast<void*>(base), length, MS_SYNC);
    });
  return ring_->producer().store(bar_, offset, width, value, ring_->timeout_ms());
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
