// Directory listings in librpcie-mmio.so: a listing of /sys/bus/pci/devices shows the rpcie
// functions after the real ones (as the links sysfs has there, d_type DT_LNK), whether it is
// read with opendir/readdir, fdopendir on a descriptor of it (find, Python's os.listdir(fd))
// or scandir (glibc's scandir reads through its own internal readdir, so it is interposed
// itself). A directory /sys/bus/pci/devices/<rpcie address> opens as the device directory
// (path_hooks.hpp). Not for the SIGSEGV handler; thread-safe.
#undef _FILE_OFFSET_BITS  // readdir/readdir64, scandir/scandir64 are distinct symbols
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cerrno>
#include <cstring>

#include "path_hooks.hpp"
#include "sysfs_paths.hpp"

namespace rpcie::mmio {
namespace {

using OpendirFn = DIR* (*)(const char*);
using FdopendirFn = DIR* (*)(int);
using ReaddirFn = struct dirent* (*)(DIR*);
using Readdir64Fn = struct dirent64* (*)(DIR*);
using RewinddirFn = void (*)(DIR*);
using ClosedirFn = int (*)(DIR*);
template <class Dirent>
using ScanFilter = int (*)(const Dirent*);
template <class Dirent>
using ScanCompare = int (*)(const Dirent**, const Dirent**);
using ScandirFn = int (*)(const char*, struct dirent***, ScanFilter<struct dirent>, ScanCompare<struct dirent>);
using Scandir64Fn = int (*)(const char*, struct dirent64***, ScanFilter<struct dirent64>, ScanCompare<struct dirent64>);
using ScandiratFn = int (*)(int, const char*, struct dirent***, ScanFilter<struct dirent>, ScanCompare<struct dirent>);
using Scandirat64Fn = int (*)(int, const char*, struct dirent64***, ScanFilter<struct dirent64>,
                              ScanCompare<struct dirent64>);

std::atomic<void*> opendir_next, fdopendir_next, readdir_next, readdir64_next, rewinddir_next, closedir_next,
    scandir_next, scandir64_next, scandirat_next, scandirat64_next;

// The rpcie functions a listing of /sys/bus/pci/devices adds, per open DIR.
struct Listing {
  DIR* dir = nullptr;
  DIR* extra = nullptr;  // the rpcie devices directory, read after the real one ends
};
constexpr int kListings = 16;
Listing listings[kListings];
pthread_mutex_t listings_lock = PTHREAD_MUTEX_INITIALIZER;

DIR* listing_extra(DIR* dir) noexcept {
  pthread_mutex_lock(&listings_lock);
  DIR* extra = nullptr;
  for (Listing& l : listings)
    if (l.dir == dir) extra = l.extra;
  pthread_mutex_unlock(&listings_lock);
  return extra;
}

// `dir` lists /sys/bus/pci/devices: its readdir goes on into the rpcie devices directory.
DIR* listing_add(DIR* dir) noexcept {
  const int saved = errno;
  DIR* extra = RPCIE_NEXT(opendir, OpendirFn)(rpcie_devices_dir());  // none: nothing to add
  errno = saved;
  if (extra == nullptr) return dir;
  pthread_mutex_lock(&listings_lock);
  bool kept = false;
  for (Listing& l : listings)
    if (!kept && l.dir == nullptr) {
      l = {dir, extra};
      kept = true;
    }
  pthread_mutex_unlock(&listings_lock);
  if (!kept) RPCIE_NEXT(closedir, ClosedirFn)(extra);  // more than 16 listings open at once: the real one only
  return dir;
}

// Whether `path` (relative ones against `dirfd`) is /sys/bus/pci/devices. Relative names are
// looked up only when they could be it ("." or ending in "devices").
bool devices_dir_at(int dirfd, const char* path) noexcept {
  if (path == nullptr) return false;
  if (path[0] == '/') return sysfs_path_is_devices_dir(path);
  std::size_t length = ::strlen(path);
  while (length > 1 && path[length - 1] == '/') --length;
  constexpr std::size_t kDevices = sizeof "devices" - 1;
  const bool dot = length == 1 && path[0] == '.';
  if (!dot && (length < kDevices || ::strncmp(path + length - kDevices, "devices", kDevices) != 0)) return false;
  char dir[PATH_MAX], joined[PATH_MAX + 8];
  if (!fd_dir_path(dirfd, dir, sizeof dir)) return false;
  ::snprintf(joined, sizeof joined, "%s/%.*s", dir, static_cast<int>(length), path);
  return sysfs_path_is_devices_dir(dot ? dir : joined);
}

// The next rpcie function of `extra`, or null.
template <class Dirent, class Next>
Dirent* extra_next(DIR* extra, Next next) noexcept {
  while (Dirent* e = next(extra))
    if (bdf_is_rpcie(e->d_name, ::strlen(e->d_name))) {
      e->d_type = DT_LNK;  // as sysfs shows them
      return e;
    }
  return nullptr;
}

// scandir's answer (`n` entries in *names) with the rpcie functions added as scandir would
// have added them: each malloc'd, filtered, then all sorted with `compare`.
template <class Dirent>
int scan_extend(int n, Dirent*** names, ScanFilter<Dirent> filter, ScanCompare<Dirent> compare) noexcept {
  const int saved = errno;
  DIR* extra = n < 0 ? nullptr : RPCIE_NEXT(opendir, OpendirFn)(rpcie_devices_dir());
  if (extra == nullptr) {
    errno = saved;
    return n;
  }
  int added = 0;
  while (struct dirent* e = extra_next<struct dirent>(extra, RPCIE_NEXT(readdir, ReaddirFn))) {
    auto* copy = static_cast<Dirent*>(::calloc(1, sizeof(Dirent)));
    if (copy == nullptr) break;
    copy->d_ino = e->d_ino;
    copy->d_off = e->d_off;
    copy->d_reclen = sizeof(Dirent);
    copy->d_type = e->d_type;
    // calloc zeroed the copy: the name stays terminated whatever its length.
    std::memcpy(copy->d_name, e->d_name, ::strnlen(e->d_name, sizeof copy->d_name - 1));
    auto** grown = filter == nullptr || filter(copy) != 0
                       ? static_cast<Dirent**>(::realloc(*names, (static_cast<std::size_t>(n) + 1) * sizeof(Dirent*)))
                       : nullptr;
    if (grown == nullptr) {
      ::free(copy);
      continue;  // filtered out (or no memory: left out)
    }
    *names = grown;
    grown[n++] = copy;
    ++added;
  }
  RPCIE_NEXT(closedir, ClosedirFn)(extra);
  if (compare != nullptr && added > 0)
    ::qsort(*names, static_cast<std::size_t>(n), sizeof(Dirent*),
            reinterpret_cast<int (*)(const void*, const void*)>(compare));
  errno = saved;
  return n;
}

}  // namespace
}  // namespace rpcie::mmio

