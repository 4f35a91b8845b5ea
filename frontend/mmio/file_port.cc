#include "file_port.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trap_table.hpp"

namespace rpcie::mmio {

void FilePort::open(int fd, const DeviceKey& device, const TrapTable* writeback) noexcept {
  close();
  fd_ = fd;
  device_ = device;
  writeback_ = writeback;
  last_errno_ = 0;
}

void FilePort::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool FilePort::load(std::uint64_t offset, unsigned width, std::uint64_t& value) noexcept {
  if (width == 0 || width > 8) return false;
  const int saved = errno;
  unsigned char bytes[8] = {};
  ssize_t n;
  do {
    n = ::pread(fd_, bytes, width, static_cast<off_t>(offset));
  } while (n < 0 && errno == EINTR);
  const bool ok = n == static_cast<ssize_t>(width);
  if (!ok) last_errno_ = n < 0 ? errno : EIO;
  errno = saved;
  if (!ok) return false;
  value = 0;
  for (unsigned i = 0; i < width; ++i) value |= std::uint64_t{bytes[i]} << (8 * i);  // little-endian, as PCIe
  return true;
}

bool FilePort::store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept {
  if (width == 0 || width > 8) return false;
  const int saved = errno;
  if (writeback_ != nullptr)
    writeback_->memory_each(device_, [](std::uintptr_t base, std::size_t length) {
      ::msync(reinterpret_cast<void*>(base), length, MS_SYNC);
    });
  unsigned char bytes[8];
  for (unsigned i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  ssize_t n;
  do {
    n = ::pwrite(fd_, bytes, width, static_cast<off_t>(offset));
  } while (n < 0 && errno == EINTR);
  const bool ok = n == static_cast<ssize_t>(width);
  if (!ok) last_errno_ = n < 0 ? errno : EIO;
  errno = saved;
  return ok;
}

}  // namespace rpcie::mmio
