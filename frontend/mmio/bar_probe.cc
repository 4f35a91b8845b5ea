#include "bar_probe.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rpcie::mmio {

namespace {

// "/proc/self/fd/" + decimal fd, without snprintf (not async-signal-safe).
void fd_link_path(int fd, char (&text)[32]) noexcept {
  constexpr char kPrefix[] = "/proc/self/fd/";
  std::memcpy(text, kPrefix, sizeof kPrefix);
  char digits[12];
  int n = 0;
  unsigned value = static_cast<unsigned>(fd);
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  std::size_t at = sizeof kPrefix - 1;
  while (n > 0) text[at++] = digits[--n];
  text[at] = '\0';
}

}  // namespace

int bar_path_number(const char* path) noexcept {
  const char* slash = std::strrchr(path, '/');
  const char* name = slash ? slash + 1 : path;
  constexpr char kResource[] = "resource";
  if (std::strncmp(name, kResource, sizeof kResource - 1) != 0) return -1;
  const char* digit = name + sizeof kResource - 1;
  if (digit[0] < '0' || digit[0] > '5' || digit[1] != '\0') return -1;
  return digit[0] - '0';
}

bool bar_directory_is_rpcie(const char* path, DeviceKey& device) noexcept {
  const char* slash = std::strrchr(path, '/');
  if (slash == nullptr) return false;
  const std::size_t dir_length = static_cast<std::size_t>(slash - path);
  constexpr char kRemote[] = "/remote";
  char candidate[kPathMax];
  if (dir_length + sizeof kRemote > sizeof candidate) return false;
  std::memcpy(candidate, path, dir_length);
  std::memcpy(candidate + dir_length, kRemote, sizeof kRemote);
  struct stat remote {};
  if (::stat(candidate, &remote) != 0 || !S_ISREG(remote.st_mode)) return false;
  candidate[dir_length == 0 ? 1 : dir_length] = '\0';  // "/remote" -> "/"
  struct stat dir {};
  if (::stat(candidate, &dir) != 0) return false;
  device = DeviceKey{dir.st_dev, dir.st_ino};
  return true;
}

bool bar_probe(int fd, BarFile& file) noexcept {
  char link[32];
  fd_link_path(fd, link);
  char path[kPathMax];
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  const int bar = bar_path_number(path);
  if (bar < 0 || !bar_directory_is_rpcie(path, file.device)) return false;
  struct stat st {};
  const int flags = ::fcntl(fd, F_GETFL);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || flags < 0) return false;
  file.bar = static_cast<unsigned>(bar);
  file.size = static_cast<std::uint64_t>(st.st_size);
  file.writable = (flags & O_ACCMODE) != O_RDONLY;
  return true;
}

int bar_range_check(std::uint64_t size, std::uint64_t offset, std::uint64_t length) noexcept {
  // As pci_mmap_fits(): whole pages of the mapping against whole pages of the BAR.
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (length == 0 || offset % page != 0 || length > UINT64_MAX - page) return EINVAL;
  const std::uint64_t bar_pages = (size + page - 1) / page, first = offset / page;
  const std::uint64_t pages = (length + page - 1) / page;
  if (first >= bar_pages || bar_pages - first < pages) return EINVAL;
  return 0;
}

}  // namespace rpcie::mmio
