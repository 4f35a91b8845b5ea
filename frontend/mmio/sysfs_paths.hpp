// /sys/bus/pci/devices paths of rpcie devices, for programs run under `rpcie run` that have
// the sysfs path of a PCI function written into them (DPDK, pciutils, vendor tools). An rpcie
// function's address has a domain of at least 0x10000, which no real function has, so
// `/sys/bus/pci/devices/10000:00:00.0/...` can only mean the rpcie device directory
// `<devices>/10000:00:00.0/...` (devices: $RPCIE_MOUNT/pci/devices, default
// /run/rpcie/pci/devices). Everything else is left as the program wrote it.
//
// Pure functions on strings plus one existence check: no allocation, thread-safe.
#pragma once

#include <cstddef>

namespace rpcie::mmio {

inline constexpr const char* kSysfsPciDevices = "/sys/bus/pci/devices";

// Whether `name` (one path component) is an rpcie function address: DDDDD+:BB:DD.F with a
// hexadecimal domain of at least 0x10000.
bool bdf_is_rpcie(const char* name, std::size_t length) noexcept;

// If `path` is /sys/bus/pci/devices/<rpcie address>[/rest] (absolute, no "." or ".."
// components before the address), writes <devices>/<address>[/rest] into `out` and returns
// true; `out` must hold `size` bytes (false when it would not fit). The directory need not exist.
bool sysfs_path_rewrite(const char* path, const char* devices, char* out, std::size_t size) noexcept;

// Whether a relative `path` may name an rpcie function through a directory: one of its
// components is an rpcie address. The cheap test (a memchr for ':' on most paths) before
// the directory a descriptor stands for is looked up.
bool sysfs_relative_candidate(const char* path) noexcept;

// sysfs_path_rewrite of `dir`/`path`: `dir` is the absolute directory a relative `path`
// (leading "./" allowed) is resolved against (a descriptor's, or the working directory).
bool sysfs_path_rewrite_at(const char* dir, const char* path, const char* devices, char* out,
                           std::size_t size) noexcept;

// Whether `path` names the directory /sys/bus/pci/devices itself (trailing slashes allowed).
bool sysfs_path_is_devices_dir(const char* path) noexcept;

// The rpcie devices directory: $RPCIE_MOUNT/pci/devices, or /run/rpcie/pci/devices.
// Read once; the returned string lives for the process.
const char* rpcie_devices_dir() noexcept;

}  // namespace rpcie::mmio
