// The device directory's files, used the way its contract (rpcie-hostd, docs) says: config
// at exact offsets, resource0 one naturally aligned access per call, dma mapped shared,
// events with UIO semantics.
#include "posix_device.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace rpcie::edu_driver {
namespace {

using Clock = std::chrono::steady_clock;

std::string at(const char* op, const char* file, std::uint64_t offset) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s %s at 0x%" PRIx64, op, file, offset);
  return buf;
}

// pread/pwrite that retry on EINTR and report a short transfer as EIO: on these files a
// short count means the daemon did something other than the one access asked for.
// `transfer` is ::pread or ::pwrite (bound to its buffer), `op` its name for the message.
template <class Transfer>
Error transfer_exact(Transfer transfer, const char* op, int fd, std::size_t size, std::uint64_t offset,
                     const char* file) {
  for (;;) {
    const ssize_t n = transfer(fd, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {errno, at(op, file, offset)};
    if (static_cast<std::size_t>(n) != size)
      return {EIO, at(op, file, offset) + " moved " + std::to_string(n) + " of " + std::to_string(size) + " bytes"};
    return {};
  }
}

Error pread_exact(int fd, void* into, std::size_t size, std::uint64_t offset, const char* file) {
  return transfer_exact([into](int f, std::size_t n, off_t o) { return ::pread(f, into, n, o); }, "pread", fd, size,
                        offset, file);
}

Error pwrite_exact(int fd, const void* from, std::size_t size, std::uint64_t offset, const char* file) {
  return transfer_exact([from](int f, std::size_t n, off_t o) { return ::pwrite(f, from, n, o); }, "pwrite", fd, size,
                        offset, file);
}

void fd_close(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Error PosixDevice::open(const std::string& path, BarAccess access, std::unique_ptr<PosixDevice>& device) {
  std::unique_ptr<PosixDevice> made(new PosixDevice());
  // Everything else is opened relative to this descriptor, so the directory (or the
  // /dev/rpcieN link to it) is resolved once.
  made->dir_fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (made->dir_fd_ < 0) return {errno, "open " + path};
  struct File {
    const char* name;
    int flags;
    int* fd;
  };
  // events non-blocking: a read is only made after poll said readable, but should the
  // daemon disagree, EAGAIN sends the driver back to its bounded poll instead of blocking.
  const File files[] = {{"config", O_RDONLY, &made->config_fd_},
                        {"resource0", O_RDWR, &made->bar_fd_},
                        {"events", O_RDWR | O_NONBLOCK, &made->events_fd_}};
  for (const File& file : files) {
    *file.fd = ::openat(made->dir_fd_, file.name, file.flags | O_CLOEXEC);
    if (*file.fd < 0) return {errno, "open " + path + "/" + file.name};
  }
  if (access == BarAccess::mapped)
    if (Error error = made->bar_map()) return error;
  device = std::move(made);
  return {};
}

Error PosixDevice::bar_map() {
  struct stat st {};
  if (::fstat(bar_fd_, &st) != 0) return {errno, "stat resource0"};
  if (st.st_size <= 0) return {EIO, "resource0 has no size"};
  void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, bar_fd_, 0);
  if (p == MAP_FAILED) {
    const int code = errno;
    return {code, std::string("mmap resource0") + (code == ENODEV ? " (run the driver under `rpcie run`)" : "")};
  }
  bar_ = static_cast<volatile std::uint8_t*>(p);
  bar_size_ = static_cast<std::size_t>(st.st_size);
  return {};
}

PosixDevice::~PosixDevice() {
  if (dma_ != nullptr) ::munmap(dma_, dma_size_);
  if (bar_ != nullptr) ::munmap(const_cast<std::uint8_t*>(bar_), bar_size_);
  fd_close(events_fd_);
  fd_close(bar_fd_);
  fd_close(config_fd_);
  fd_close(dir_fd_);
}

Error PosixDevice::attr_read(std::string_view name, std::string& text) {
  const std::string file(name);
  const int fd = ::openat(dir_fd_, file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {errno, "open " + file};
  // sysfs attributes are at most a page.
  char buf[4096];
  std::size_t used = 0;
  Error error;
  while (used < sizeof buf) {
    const ssize_t n = ::pread(fd, buf + used, sizeof buf - used, static_cast<off_t>(used));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = {errno, "read " + file};
      break;
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (!error) text.assign(buf, used);
  return error;
}

Error PosixDevice::config_read(std::uint32_t offset, std::span<std::uint8_t> into) {
  return pread_exact(config_fd_, into.data(), into.size(), offset, "config");
}

Error PosixDevice::bar_read(std::uint64_t offset, unsigned width, std::uint64_t& value) {
  if (bar_ != nullptr) return bar_load(offset, width, value);
  // One access of exactly `width` bytes into a variable of that width (host byte order,
  // as the daemon returns the register's value).
  switch (width) {
    case 4: {
      std::uint32_t v = 0;
      Error error = pread_exact(bar_fd_, &v, sizeof v, offset, "resource0");
      value = v;
      return error;
    }
    case 8:
      return pread_exact(bar_fd_, &value, sizeof value, offset, "resource0");
    default:
      return {EINVAL, at("pread", "resource0", offset) + " with width " + std::to_string(width)};
  }
}

Error PosixDevice::bar_write(std::uint64_t offset, unsigned width, std::uint64_t value) {
  if (bar_ != nullptr) return bar_store(offset, width, value);
  switch (width) {
    case 4: {
      const auto v = static_cast<std::uint32_t>(value);
      return pwrite_exact(bar_fd_, &v, sizeof v, offset, "resource0");
    }
    case 8:
      return pwrite_exact(bar_fd_, &value, sizeof value, offset, "resource0");
    default:
      return {EINVAL, at("pwrite", "resource0", offset) + " with width " + std::to_string(width)};
  }
}

// One load or store of exactly `width` bytes: volatile, so the compiler neither merges,
// splits nor drops it, and a mapped register sees what a pread/pwrite would have sent.
Error PosixDevice::bar_load(std::uint64_t offset, unsigned width, std::uint64_t& value) const {
  if ((width != 4 && width != 8) || offset % width != 0 || offset + width > bar_size_)
    return {EINVAL, at("load", "resource0", offset) + " with width " + std::to_string(width)};
  if (width == 4)
    value = *reinterpret_cast<volatile const std::uint32_t*>(bar_ + offset);
  else
    value = *reinterpret_cast<volatile const std::uint64_t*>(bar_ + offset);
  return {};
}

Error PosixDevice::bar_store(std::uint64_t offset, unsigned width, std::uint64_t value) const {
  if ((width != 4 && width != 8) || offset % width != 0 || offset + width > bar_size_)
    return {EINVAL, at("store", "resource0", offset) + " with width " + std::to_string(width)};
  if (width == 4)
    *reinterpret_cast<volatile std::uint32_t*>(bar_ + offset) = static_cast<std::uint32_t>(value);
  else
    *reinterpret_cast<volatile std::uint64_t*>(bar_ + offset) = value;
  return {};
}

Error PosixDevice::dma_map(std::span<std::uint8_t>& window) {
  if (dma_ == nullptr) {
    // dma is a symbolic link to the window's shared-memory file; openat follows it.
    const int fd = ::openat(dir_fd_, "dma", O_RDWR | O_CLOEXEC);
    if (fd < 0) return {errno, "open dma"};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      Error error{errno, "fstat dma"};
      ::close(fd);
      return error;
    }
    if (st.st_size <= 0) {
      ::close(fd);
      return {EINVAL, "dma: the window file is empty"};
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    // MAP_SHARED: the driver's stores must land in the very pages the daemon lends to the
    // fabric, and the device's writes must show up here.
    void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int mmap_errno = errno;
    ::close(fd);  // the mapping keeps the file
    if (mapped == MAP_FAILED) return {mmap_errno, "mmap dma"};
    dma_ = mapped;
    dma_size_ = size;
  }
  window = {static_cast<std::uint8_t*>(dma_), dma_size_};
  return {};
}

Error PosixDevice::events_wait(std::chrono::milliseconds timeout, std::uint32_t& count) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return {ETIMEDOUT, "no interrupt on events within " + std::to_string(timeout.count()) + " ms"};
    pollfd pfd{events_fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return {errno, "poll events"};
    if (ready == 0) continue;  // the loop head decides whether time is up
    if ((pfd.revents & POLLNVAL) != 0) return {EBADF, "poll events"};
    // POLLIN, or POLLERR when the link was lost: the read then reports the daemon's errno.
    std::uint32_t value = 0;
    const ssize_t n = ::read(events_fd_, &value, sizeof value);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if ((pfd.revents & (POLLERR | POLLHUP)) != 0) return {EIO, "poll events reported an error"};
      continue;
    }
    if (n < 0) return {errno, "read events"};
    if (n != sizeof value)
      return {EIO, "read events returned " + std::to_string(n) + " of " + std::to_string(sizeof value) + " bytes"};
    count = value;
    return {};
  }
}

Error PosixDevice::events_unmask() {
  const std::uint32_t one = 1;
  for (;;) {
    const ssize_t n = ::write(events_fd_, &one, sizeof one);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {errno, "write 1 to events (unmask)"};
    if (n != sizeof one) return {EIO, "write events wrote " + std::to_string(n) + " of 4 bytes"};
    return {};
  }
}

}  // namespace rpcie::edu_driver
