// The file-name functions of librpcie-mmio.so: a path /sys/bus/pci/devices/<rpcie address>/...
// is opened, inspected and resolved as the rpcie device directory (sysfs_paths.hpp), and a
// listing of /sys/bus/pci/devices shows the rpcie functions after the real ones (as the
// links sysfs has there). Every other path goes to libc unchanged. Not for the SIGSEGV
// handler; thread-safe.
#undef _FILE_OFFSET_BITS  // open/open64, stat/stat64, ... are distinct symbols to interpose
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "sysfs_paths.hpp"

namespace rpcie::mmio {
namespace {

// The next definition of `name` after ours (libc's), looked up once.
void* next(const char* name, std::atomic<void*>& cache) noexcept {
  void* fn = cache.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = ::dlsym(RTLD_NEXT, name);
    cache.store(fn, std::memory_order_release);
  }
  return fn;
}
// Function types spelled out: decltype(&::open) carries libc's attributes, which a template
// argument drops (with a warning).
using OpenFn = int (*)(const char*, int, ...);
using OpenatFn = int (*)(int, const char*, int, ...);
using FopenFn = FILE* (*)(const char*, const char*);
using StatFn = int (*)(const char*, struct stat*);
using Stat64Fn = int (*)(const char*, struct stat64*);
using AccessFn = int (*)(const char*, int);
using FaccessatFn = int (*)(int, const char*, int, int);
using ReadlinkFn = ssize_t (*)(const char*, char*, size_t);
using RealpathFn = char* (*)(const char*, char*);
using OpendirFn = DIR* (*)(const char*);
using ReaddirFn = struct dirent* (*)(DIR*);
using Readdir64Fn = struct dirent64* (*)(DIR*);
using RewinddirFn = void (*)(DIR*);
using ClosedirFn = int (*)(DIR*);
#define RPCIE_NEXT(name, Fn) reinterpret_cast<rpcie::mmio::Fn>(rpcie::mmio::next(#name, rpcie::mmio::name##_next))

// The path to use instead of `path`, in `buffer`, or `path` itself.
const char* path_mapped(const char* path, char (&buffer)[PATH_MAX]) noexcept {
  return sysfs_path_rewrite(path, rpcie_devices_dir(), buffer, sizeof buffer) ? buffer : path;
}

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

std::atomic<void*> open_next;
std::atomic<void*> open64_next;
std::atomic<void*> openat_next;
std::atomic<void*> openat64_next;
std::atomic<void*> fopen_next;
std::atomic<void*> fopen64_next;
std::atomic<void*> stat_next;
std::atomic<void*> stat64_next;
std::atomic<void*> lstat_next;
std::atomic<void*> lstat64_next;
std::atomic<void*> access_next;
std::atomic<void*> faccessat_next;
std::atomic<void*> readlink_next;
std::atomic<void*> realpath_next;
std::atomic<void*> opendir_next;
std::atomic<void*> readdir_next;
std::atomic<void*> readdir64_next;
std::atomic<void*> closedir_next;
std::atomic<void*> rewinddir_next;

mode_t mode_arg(int flags, va_list args) noexcept {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? static_cast<mode_t>(va_arg(args, int)) : 0;
}

}  // namespace
}  // namespace rpcie::mmio

using rpcie::mmio::path_mapped;

extern "C" {

int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = rpcie::mmio::mode_arg(flags, args);
  va_end(args);
  char buffer[PATH_MAX];
  return RPCIE_NEXT(open, OpenFn)(path_mapped(path, buffer), flags, mode);
}

int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = rpcie::mmio::mode_arg(flags, args);
  va_end(args);
  char buffer[PATH_MAX];
  return RPCIE_NEXT(open64, OpenFn)(path_mapped(path, buffer), flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = rpcie::mmio::mode_arg(flags, args);
  va_end(args);
  char buffer[PATH_MAX];
  return RPCIE_NEXT(openat, OpenatFn)(dirfd, path_mapped(path, buffer), flags, mode);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = rpcie::mmio::mode_arg(flags, args);
  va_end(args);
  char buffer[PATH_MAX];
  return RPCIE_NEXT(openat64, OpenatFn)(dirfd, path_mapped(path, buffer), flags, mode);
}

// _FORTIFY_SOURCE's checked forms (open with flags not known at compile time).
int __open_2(const char* path, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(open, OpenFn)(path_mapped(path, buffer), flags, 0);
}

int __open64_2(const char* path, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(open64, OpenFn)(path_mapped(path, buffer), flags, 0);
}

FILE* fopen(const char* path, const char* mode) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(fopen, FopenFn)(path_mapped(path, buffer), mode);
}

FILE* fopen64(const char* path, const char* mode) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(fopen64, FopenFn)(path_mapped(path, buffer), mode);
}

int stat(const char* path, struct stat* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(stat, StatFn)(path_mapped(path, buffer), st);
}

