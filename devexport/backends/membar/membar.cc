#include "membar.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <optional>

#include <unistd.h>

#include "doorbell.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/membar_registers.hpp"
#include "rpcie/units.hpp"
#include "scratch.hpp"

namespace rpcie::dev {

namespace {

// Memory space, bus master, parity error response, SERR#, INTx disable. No I/O BAR, so no
// I/O space bit; the rest are reserved or legacy and hard-wired to 0.
constexpr std::uint16_t kCommandWritable =
    pci::kCommandMemory | pci::kCommandBusMaster | pci::kCommandParity | pci::kCommandSerr | pci::kCommandIntxDisable;
// BAR0: memory, 64-bit, prefetchable. BAR2 (doorbell=on) and BAR4 (scratch=on): memory,
// 32-bit, non-prefetchable.
constexpr std::uint32_t kBar0Flags = pci::kBarFlag64 | pci::kBarFlagPrefetchable;
constexpr std::uint32_t kCfgBar2 = pci::kCfgBar0 + 4 * membar::kRegisterBar;
constexpr std::uint32_t kCfgBar4 = pci::kCfgBar0 + 4 * membar::kScratchBar;
constexpr std::uint8_t kInterruptPinA = 1;

constexpr std::uint8_t kRevision = 0x01;

class Membar final : public Backend {
 public:
  // `doorbell`: the BAR2 register block over this memory, or null (no BAR2, no vectors).
  // `scratch`: the BAR4 plain registers, or null (no BAR4).
  Membar(HostBuffer memory, std::unique_ptr<membar::Doorbell> doorbell, std::unique_ptr<membar::Scratch> scratch)
      : memory_(std::move(memory)), doorbell_(std::move(doorbell)), scratch_(std::move(scratch)) {
    regions_[region_count_++] = {.bar = 0, .size = memory_.size(), .kind = RegionKind::memory, .is_64bit = true};
    if (doorbell_)
      regions_[region_count_++] = {
          .bar = membar::kRegisterBar, .size = membar::kRegisterBarSize, .kind = RegionKind::registers};
    if (scratch_)
      regions_[region_count_++] = {
          .bar = membar::kScratchBar, .size = membar::kScratchBarSize, .kind = RegionKind::registers};
    identity_.vendor = kMembarVendor;
    identity_.device = kMembarDevice;
    identity_.class_code = kMembarClass;
    identity_.subsystem_vendor = kMembarVendor;
    identity_.subsystem_device = kMembarDevice;
    identity_.revision = kRevision;
    config_power_on();
  }

  std::string_view name() const noexcept override { return "membar"; }
  const Identity& identity() const noexcept override { return identity_; }
  std::span<const Region> regions() const noexcept override { return {regions_.data(), region_count_}; }
  std::uint16_t vector_count() const noexcept override { return doorbell_ ? 1 : 0; }

  Result<std::uint32_t> config_read(std::uint32_t offset, unsigned width) override {
    if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
      return fail(EINVAL, "config read of width " + std::to_string(width) + " at " + std::to_string(offset));
    std::uint32_t value = 0;
    for (unsigned i = 0; i < width; ++i) value |= std::uint32_t{config_[offset + i]} << (8 * i);
    return value;
  }

  Result<void> config_write(std::uint32_t offset, unsigned width, std::uint32_t value) override {
    if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
      return fail(EINVAL, "config write of width " + std::to_string(width) + " at " + std::to_string(offset));
    // Byte by byte through the write mask: read-only bits keep their value, which is what
    // makes BAR probing (write all-ones, read the size mask back) work.
    for (unsigned i = 0; i < width; ++i) {
      const auto byte = static_cast<std::uint8_t>(value >> (8 * i));
      const std::uint8_t mask = wmask_[offset + i];
      config_[offset + i] = static_cast<std::uint8_t>((config_[offset + i] & ~mask) | (byte & mask));
    }
    return {};
  }

