#include "file_port.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "trap_table.hpp"

namespace rpcie::mmio {

namespace {

// One pread/pwrite (`io`) of exactly `width` bytes, EINTR retried. false: a short or failed
// transfer, whose errno (EIO for a short one) goes to `failed_errno`. errno is left as the
// caller had it: the access may run inside a signal handler.
template <class Io>
bool transfer_exact(Io io, unsigned width, int& failed_errno) noexcept {
  const int saved = errno;
  ssize_t n;
  do {
    n = io();
  } while (n < 0 && errno == EINTR);
  const bool ok = n == static_cast<ssize_t>(width);
  if (!ok) failed_errno = n < 0 ? errno : EIO;
  errno = saved;
  return ok;
}

}  // namespace

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
  unsigned char bytes[8] = {};
  const auto pread_once = [&] { return ::pread(fd_, bytes, width, static_cast<off_t>(offset)); };
  if (!transfer_exact(pread_once, width, last_errno_)) return false;
  value = 0;
  for (unsigned i = 0; i < width; ++i) value |= std::uint64_t{bytes[i]} << (8 * i);  // little-endian, as PCIe
  return true;
}

bool FilePort::store(std::uint64_t offset, unsigned width, std::uint64_t value) noexcept {
  if (width == 0 || width > 8) return false;
  if (writeback_ != nullptr) {
    const int saved = errno;  // msync's failure is not the store's
    writeback_->memory_each(device_, [](std::uintptr_t base, std::size_t length) {
      ::msync(reinterpret_cast<void*>(base), length, MS_SYNC);
    });
    errno = saved;
  }
  unsigned char bytes[8];
  for (unsigned i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  const auto pwrite_once = [&] { return ::pwrite(fd_, bytes, width, static_cast<off_t>(offset)); };
  return transfer_exact(pwrite_once, width, last_errno_);
}

}  // namespace rpcie::mmio
