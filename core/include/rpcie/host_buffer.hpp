// HostBuffer: page-aligned anonymous memory (an anonymous Mapping), zero-filled, owned. Part of core's base: a
// backend's memory BAR and the transport's registered buffers are both HostBuffers, and a backend that uses one sees
// nothing of the fabric. Move-only; not thread-safe itself (the bytes are the owner's to guard).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "rpcie/mapping.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

class HostBuffer {
 public:
  // EINVAL for length 0; the mmap errno otherwise.
  static Result<HostBuffer> create(std::size_t length) {
    RPCIE_TRY_ASSIGN(Mapping memory, Mapping::anonymous(length));
    return HostBuffer(std::move(memory));
  }
  std::uint8_t* data() const noexcept { return memory_.data(); }
  std::size_t size() const noexcept { return memory_.size(); }

 private:
  explicit HostBuffer(Mapping memory) noexcept : memory_(std::move(memory)) {}
  Mapping memory_;
};

}  // namespace rpcie
