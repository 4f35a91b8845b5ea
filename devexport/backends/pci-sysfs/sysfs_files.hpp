// Reading a PCI function's sysfs directory: opening its files, the text attributes, the
// driver link. Internal to the pci-sysfs backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rpcie/fd.hpp"
#include "rpcie/result.hpp"

namespace rpcie::dev::sysfs {

// open(2) with O_CLOEXEC; the error names the path.
Result<Fd> file_open(const std::string& path, int flags);

// The whole content of a small file (a sysfs attribute); EIO beyond 64 KiB.
Result<std::string> text_read(const std::string& path);

// "0x1af4\n" -> 0x1af4: 0x prefix, hex digits, optional trailing white space, at most `max`.
std::optional<std::uint64_t> hex_parse(std::string_view text, std::uint64_t max);

// The name of the driver bound to the function in `dir` (the last component of its
// `driver` link), or empty when none is bound. A link that exists but cannot be read
// counts as bound (named "unknown"): the safe answer.
std::string driver_bound(const std::string& dir);

}  // namespace rpcie::dev::sysfs
