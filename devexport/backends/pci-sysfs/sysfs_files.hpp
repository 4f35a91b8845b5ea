// Reading a PCI function's sysfs directory: owned file descriptors and mappings, the text
// attributes, the driver link. Internal to the pci-sysfs backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "rpcie/result.hpp"

namespace rpcie::dev::sysfs {

// An owned file descriptor; closed on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// An owned shared mapping of a file; unmapped on destruction. Move-only.
class Mapping {
 public:
  Mapping() = default;
  // Maps `length` bytes (rounded up to pages) of `fd` from offset 0, read-write.
  static Result<Mapping> map(int fd, std::size_t length);
  Mapping(Mapping&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), length_(std::exchange(other.length_, 0)) {}
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
  std::uint8_t* data() const noexcept { return base_; }
  explicit operator bool() const noexcept { return base_ != nullptr; }

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t length_ = 0;
};

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
