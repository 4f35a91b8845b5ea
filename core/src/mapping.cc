#include "rpcie/mapping.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace rpcie {

Result<Mapping> Mapping::anonymous(std::size_t length) {
  if (length == 0) return fail(EINVAL, "empty host buffer");
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(errno, "mmap of a " + std::to_string(length) + "-byte buffer");
  return Mapping(p, length);
}

Result<Mapping> Mapping::shared(int fd, std::size_t length) {
  if (length == 0) return fail(EINVAL, "mmap of an empty file");
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t rounded = (length + page - 1) / page * page;
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(errno, "mmap");
  return Mapping(p, rounded);
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace rpcie