int stat64(const char* path, struct stat64* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(stat64, Stat64Fn)(path_mapped(path, buffer), st);
}

// In sysfs /sys/bus/pci/devices/<address> is a link; lstat of an rpcie one describes the
// device directory it stands for.
int lstat(const char* path, struct stat* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(lstat, StatFn)(path_mapped(path, buffer), st);
}

int lstat64(const char* path, struct stat64* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(lstat64, Stat64Fn)(path_mapped(path, buffer), st);
}

int access(const char* path, int mode) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(access, AccessFn)(path_mapped(path, buffer), mode);
}

int faccessat(int dirfd, const char* path, int mode, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(faccessat, FaccessatFn)(dirfd, path_mapped(path, buffer), mode, flags);
}

// The link /sys/bus/pci/devices/<rpcie address> reads as the device directory's path.
ssize_t readlink(const char* path, char* out, size_t size) {
  char buffer[PATH_MAX];
  const char* mapped = path_mapped(path, buffer);
  if (mapped != path && ::strchr(path + ::strlen(rpcie::mmio::kSysfsPciDevices) + 1, '/') == nullptr) {
    const size_t n = ::strlen(mapped) < size ? ::strlen(mapped) : size;
    ::memcpy(out, mapped, n);
    return static_cast<ssize_t>(n);
  }
  return RPCIE_NEXT(readlink, ReadlinkFn)(mapped, out, size);
}

char* realpath(const char* path, char* resolved) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(realpath, RealpathFn)(path_mapped(path, buffer), resolved);
}

DIR* opendir(const char* path) {
  char buffer[PATH_MAX];
  DIR* dir = RPCIE_NEXT(opendir, OpendirFn)(path_mapped(path, buffer));
  if (dir == nullptr || !rpcie::mmio::sysfs_path_is_devices_dir(path)) return dir;
  const int saved = errno;
  DIR* extra = RPCIE_NEXT(opendir, OpendirFn)(rpcie::mmio::rpcie_devices_dir());  // none: nothing to add
  errno = saved;
  if (extra == nullptr) return dir;
  pthread_mutex_lock(&rpcie::mmio::listings_lock);
  bool kept = false;
  for (rpcie::mmio::Listing& l : rpcie::mmio::listings)
    if (!kept && l.dir == nullptr) {
      l = {dir, extra};
      kept = true;
    }
  pthread_mutex_unlock(&rpcie::mmio::listings_lock);
  if (!kept) RPCIE_NEXT(closedir, ClosedirFn)(extra);  // more than 16 listings open at once: the real one only
  return dir;
}

// After the real entries end, the rpcie functions (only names that are rpcie addresses).
struct dirent* readdir(DIR* dir) {
  const int saved = errno;
  if (struct dirent* e = RPCIE_NEXT(readdir, ReaddirFn)(dir)) return e;
  DIR* extra = rpcie::mmio::listing_extra(dir);
  if (extra == nullptr) return nullptr;
  while (struct dirent* e = RPCIE_NEXT(readdir, ReaddirFn)(extra))
    if (rpcie::mmio::bdf_is_rpcie(e->d_name, ::strlen(e->d_name))) {
      e->d_type = DT_LNK;  // as sysfs shows them
      errno = saved;
      return e;
    }
  errno = saved;
  return nullptr;
}

struct dirent64* readdir64(DIR* dir) {
  const int saved = errno;
  if (struct dirent64* e = RPCIE_NEXT(readdir64, Readdir64Fn)(dir)) return e;
  DIR* extra = rpcie::mmio::listing_extra(dir);
  if (extra == nullptr) return nullptr;
  while (struct dirent64* e = RPCIE_NEXT(readdir64, Readdir64Fn)(extra))
    if (rpcie::mmio::bdf_is_rpcie(e->d_name, ::strlen(e->d_name))) {
      e->d_type = DT_LNK;
      errno = saved;
      return e;
    }
  errno = saved;
  return nullptr;
}

void rewinddir(DIR* dir) {
  if (DIR* extra = rpcie::mmio::listing_extra(dir)) RPCIE_NEXT(rewinddir, RewinddirFn)(extra);
  RPCIE_NEXT(rewinddir, RewinddirFn)(dir);
}

int closedir(DIR* dir) {
  DIR* extra = nullptr;
  pthread_mutex_lock(&rpcie::mmio::listings_lock);
  for (rpcie::mmio::Listing& l : rpcie::mmio::listings)
    if (l.dir == dir) {
      extra = l.extra;
      l = {};
    }
  pthread_mutex_unlock(&rpcie::mmio::listings_lock);
  if (extra != nullptr) RPCIE_NEXT(closedir, ClosedirFn)(extra);
  return RPCIE_NEXT(closedir, ClosedirFn)(dir);
}

}  // extern "C"
