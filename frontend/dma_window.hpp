// A DMA window as a shared-memory file: hostd creates it, maps it, and the attachment
// registers the mapping with the fabric, so the remote device's DMA reads and writes this
// very memory. The device directory's `dma` symlink points at the file: a driver that maps
// it shares the pages (offset == IOVA, zero copy).
// Ownership: move-only; the destructor unmaps and unlinks the file (a driver that still has
// it mapped keeps its pages, which are no longer anyone's DMA window). path() stays valid
// after unlink(), for the `dma` link text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <sys/types.h>

#include "rpcie/result.hpp"

namespace rpcie::hostd {

// Window file names carry the pid of the hostd that made them (rpcie-dma-<pid>-rpcie<N>-
// <serial>), so that files of a hostd that died are told apart from a running one's.
std::string window_file_name(pid_t pid, unsigned index, std::uint64_t serial);
// The pid in a window file name; nullopt for any other name.
std::optional<pid_t> window_file_pid(const std::string& name);

class DmaWindowFile {
 public:
  // Creates `dir`/`name` (O_EXCL: an existing file is EEXIST), sized `size` (a multiple of
  // the page size), owned by root:`group` with `mode`, and maps it MAP_SHARED.
  static Result<DmaWindowFile> create(const std::string& dir, const std::string& name, std::size_t size, gid_t group,
                                      mode_t mode);
  DmaWindowFile(DmaWindowFile&& other) noexcept;
  DmaWindowFile& operator=(DmaWindowFile&& other) noexcept;
  ~DmaWindowFile();

  const std::string& path() const noexcept { return path_; }
  // Removes the file name now (detach); the mapping stays until destruction. Idempotent.
  void unlink() noexcept;
  void* base() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }

 private:
  DmaWindowFile() = default;
  void release() noexcept;
  std::string path_;
  bool linked_ = false;
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace rpcie::hostd
