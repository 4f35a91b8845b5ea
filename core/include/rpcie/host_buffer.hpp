// HostBuffer: page-aligned anonymous memory (mmap), zero-filled, owned (munmap on
// destruction). Part of core's base: a backend's memory BAR and the transport's registered
// buffers are both HostBuffers, and a backend that uses one sees nothing of the fabric.
// Move-only; not thread-safe itself (the bytes are the owner's to guard).
#pragma once

#include <cstddef>
#include <cstdint>

#include "rpcie/result.hpp"

namespace rpcie {

class HostBuffer {
 public:
  static Result<HostBuffer> create(std::size_t length);
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  ~HostBuffer();
  std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }

 private:
  HostBuffer() = default;
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace rpcie