using namespace rpcie::mmio;

extern "C" {

DIR* opendir(const char* path) {
  char buffer[PATH_MAX];
  DIR* dir = RPCIE_NEXT(opendir, OpendirFn)(path_mapped_at(AT_FDCWD, path, buffer));
  return dir != nullptr && devices_dir_at(AT_FDCWD, path) ? listing_add(dir) : dir;
}

// One readlink of /proc/self/fd/FD per call: find, rm -r and du call it once per directory.
DIR* fdopendir(int fd) {
  DIR* dir = RPCIE_NEXT(fdopendir, FdopendirFn)(fd);
  return dir != nullptr && fd_is_devices_dir(fd) ? listing_add(dir) : dir;
}

// After the real entries end, the rpcie functions (only names that are rpcie addresses).
struct dirent* readdir(DIR* dir) {
  const int saved = errno;
  if (struct dirent* e = RPCIE_NEXT(readdir, ReaddirFn)(dir)) return e;
  DIR* extra = listing_extra(dir);
  struct dirent* e = extra == nullptr ? nullptr : extra_next<struct dirent>(extra, RPCIE_NEXT(readdir, ReaddirFn));
  if (extra != nullptr) errno = saved;
  return e;
}

struct dirent64* readdir64(DIR* dir) {
  const int saved = errno;
  if (struct dirent64* e = RPCIE_NEXT(readdir64, Readdir64Fn)(dir)) return e;
  DIR* extra = listing_extra(dir);
  struct dirent64* e =
      extra == nullptr ? nullptr : extra_next<struct dirent64>(extra, RPCIE_NEXT(readdir64, Readdir64Fn));
  if (extra != nullptr) errno = saved;
  return e;
}

void rewinddir(DIR* dir) {
  if (DIR* extra = listing_extra(dir)) RPCIE_NEXT(rewinddir, RewinddirFn)(extra);
  RPCIE_NEXT(rewinddir, RewinddirFn)(dir);
}

int closedir(DIR* dir) {
  DIR* extra = nullptr;
  pthread_mutex_lock(&listings_lock);
  for (Listing& l : listings)
    if (l.dir == dir) {
      extra = l.extra;
      l = {};
    }
  pthread_mutex_unlock(&listings_lock);
  if (extra != nullptr) RPCIE_NEXT(closedir, ClosedirFn)(extra);
  return RPCIE_NEXT(closedir, ClosedirFn)(dir);
}

int scandir(const char* path, struct dirent*** names, ScanFilter<struct dirent> filter,
            ScanCompare<struct dirent> compare) {
  char buffer[PATH_MAX];
  const int n = RPCIE_NEXT(scandir, ScandirFn)(path_mapped_at(AT_FDCWD, path, buffer), names, filter, compare);
  return devices_dir_at(AT_FDCWD, path) ? scan_extend(n, names, filter, compare) : n;
}

int scandir64(const char* path, struct dirent64*** names, ScanFilter<struct dirent64> filter,
              ScanCompare<struct dirent64> compare) {
  char buffer[PATH_MAX];
  const int n = RPCIE_NEXT(scandir64, Scandir64Fn)(path_mapped_at(AT_FDCWD, path, buffer), names, filter, compare);
  return devices_dir_at(AT_FDCWD, path) ? scan_extend(n, names, filter, compare) : n;
}

int scandirat(int dirfd, const char* path, struct dirent*** names, ScanFilter<struct dirent> filter,
              ScanCompare<struct dirent> compare) {
  char buffer[PATH_MAX];
  const int n = RPCIE_NEXT(scandirat, ScandiratFn)(dirfd, path_mapped_at(dirfd, path, buffer), names, filter, compare);
  return devices_dir_at(dirfd, path) ? scan_extend(n, names, filter, compare) : n;
}

int scandirat64(int dirfd, const char* path, struct dirent64*** names, ScanFilter<struct dirent64> filter,
                ScanCompare<struct dirent64> compare) {
  char buffer[PATH_MAX];
  const int n =
      RPCIE_NEXT(scandirat64, Scandirat64Fn)(dirfd, path_mapped_at(dirfd, path, buffer), names, filter, compare);
  return devices_dir_at(dirfd, path) ? scan_extend(n, names, filter, compare) : n;
}

}  // extern "C"
