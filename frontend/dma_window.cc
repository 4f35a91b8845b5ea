#include "dma_window.hpp"

#include <cerrno>
#include <cstdio>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace rpcie::hostd {

std::string window_file_name(pid_t pid, unsigned index, std::uint64_t serial) {
  return "rpcie-dma-" + std::to_string(pid) + "-rpcie" + std::to_string(index) + "-" + std::to_string(serial);
}

std::optional<pid_t> window_file_pid(const std::string& name) {
  unsigned long pid = 0;
  if (std::sscanf(name.c_str(), "rpcie-dma-%lu-", &pid) != 1 || pid == 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

Result<DmaWindowFile> DmaWindowFile::create(const std::string& dir, const std::string& name, std::size_t size,
                                            gid_t group, mode_t mode) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (size == 0 || size % page != 0)
    return fail(EINVAL, "DMA window size " + std::to_string(size) + " is not a positive multiple of the page size");
  DmaWindowFile w;
  w.path_ = dir + "/" + name;
  int fd = ::open(w.path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return fail(errno, "create DMA window " + w.path_);
  auto undo = [&](int e, const char* what) {
    ::close(fd);
    ::unlink(w.path_.c_str());
    w.path_.clear();
    return fail(e, std::string(what) + " " + dir + "/" + name);
  };
  // fchown before fchmod: chown may clear mode bits; mode is applied last and exactly.
  if (::fchown(fd, 0, group) != 0) return undo(errno, "chown DMA window");
  if (::fchmod(fd, mode) != 0) return undo(errno, "chmod DMA window");
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return undo(errno, "size DMA window");
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return undo(errno, "map DMA window");
  ::close(fd);  // the mapping keeps the file
  w.linked_ = true;
  w.base_ = p;
  w.size_ = size;
  return w;
}

DmaWindowFile::DmaWindowFile(DmaWindowFile&& other) noexcept
    : path_(std::exchange(other.path_, {})),
      linked_(std::exchange(other.linked_, false)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DmaWindowFile& DmaWindowFile::operator=(DmaWindowFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::exchange(other.path_, {});
    linked_ = std::exchange(other.linked_, false);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DmaWindowFile::~DmaWindowFile() { release(); }

void DmaWindowFile::unlink() noexcept {
  if (linked_) ::unlink(path_.c_str());
  linked_ = false;
}

void DmaWindowFile::release() noexcept {
  if (base_) ::munmap(base_, size_);
  unlink();
  base_ = nullptr;
  size_ = 0;
  path_.clear();
}

}  // namespace rpcie::hostd