  Result<std::uint64_t> mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width) override {
    if (doorbell_ && bar == membar::kRegisterBar) return doorbell_->read(offset, width);
    if (scratch_ && bar == membar::kScratchBar) return scratch_->read(offset, width);
    if (bar != 0 || !pci::access_valid(offset, width, regions_[0].size))
      return fail(EINVAL, access_text("read", bar, offset, width));
    std::uint8_t* at = memory_.data() + offset;
    return pci::width_visit(width, [&]<class T>(T) { return load<T>(at); });
  }

  Result<void> mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value) override {
    if (doorbell_ && bar == membar::kRegisterBar) return doorbell_->write(offset, width, value);
    if (scratch_ && bar == membar::kScratchBar) return scratch_->write(offset, width, value);
    if (bar != 0 || !pci::access_valid(offset, width, regions_[0].size))
      return fail(EINVAL, access_text("write", bar, offset, width));
    std::uint8_t* at = memory_.data() + offset;
    pci::width_visit(width, [&]<class T>(T) { store<T>(at, value); });
    return {};
  }

  std::span<std::uint8_t> bar_memory(std::uint8_t bar) noexcept override {
    if (bar != 0) return {};
    return {memory_.data(), memory_.size()};
  }

  // The doorbell makes the device read its own BAR0, never host memory: no window pull.
  bool mmio_write_is_doorbell(std::uint8_t, std::uint64_t) const noexcept override { return false; }

  Result<void> attach(DmaPort*, IrqSink* irq) override {
    if (doorbell_) doorbell_->attach(irq);
    return {};
  }

  void detach() noexcept override {
    // The doorbell first: its worker must be out of the memory before it is zeroed.
    if (doorbell_) doorbell_->detach();
    if (scratch_) scratch_->power_on();
    memory_and_config_power_on();
  }

  Result<void> reset() override {
    if (doorbell_) doorbell_->power_on();
    if (scratch_) scratch_->power_on();
    memory_and_config_power_on();
    return {};
  }

 private:
  // The exporter may touch the same bytes by RMA while mmio runs: an aligned atomic access
  // of exactly `width` bytes is the one access the contract promises, never torn.
  template <class T>
  static std::uint64_t load(std::uint8_t* at) noexcept {
    return std::atomic_ref<T>(*reinterpret_cast<T*>(at)).load(std::memory_order_relaxed);
  }
  template <class T>
  static void store(std::uint8_t* at, std::uint64_t value) noexcept {
    std::atomic_ref<T>(*reinterpret_cast<T*>(at)).store(static_cast<T>(value), std::memory_order_relaxed);
  }

  std::string access_text(const char* what, std::uint8_t bar, std::uint64_t offset, unsigned width) const {
    return "membar: " + std::string(what) + " of width " + std::to_string(width) + " at BAR" + std::to_string(bar) +
           "+" + std::to_string(offset) + " (the BARs are " + bars_text() + ")";
  }

  std::string bars_text() const {
    std::string text;
    for (std::size_t i = 0; i < region_count_; ++i) text += (i == 0 ? "" : ", ") + std::to_string(regions_[i].bar);
    return text;
  }

  void put(std::uint32_t offset, unsigned width, std::uint32_t value, std::uint32_t writable) {
    for (unsigned i = 0; i < width; ++i) {
      config_[offset + i] = static_cast<std::uint8_t>(value >> (8 * i));
      wmask_[offset + i] = static_cast<std::uint8_t>(writable >> (8 * i));
    }
  }

  void config_power_on() {
    config_.fill(0);
    wmask_.fill(0);
    put(pci::kCfgVendorId, 2, kMembarVendor, 0);
    put(pci::kCfgDeviceId, 2, kMembarDevice, 0);
    put(pci::kCfgCommand, 2, 0, kCommandWritable);
    put(pci::kCfgRevision, 1, kRevision, 0);
    put(pci::kCfgClassCode, 3, kMembarClass, 0);
    put(pci::kCfgCacheLineSize, 1, 0, 0xff);
    put(pci::kCfgLatencyTimer, 1, 0, 0xff);
    // The BAR decodes the address bits above its size; the bits below read 0 whatever is
    // written, which is how software learns the size.
    const std::uint64_t address_mask = ~(regions_[0].size - 1);
    put(pci::kCfgBar0, 4, kBar0Flags, static_cast<std::uint32_t>(address_mask) & ~std::uint32_t{0xf});
    put((pci::kCfgBar0 + 4), 4, 0, static_cast<std::uint32_t>(address_mask >> 32));
    if (doorbell_) {
      put(kCfgBar2, 4, 0, static_cast<std::uint32_t>(~(membar::kRegisterBarSize - 1)));
      put(pci::kCfgInterruptPin, 1, kInterruptPinA, 0);
    }
    if (scratch_) put(kCfgBar4, 4, 0, static_cast<std::uint32_t>(~(membar::kScratchBarSize - 1)));
    put(pci::kCfgSubsystemVendorId, 2, kMembarVendor, 0);
    put(pci::kCfgSubsystemId, 2, kMembarDevice, 0);
    put(pci::kCfgInterruptLine, 1, 0, 0xff);
  }

