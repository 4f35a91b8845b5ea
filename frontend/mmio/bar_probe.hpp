// Is an open file a register BAR of an rpcie device? librpcie-mmio.so asks only after the
// kernel refused to map the file with ENODEV (what rpcie-hostd answers for a register BAR),
// so the probe costs nothing on ordinary mmap calls.
//
// A file is an rpcie BAR when its path (readlink of /proc/self/fd/N, so /dev/rpcieN links
// resolve) ends in `resourceN` (N = 0..5) and the directory beside it holds rpcie's
// `remote` file (a regular file; rpcie-hostd(8)). The filesystem is not checked: what makes
// the answer is the layout plus the ENODEV, which keeps the probe testable without FUSE.
//
// Async-signal-safe (only readlink, fstat, stat and fcntl); no allocation.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace rpcie::mmio {

// Identifies a device: its directory's inode. Memory-BAR mappings and register-BAR ports
// with equal keys belong to one device (PCIe ordering across its BARs).
struct DeviceKey {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const DeviceKey&) const = default;
};

struct BarFile {
  unsigned bar = 0;        // N of resourceN
  std::uint64_t size = 0;  // the file's size: the BAR's size
  bool writable = false;   // the descriptor was opened for writing
  DeviceKey device;
};

inline constexpr std::size_t kPathMax = 4096;

// N when the last component of `path` is exactly "resourceN" with N in 0..5, else -1
// ("resource", "resource6", "resource0_wc", "resource01" are not BAR files rpcie serves).
int bar_path_number(const char* path) noexcept;

// Whether `path`'s directory holds a regular file `remote`; fills `device` with the
// directory's identity.
bool bar_directory_is_rpcie(const char* path, DeviceKey& device) noexcept;

// Probes descriptor `fd` (see above): true and `file` filled when it is an rpcie BAR file.
bool bar_probe(int fd, BarFile& file) noexcept;

// The kernel's answer for mapping [offset, offset + length) of a BAR of `size` bytes: 0, or
// EINVAL for a zero length, an offset not page-aligned, or pages past the BAR's last page
// (both rounded up to whole pages, as the kernel checks a real BAR).
int bar_range_check(std::uint64_t size, std::uint64_t offset, std::uint64_t length) noexcept;

}  // namespace rpcie::mmio
