#include "access.hpp"

#include <atomic>
#include <cstring>

#include "rpcie/pci.hpp"

namespace rpcie::mmio {
namespace {

constinit std::atomic<std::uint64_t> g_access_failures{0};

}  // namespace

std::uint64_t access_failures() noexcept { return g_access_failures.load(std::memory_order_relaxed); }
void access_failures_add(std::uint64_t count) noexcept {
  g_access_failures.fetch_add(count, std::memory_order_relaxed);
}

std::uint64_t bytes_value(const std::uint8_t* bytes, unsigned length) noexcept {
  std::uint64_t value = 0;
  for (unsigned i = length; i-- > 0;) value = value << 8 | bytes[i];
  return value;
}

void value_bytes(std::uint64_t value, unsigned length, std::uint8_t* bytes) noexcept {
  for (unsigned i = 0; i < length; ++i) bytes[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

template <bool kStore>
bool Bus::bar_transfer(const TrapRange& range, std::uintptr_t address, unsigned length, std::uint8_t* bytes) noexcept {
  std::uint64_t offset = range.bar_offset + (address - range.base);
  while (length > 0) {
    const unsigned width = pci::access_width_at(offset, length, pci::kBarWidthMax);
    std::uint64_t value = kStore ? bytes_value(bytes, width) : 0;
    const bool ok = kStore ? range.port->store(offset, width, value) : range.port->load(offset, width, value);
    if (!ok) {
      g_access_failures.fetch_add(1, std::memory_order_relaxed);
      ++failed_count_;
      if (mode_ == FailMode::sigbus) {
        failed_address_ = address;
        return false;
      }
      value = ~std::uint64_t{0};
    }
    if (!kStore) value_bytes(value, width, bytes);
    offset += width;
    address += width;
    bytes += width;
    length -= width;
  }
  return true;
}

// Walks [address, address + length) in segments that are wholly trapped or wholly not; a
// logical access is at most 64 bytes, so an untrapped segment ends at the next page at most.
template <bool kStore>
bool Bus::transfer(std::uintptr_t address, unsigned length, std::uint8_t* bytes) noexcept {
  while (length > 0) {
    const TrapRange* range = traps_.find(address);
    unsigned segment = length;
    if (range != nullptr) {
      const std::uintptr_t end = range->base + range->length;
      if (end - address < segment) segment = static_cast<unsigned>(end - address);
      if (!bar_transfer<kStore>(*range, address, segment, bytes)) return false;
    } else {
      const std::uintptr_t next_page = (address / kPage + 1) * kPage;
      if (next_page - address < segment && traps_.find(next_page) != nullptr) {
        segment = static_cast<unsigned>(next_page - address);
      }
      if (kStore) {
        std::memcpy(reinterpret_cast<void*>(address), bytes, segment);
      } else {
        std::memcpy(bytes, reinterpret_cast<const void*>(address), segment);
      }
    }
    address += segment;
    bytes += segment;
    length -= segment;
  }
  return true;
}

bool Bus::load(std::uintptr_t address, unsigned length, std::uint8_t* out) noexcept {
  return transfer<false>(address, length, out);
}

bool Bus::store(std::uintptr_t address, unsigned length, const std::uint8_t* in) noexcept {
  return transfer<true>(address, length, const_cast<std::uint8_t*>(in));
}

}  // namespace rpcie::mmio
