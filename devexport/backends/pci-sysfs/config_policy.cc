#include "config_policy.hpp"

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "rpcie/pci.hpp"

namespace rpcie::dev {

namespace {

constexpr std::uint32_t kHeaderSize = 0x40;
constexpr std::uint32_t kLegacyEnd = pci::kConfigSpaceLegacySize;
constexpr std::uint32_t kAll = 0xffffffff;

constexpr const char* kWhyBusMaster =
    "bus mastering stays off: with no IOMMU the device's DMA would reach all of the device server's memory";
constexpr const char* kWhyPlacement = "it places the function in the host's address space";
constexpr const char* kWhyMsi =
    "MSI and MSI-X stay as the host set them: a message is a memory write by the device, and pci-sysfs delivers no "
    "interrupts";
constexpr const char* kWhyPower = "the power state stays the host's";
constexpr const char* kWhyReset = "only the exporter resets the function (at detach), never a client";
constexpr const char* kWhyVpd = "a VPD write persists in the device's EEPROM";

// ---- The tables ----------------------------------------------------------------------------
// Compared with vfio-pci (which has an IOMMU and virtualises interrupts): bus mastering,
// MSI/MSI-X enable and the power state are refused instead of passed or emulated, and the
// BARs, ROM and MSI address/data are refused instead of virtualised.

// Type-0 header. Vendor/device ID, class, header type, subsystem IDs, capability pointer,
// interrupt pin, Min_Gnt/Max_Lat and CardBus CIS are read-only by the table's omission.
constexpr ConfigRule kHeader[] = {
    // I/O, memory, special cycles, MWI, VGA snoop, parity, stepping, SERR, fast back-to-back,
    // INTx disable; not bus master (bit 2).
    {.offset = 0x04, .width = 2, .name = "Command", .writable = 0x07fb, .fixed = 0x0004, .why = kWhyBusMaster},
    {.offset = 0x06, .width = 2, .name = "Status", .clear = 0xf900},
    {.offset = 0x0c, .width = 1, .name = "Cache Line Size", .writable = 0xff},
    {.offset = 0x0d, .width = 1, .name = "Latency Timer", .writable = 0xff},
    {.offset = 0x0f, .width = 1, .name = "BIST", .writable = 0x40},  // start BIST
    {.offset = 0x10, .width = 4, .name = "BAR0", .fixed = kAll, .why = kWhyPlacement},
    {.offset = 0x14, .width = 4, .name = "BAR1", .fixed = kAll, .why = kWhyPlacement},
    {.offset = 0x18, .width = 4, .name = "BAR2", .fixed = kAll, .why = kWhyPlacement},
    {.offset = 0x1c, .width = 4, .name = "BAR3", .fixed = kAll, .why = kWhyPlacement},
    {.offset = 0x20, .width = 4, .name = "BAR4", .fixed = kAll, .why = kWhyPlacement},
    {.offset = 0x24, .width = 4, .name = "BAR5", .fixed = kAll, .why = kWhyPlacement},
    {.offset = 0x30, .width = 4, .name = "Expansion ROM Base Address", .fixed = kAll, .why = kWhyPlacement},
    {.offset = 0x3c, .width = 1, .name = "Interrupt Line", .writable = 0xff},
};

// Power Management (0x01): the data select may change; the power state (bits 1:0) not;
// PME_En and PME_Status (write-1-to-clear) are the host's.
constexpr ConfigRule kPowerManagement[] = {
    {.offset = 0x04,
     .width = 2,
     .name = "PMCSR",
     .writable = 0x1e00,
     .fixed = 0x0003,
     .clear = 0x8000,
     .why = kWhyPower},
};

// Vital Product Data (0x03): reads go through (address with F = 0, then data); F = 1 asks
// the device to write the data into its EEPROM.
constexpr ConfigRule kVpd[] = {
    {.offset = 0x02, .width = 2, .name = "VPD Address", .writable = 0x7fff, .zero = 0x8000, .why = kWhyVpd},
    {.offset = 0x04, .width = 4, .name = "VPD Data", .writable = kAll},
};

// MSI (0x05), by layout. Message Control: enable (bit 0) and Multiple Message Enable (6:4)
// fixed, the rest read-only. Mask bits writable, pending bits read-only.
constexpr ConfigRule kMsi32[] = {
    {.offset = 0x02, .width = 2, .name = "MSI Message Control", .fixed = 0x0071, .why = kWhyMsi},
    {.offset = 0x04, .width = 4, .name = "MSI Message Address", .fixed = kAll, .why = kWhyMsi},
    {.offset = 0x08, .width = 2, .name = "MSI Message Data", .fixed = 0xffff, .why = kWhyMsi},
    {.offset = 0x0a, .width = 2, .name = "MSI Extended Message Data", .fixed = 0xffff, .why = kWhyMsi},
    {.offset = 0x0c, .width = 4, .name = "MSI Mask Bits", .writable = kAll},
};
constexpr ConfigRule kMsi64[] = {
    {.offset = 0x02, .width = 2, .name = "MSI Message Control", .fixed = 0x0071, .why = kWhyMsi},
    {.offset = 0x04, .width = 4, .name = "MSI Message Address", .fixed = kAll, .why = kWhyMsi},
    {.offset = 0x08, .width = 4, .name = "MSI Message Upper Address", .fixed = kAll, .why = kWhyMsi},
    {.offset = 0x0c, .width = 2, .name = "MSI Message Data", .fixed = 0xffff, .why = kWhyMsi},
    {.offset = 0x0e, .width = 2, .name = "MSI Extended Message Data", .fixed = 0xffff, .why = kWhyMsi},
    {.offset = 0x10, .width = 4, .name = "MSI Mask Bits", .writable = kAll},
};
constexpr std::uint16_t kMsiControl64 = 0x0080;
constexpr std::uint16_t kMsiControlMaskBits = 0x0100;

// PCI Express (0x10). Device Control: error reporting enables, relaxed ordering, extended
// tag, aux power, no snoop, max read request; not Max_Payload_Size (the fabric's, system
// wide) nor phantom functions (read-only); initiate FLR (bit 15) only as 0. Link control
// (link disable, retrain, ASPM) is read-only. Device Control 2 all but ARI forwarding.
constexpr ConfigRule kExpress[] = {
    {.offset = 0x08, .width = 2, .name = "Device Control", .writable = 0x7d1f, .zero = 0x8000, .why = kWhyReset},
    {.offset = 0x0a, .width = 2, .name = "Device Status", .clear = 0x004f},
    {.offset = 0x12, .width = 2, .name = "Link Status", .clear = 0xc000},
    {.offset = 0x1a, .width = 2, .name = "Slot Status", .clear = 0x011f},
    {.offset = 0x20, .width = 4, .name = "Root Status", .clear = 0x00010000},
    {.offset = 0x28, .width = 2, .name = "Device Control 2", .writable = 0xffdf},
    {.offset = 0x32, .width = 2, .name = "Link Status 2", .clear = 0x0020},
};

// MSI-X (0x11): function mask writable, enable fixed; table and PBA location read-only.
constexpr ConfigRule kMsix[] = {
    {.offset = 0x02, .width = 2, .name = "MSI-X Message Control", .writable = 0x4000, .fixed = 0x8000, .why = kWhyMsi},
};

// Advanced Features (0x13): initiate FLR only as 0.
constexpr ConfigRule kAdvancedFeatures[] = {
    {.offset = 0x04, .width = 1, .name = "AF Control", .zero = 0x01, .why = kWhyReset},
};

// Advanced Error Reporting (extended 0x0001): the error bits vfio-pci lets a guest clear,
// mask and grade, and the ECRC enables; every other status bit is write-1-to-clear and
// stays as it is.
constexpr std::uint32_t kAerUncorrectable = 0x03fff031;
constexpr std::uint32_t kAerCorrectable = 0x0000f1c1;
constexpr ConfigRule kAer[] = {
    {.offset = 0x04, .width = 4, .name = "Uncorrectable Error Status", .writable = kAerUncorrectable, .clear = kAll},
    {.offset = 0x08, .width = 4, .name = "Uncorrectable Error Mask", .writable = kAerUncorrectable},
    {.offset = 0x0c, .width = 4, .name = "Uncorrectable Error Severity", .writable = kAerUncorrectable},
    {.offset = 0x10, .width = 4, .name = "Correctable Error Status", .writable = kAerCorrectable, .clear = kAll},
    {.offset = 0x14, .width = 4, .name = "Correctable Error Mask", .writable = kAerCorrectable},
    {.offset = 0x18, .width = 4, .name = "Advanced Error Capabilities and Control", .writable = 0x0140},
    {.offset = 0x30, .width = 4, .name = "Root Error Status", .clear = kAll},
};

// ---- Walking the capability lists ----------------------------------------------------------

struct Capability {
  std::uint32_t pos = 0;
  std::uint16_t id = 0;
  bool extended = false;
};

// How one capability is laid over config space.
struct Layout {
  const char* name = "unknown";
  std::uint32_t length = 0;  // 0: unknown, up to the next capability
  std::span<const ConfigRule> rules;
  std::uint32_t raw_from = 0;  // vendor-specific: writable from here to the end (0: none)
};

std::uint32_t le_get(std::span<const std::uint8_t> c, std::uint32_t at, unsigned width) {
  std::uint32_t v = 0;
  for (unsigned i = 0; i < width && at + i < c.size(); ++i) v |= std::uint32_t{c[at + i]} << (8 * i);
  return v;
}

// Both lists, in address order, each capability once (a list that loops names one twice).
std::vector<Capability> capabilities_find(std::span<const std::uint8_t> c) {
  std::vector<Capability> caps;
  const auto size = static_cast<std::uint32_t>(c.size());
  if (size >= kHeaderSize && (le_get(c, pci::kCfgStatus, 2) & pci::kStatusCapList)) {
    const std::uint32_t end = std::min(size, kLegacyEnd);
    std::uint32_t pos = c[pci::kCfgCapabilityPointer] & 0xfc;
    for (unsigned steps = 0; steps < (kLegacyEnd - kHeaderSize) / 4 && pos >= kHeaderSize && pos + 2 <= end; ++steps) {
      caps.push_back({pos, c[pos], false});
      pos = c[pos + 1] & 0xfc;
    }
  }
  if (size > kLegacyEnd) {
    std::uint32_t pos = kLegacyEnd;
    for (unsigned steps = 0; steps < (size - kLegacyEnd) / 4 && pos >= kLegacyEnd && pos + 4 <= size; ++steps) {
      const std::uint32_t header = le_get(c, pos, 4);
      if (header == 0 || header == kAll) break;  // no extended capabilities
      caps.push_back({pos, static_cast<std::uint16_t>(header & 0xffff), true});
      pos = (header >> 20) & 0xffc;
    }
  }
  std::sort(caps.begin(), caps.end(), [](const Capability& a, const Capability& b) { return a.pos < b.pos; });
  caps.erase(
      std::unique(caps.begin(), caps.end(), [](const Capability& a, const Capability& b) { return a.pos == b.pos; }),
      caps.end());
  return caps;
}

Layout capability_layout(std::span<const std::uint8_t> c, const Capability& cap) {
  if (cap.extended) {
    switch (cap.id) {
      case 0x0001:
        return {"AER", 0x38, kAer};
      case 0x000b:  // Vendor-Specific: the length sits in bits 31:20 of the VSEC header
        return {"Vendor-Specific", le_get(c, cap.pos + 4, 4) >> 20, {}, 8};
      case 0x0023:  // Designated Vendor-Specific: likewise, body after the DVSEC ID
        return {"Designated Vendor-Specific", le_get(c, cap.pos + 4, 4) >> 20, {}, 10};
      default:
        return {};
    }
  }
  switch (cap.id) {
    case 0x01:
      return {"Power Management", 8, kPowerManagement};
    case 0x03:
      return {"VPD", 8, kVpd};
    case pci::kCapIdMsi: {
      const std::uint32_t control = le_get(c, cap.pos + 2, 2);
      const bool wide = control & kMsiControl64;
      const std::span<const ConfigRule> rules = wide ? std::span<const ConfigRule>(kMsi64) : kMsi32;
      // Without per-vector masking the layout ends before the mask bits (the last rule).
      const bool masks = control & kMsiControlMaskBits;
      const std::uint32_t length = (wide ? 0x10 : 0x0c) + (masks ? 0x08 : 0);
      return {"MSI", length, masks ? rules : rules.first(rules.size() - 1)};
    }
    case 0x09:  // Vendor-Specific: ID, next, length, then the vendor's registers
      return {"Vendor-Specific", le_get(c, cap.pos + 2, 1), {}, 3};
    case pci::kCapIdExpress:
      return {"PCI Express", (le_get(c, cap.pos + 2, 2) & 0xf) >= 2 ? 0x3cu : 0x14u, kExpress};
    case 0x11:
      return {"MSI-X", 12, kMsix};
    case 0x13:
      return {"Advanced Features", 6, kAdvancedFeatures};
    default:
      return {};
  }
}

}  // namespace

void ConfigPolicy::span_set(std::uint32_t from, std::uint32_t to, std::uint8_t writable) {
  for (std::uint32_t i = from; i < to && i < bytes_.size(); ++i) bytes_[i] = ByteRule{.writable = writable};
}

void ConfigPolicy::rules_apply(std::uint32_t base, std::span<const ConfigRule> rules, const std::string& where) {
  for (const ConfigRule& r : rules) {
    const std::uint32_t at = base + r.offset;
    registers_.push_back({where.empty() ? std::string(r.name) : std::string(r.name) + " (" + where + ")", at, r.why});
    const auto reg = static_cast<std::uint16_t>(registers_.size() - 1);
    for (unsigned i = 0; i < r.width && at + i < bytes_.size(); ++i) {
      const auto lane = [&](std::uint32_t mask) { return static_cast<std::uint8_t>(mask >> (8 * i)); };
      bytes_[at + i] = ByteRule{lane(r.writable), lane(r.fixed), lane(r.zero), lane(r.clear), reg};
    }
  }
}

ConfigPolicy ConfigPolicy::build(std::span<const std::uint8_t> config) {
  ConfigPolicy p;
  const auto size = static_cast<std::uint32_t>(std::min<std::size_t>(config.size(), pci::kConfigSpaceSize));
  p.bytes_.assign(size, ByteRule{});
  // Past the header, what no capability claims goes through, as vfio-pci lets it.
  p.span_set(kHeaderSize, size, 0xff);
  p.rules_apply(0, kHeader, "");

  const std::vector<Capability> caps = capabilities_find(config.first(size));
  for (std::size_t k = 0; k < caps.size(); ++k) {
    const Capability& cap = caps[k];
    const std::uint32_t space_end = cap.extended ? size : std::min(size, kLegacyEnd);
    const std::uint32_t next =
        k + 1 < caps.size() && caps[k + 1].extended == cap.extended ? caps[k + 1].pos : space_end;
    const Layout layout = capability_layout(config, cap);
    // Never past the next capability: a capability that claims more is malformed, and an
    // unknown one is read-only up to there.
    const std::uint32_t length = layout.length == 0 ? next - cap.pos : std::min(layout.length, next - cap.pos);
    p.span_set(cap.pos, cap.pos + length, 0);
    const std::string where = cap.extended
                                  ? fmt::format("{} extended capability {:#06x} at {:#x}", layout.name, cap.id, cap.pos)
                                  : fmt::format("{} capability {:#04x} at {:#x}", layout.name, cap.id, cap.pos);
    std::vector<ConfigRule> inside;
    for (const ConfigRule& r : layout.rules)
      if (r.offset + r.width <= length) inside.push_back(r);
    p.rules_apply(cap.pos, inside, where);
    if (layout.raw_from != 0) p.span_set(cap.pos + layout.raw_from, cap.pos + length, 0xff);
    if (!cap.extended && cap.id == 0x11 && length >= 12) {
      const std::uint32_t table = le_get(config, cap.pos + 4, 4);
      const std::uint32_t entries = (le_get(config, cap.pos + 2, 2) & 0x7ff) + 1;
      p.msix_ = MsixTable{static_cast<std::uint8_t>(table & 0x7), table & ~std::uint32_t{7}, 16ull * entries};
    }
  }
  return p;
}

Result<ConfigPolicy::Write> ConfigPolicy::write_merge(std::uint32_t offset, unsigned width, std::uint32_t value,
                                                      std::uint32_t current) const {
  Write w;
  std::uint16_t refused_reg = 0;
  std::uint32_t changed = 0, set = 0;  // refused bits, relative to refused_reg
  for (unsigned i = 0; i < width; ++i) {
    const ByteRule& b = bytes_.at(offset + i);
    const auto v = static_cast<std::uint8_t>(value >> (8 * i));
    const auto c = static_cast<std::uint8_t>(current >> (8 * i));
    const std::uint8_t bad_fixed = (v ^ c) & b.fixed;
    const std::uint8_t bad_zero = v & b.zero;
    if ((bad_fixed | bad_zero) && (refused_reg == 0 || refused_reg == b.reg)) {
      refused_reg = b.reg;
      const unsigned shift = 8 * (offset + i - registers_[b.reg].offset);
      changed |= std::uint32_t{bad_fixed} << shift;
      set |= std::uint32_t{bad_zero} << shift;
    }
    const auto merged = static_cast<std::uint8_t>((v & b.writable) | (c & ~b.writable & ~(b.clear | b.zero)));
    w.value |= std::uint32_t{merged} << (8 * i);
    w.any = w.any || b.writable != 0;
  }
  if (refused_reg != 0) {
    const Register& r = registers_[refused_reg];
    std::string what = changed ? fmt::format("{} bits {:#x} may not change", r.name, changed)
                               : fmt::format("{} bits {:#x} may only be written as 0", r.name, set);
    if (changed && set) what += fmt::format(", bits {:#x} only as 0", set);
    return fail(EPERM, what + ": " + r.why);
  }
  return w;
}

std::optional<std::uint32_t> ConfigPolicy::restore_merge(std::uint32_t offset, unsigned width, std::uint32_t saved,
                                                         std::uint32_t current) const {
  std::uint32_t restore = 0, value = 0;
  for (unsigned i = 0; i < width; ++i) {
    const ByteRule& b = bytes_.at(offset + i);
    const auto back = static_cast<std::uint8_t>(b.writable & ~b.clear);
    const auto s = static_cast<std::uint8_t>(saved >> (8 * i));
    const auto c = static_cast<std::uint8_t>(current >> (8 * i));
    restore |= std::uint32_t{back} << (8 * i);
    value |= std::uint32_t(static_cast<std::uint8_t>((s & back) | (c & ~b.writable & ~(b.clear | b.zero)))) << (8 * i);
  }
  if (((saved ^ current) & restore) == 0) return std::nullopt;
  return value;
}

}  // namespace rpcie::dev
