// pci-sysfs: which config-space bits a client may write, for one type-0 function.
//
// The reference is what a passthrough hypervisor lets a guest write (Linux vfio-pci's
// virtualised config space, under QEMU), tightened where pci-sysfs has no IOMMU and
// delivers no interrupts. The rules are tables of registers (offset inside the header or
// inside a capability, width, bit masks) in config_policy.cc; build() walks the function's
// capability lists once and lays the tables over its config space byte by byte.
//
// Every bit of config space is in one of five classes:
//   writable  the client's value reaches the device.
//   fixed     the write must carry the value the device has now (bus mastering, BARs, the
//             expansion ROM, MSI/MSI-X address, data and enable, the power state).
//   zero      write-1-to-act bits the write must carry as 0 (initiate FLR, a VPD write).
//   clear     write-1-to-clear status bits the client may not clear: written as 0.
//   read-only everything else: the client's value is dropped and the device's current
//             value written in its place, as a read-only register ignores a write.
// A write that would change a fixed bit or set a zero bit is refused whole (EPERM): not one
// of its bits reaches the device, not even the writable ones beside it.
//
// Space no capability claims (past the header, between capabilities) is writable, as
// vfio-pci leaves it (devices hide registers there); a capability whose layout is not in
// the tables is read-only up to the next capability.
//
// Thread-safety: immutable after build(); const calls from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rpcie/result.hpp"

namespace rpcie::dev {

// One register's rule. Offsets are relative to the capability (absolute in the header).
struct ConfigRule {
  std::uint16_t offset = 0;
  std::uint8_t width = 0;  // 1, 2 or 4
  const char* name = "";   // as the PCI specifications name the register
  std::uint32_t writable = 0;
  std::uint32_t fixed = 0;
  std::uint32_t zero = 0;
  std::uint32_t clear = 0;
  const char* why = "";  // why its fixed and zero bits are refused
};

// Where the MSI-X table lives: a memory BAR. Its entries hold the MSI-X message addresses
// and data, so register writes into it are refused like the MSI capability's.
struct MsixTable {
  std::uint8_t bar = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;  // 16 bytes per entry
};

class ConfigPolicy {
 public:
  ConfigPolicy() = default;

  // The policy for a function whose config space reads as `config` (what its config file
  // gave: 256 or 4096 bytes, at least the 64-byte header). Capability lists are followed
  // only inside `config`, each a bounded number of steps (a looping list ends).
  static ConfigPolicy build(std::span<const std::uint8_t> config);

  struct Write {
    bool any = false;         // false: the access holds no writable bit; nothing to write
    std::uint32_t value = 0;  // what to write to the device
  };
  // A client's write of `value` to [offset, offset + width) (inside the space given to
  // build()), against `current`, the device's value of those bytes now. EPERM naming the
  // register, the refused bits and why, when it would change a fixed bit or set a zero bit.
  Result<Write> write_merge(std::uint32_t offset, unsigned width, std::uint32_t value, std::uint32_t current) const;

  // The value that brings the writable bits of [offset, offset + width) (not the
  // write-1-to-clear ones) back to `saved`, leaving the rest as `current` has them (0 in
  // clear and zero bits); nullopt when they already match.
  std::optional<std::uint32_t> restore_merge(std::uint32_t offset, unsigned width, std::uint32_t saved,
                                             std::uint32_t current) const;

  std::optional<MsixTable> msix_table() const noexcept { return msix_; }
  std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(bytes_.size()); }

 private:
  struct ByteRule {
    std::uint8_t writable = 0;
    std::uint8_t fixed = 0;
    std::uint8_t zero = 0;
    std::uint8_t clear = 0;
    std::uint16_t reg = 0;  // index into registers_ (0: no named register)
  };
  struct Register {
    std::string name;
    std::uint32_t offset = 0;  // absolute offset of the register's first byte
    const char* why = "";
  };

  void rules_apply(std::uint32_t base, std::span<const ConfigRule> rules, const std::string& where);
  void span_set(std::uint32_t from, std::uint32_t to, std::uint8_t writable);

  std::vector<ByteRule> bytes_;
  std::vector<Register> registers_{Register{}};
  std::optional<MsixTable> msix_;
};

}  // namespace rpcie::dev
