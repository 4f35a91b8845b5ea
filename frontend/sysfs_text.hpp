// The text files of a device directory, as Linux sysfs writes them for a PCI function, so that
// pciutils reads the tree unchanged: vendor, device, class, revision, subsystem_vendor,
// subsystem_device, irq, resource; and `remote`, which is rpcie's own (where the device is).
// docs/rpcie-hostd.md describes each. Thread-safety: no state.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "inode.hpp"
#include "remote_device.hpp"
#include "rpcie/client.hpp"
#include "rpcie/pci.hpp"

namespace rpcie::hostd {

struct TextFile {
  const char* name;
  FileId id;
};
inline constexpr TextFile kTextFiles[] = {
    {"vendor", kVendor},
    {"device", kDevice},
    {"class", kClass},
    {"revision", kRevision},
    {"subsystem_vendor", kSubsysVendor},
    {"subsystem_device", kSubsysDevice},
    {"irq", kIrq},
    {"resource", kResource},
    {"remote", kRemote},
};

// "0x" and `digits` lowercase hex digits, then a newline: sysfs's identity attributes.
std::string sysfs_hex_line(unsigned value, int digits);
// As the kernel writes `resource`: one line of start, end and IORESOURCE_* flags per region
// (BAR0-5, then the expansion ROM, which rpcie never has); zeros where there is no region.
// `addresses` are the BARs' start addresses, by BAR number.
std::string sysfs_resource_text(const client::ExportDesc& d,
                                const std::array<std::uint64_t, pci::kBarCount>& addresses);
// `remote`: exporter, export, provider, data path (sealed / open), link state and
// generation, and the last error while
// the link is down.
std::string sysfs_remote_text(const AttachParams& p, const RemoteDevice::Status& s);
// The text of file `id` of `n` (empty for an id that is no text file).
std::string sysfs_text(const Node& n, unsigned id);

}  // namespace rpcie::hostd