  // Zeroes the memory page by page, writing only pages that are not zero already: a page
  // nobody touched reads as the kernel's shared zero page, and writing it would allocate it,
  // so a mostly idle 16G BAR stays cheap. madvise(MADV_DONTNEED) would be cheaper still but
  // would swap the pages under a live RMA registration (the NIC keeps the old ones).
  void memory_zero() noexcept {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t step = std::min(page, memory_.size());
    for (std::size_t at = 0; at < memory_.size(); at += step) {
      std::uint8_t* p = memory_.data() + at;
      if (std::any_of(p, p + step, [](std::uint8_t b) { return b != 0; })) std::memset(p, 0, step);
    }
  }

  void memory_and_config_power_on() noexcept {
    memory_zero();
    config_power_on();
  }

  HostBuffer memory_;
  std::unique_ptr<membar::Doorbell> doorbell_;  // null without doorbell=on
  std::unique_ptr<membar::Scratch> scratch_;    // null without scratch=on
  std::array<Region, 3> regions_{};             // BAR0, then BAR2 when doorbell_, BAR4 when scratch_
  std::size_t region_count_ = 0;
  Identity identity_;
  std::array<std::uint8_t, pci::kConfigSpaceSize> config_{};
  std::array<std::uint8_t, pci::kConfigSpaceSize> wmask_{};  // 1 bits are writable
};

}  // namespace

namespace {

// on/off, and the yes/no/true/false that a TOML boolean becomes.
std::optional<bool> switch_parse(const std::string& value) {
  if (value == "on" || value == "yes" || value == "true") return true;
  if (value == "off" || value == "no" || value == "false") return false;
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<Backend>> membar_create(const std::map<std::string, std::string>& params) {
  std::uint64_t size = kMembarDefaultSize;
  bool doorbell = false;
  bool scratch = false;
  for (const auto& [key, value] : params) {
    if (key == "size") {
      auto parsed = size_parse(value);
      if (!parsed || !std::has_single_bit(*parsed) || *parsed < kMembarMinSize || *parsed > kMembarMaxSize)
        return fail(EINVAL, "membar: size '" + value + "' is not a power of two from 4K to 16G");
      size = *parsed;
    } else if (key == "doorbell") {
      auto on = switch_parse(value);
      if (!on) return fail(EINVAL, "membar: doorbell '" + value + "' is not on or off");
      doorbell = *on;
    } else if (key == "scratch") {
      auto on = switch_parse(value);
      if (!on) return fail(EINVAL, "membar: scratch '" + value + "' is not on or off");
      scratch = *on;
    } else {
      return fail(EINVAL, "membar: unknown parameter '" + key + "' (membar takes: size, doorbell, scratch)");
    }
  }
  auto memory = HostBuffer::create(static_cast<std::size_t>(size));
  if (!memory) return fail(memory.error().code, "membar: " + memory.error().message);
  std::unique_ptr<membar::Doorbell> unit;
  if (doorbell) {
    RPCIE_TRY_ASSIGN(unit, membar::Doorbell::create({memory->data(), memory->size()}));
  }
  auto registers = scratch ? std::make_unique<membar::Scratch>() : nullptr;
  return std::make_unique<Membar>(std::move(*memory), std::move(unit), std::move(registers));
}

}  // namespace rpcie::dev
