// Mapping: an owned mmap(2) region, unmapped on destruction. Part of core's base: HostBuffer
// is one, and a backend maps a device's resource file with one. Move-only; not thread-safe
// itself (the bytes are the owner's to guard).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "rpcie/result.hpp"

namespace rpcie {

class Mapping {
 public:
  Mapping() = default;
  // `length` (> 0) bytes of private anonymous memory, zero-filled, page-aligned.
  static Result<Mapping> anonymous(std::size_t length);
  // `length` bytes of `fd` from offset 0, shared and read-write. The mapping covers whole
  // pages (a file smaller than a page, like a small BAR's resourceN, still maps one page);
  // size() is the rounded length, and keeping accesses inside the file is the caller's part.
  static Result<Mapping> shared(int fd, std::size_t length);

  Mapping(Mapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

 private:
  Mapping(void* data, std::size_t size) noexcept : data_(static_cast<std::uint8_t*>(data)), size_(size) {}
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace rpcie
