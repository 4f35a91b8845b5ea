#include "sysfs_text.hpp"

#include <cstdio>
#include <tuple>

namespace rpcie::hostd {

namespace {

// include/linux/ioport.h
constexpr std::uint64_t kIoresourceIo = 0x100;
constexpr std::uint64_t kIoresourceMem = 0x200;
constexpr std::uint64_t kIoresourcePrefetch = 0x2000;
constexpr std::uint64_t kIoresourceReadonly = 0x4000;
constexpr std::uint64_t kIoresourceMem64 = 0x100000;

std::uint64_t resource_flags(const client::BarDesc& b) {
  std::uint64_t flags = 0;
  if (b.kind == pci::BarKind::io) {
    flags = kIoresourceIo;
  } else {
    flags = kIoresourceMem;
    if (b.kind == pci::BarKind::memory) flags |= kIoresourcePrefetch;
    if (b.is_64bit) flags |= kIoresourceMem64;
  }
  if (b.readonly) flags |= kIoresourceReadonly;
  return flags;
}

}  // namespace

std::string sysfs_hex_line(unsigned value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*x\n", digits, value);
  return buf;
}

std::string sysfs_resource_text(const client::ExportDesc& d,
                                const std::array<std::uint64_t, pci::kBarCount>& addresses) {
  std::string out;
  for (std::uint8_t i = 0; i < pci::kBarCount + 1; ++i) {  // + 1: the ROM's line
    std::uint64_t start = 0, end = 0, flags = 0;
    if (const auto* b = i < pci::kBarCount ? d.bar_find(i) : nullptr) {
      start = addresses[i];
      end = start + b->size - 1;
      flags = resource_flags(*b);
    }
    char line[64];
    std::snprintf(line, sizeof line, "0x%016llx 0x%016llx 0x%016llx\n", static_cast<unsigned long long>(start),
                  static_cast<unsigned long long>(end), static_cast<unsigned long long>(flags));
    out += line;
  }
  return out;
}

std::string sysfs_remote_text(const AttachParams& p, const RemoteDevice::Status& s) {
  std::string out = "exporter " + p.host + ":" + std::to_string(p.port) + "\nexport " + p.export_name + "\nprovider " +
                    (s.provider.empty() ? "-" : s.provider) + "\ndata_path " + data_path_name(s.data_path) +
                    "\nstate " + link_state_name(s.state) + "\ngeneration " + std::to_string(s.generation) + "\n";
  if (!s.last_error.empty() && s.state != LinkState::connected) out += "error " + s.last_error + "\n";
  return out;
}

std::string sysfs_text(const Node& n, unsigned id) {
  const auto& d = n.dev->desc();
  // The identity attributes: value and digits, as the kernel prints them.
  const std::tuple<unsigned, unsigned, int> hex_attributes[] = {
      {kVendor, d.vendor, 4},
      {kDevice, d.device, 4},
      {kClass, d.class_code, 6},
      {kRevision, d.revision, 2},
      {kSubsysVendor, d.subsystem_vendor, 4},
      {kSubsysDevice, d.subsystem_device, 4},
  };
  for (const auto& [attribute, value, digits] : hex_attributes)
    if (attribute == id) return sysfs_hex_line(value, digits);
  switch (id) {
    case kIrq:
      return "0\n";
    case kResource: {
      std::array<std::uint64_t, pci::kBarCount> addresses{};
      for (std::uint8_t i = 0; i < pci::kBarCount; ++i) addresses[i] = n.dev->bar_address(i);
      return sysfs_resource_text(d, addresses);
    }
    case kRemote:
      return sysfs_remote_text(n.dev->params(), n.dev->status());
  }
  return {};
}

}  // namespace rpcie::hostd
