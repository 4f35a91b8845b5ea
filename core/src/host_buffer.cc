#include "rpcie/host_buffer.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <string>
#include <utility>

namespace rpcie {

Result<HostBuffer> HostBuffer::create(std::size_t length) {
  if (length == 0) return fail(EINVAL, "empty host buffer");
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(errno, "mmap of a " + std::to_string(length) + "-byte buffer");
  HostBuffer b;
  b.data_ = static_cast<std::uint8_t*>(p);
  b.size_ = length;
  return b;
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}
HostBuffer::~HostBuffer() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace rpcie
