// The file-name functions of librpcie-mmio.so: a path /sys/bus/pci/devices/<rpcie address>/...
// — absolute, or relative to a descriptor of a directory on the way there (openat, fstatat,
// faccessat, statx, readlinkat with a descriptor of /sys/bus/pci/devices or /sys/bus/pci, or
// the working directory) — is opened, inspected and resolved as the rpcie device directory
// (sysfs_paths.hpp). Every other path goes to libc unchanged; a relative one costs a memchr
// for ':' on top. Directory listings are in listing_hooks.cc. Not for the SIGSEGV handler;
// thread-safe.
#undef _FILE_OFFSET_BITS  // open/open64, stat/stat64, ... are distinct symbols to interpose
#include "path_hooks.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "sysfs_paths.hpp"

namespace rpcie::mmio {

void* symbol_next(const char* name, std::atomic<void*>& cache) noexcept {
  void* fn = cache.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = ::dlsym(RTLD_NEXT, name);
    cache.store(fn, std::memory_order_release);
  }
  return fn;
}

bool fd_dir_path(int dirfd, char* out, std::size_t size) noexcept {
  const int saved = errno;
  long n = 0;
  if (dirfd == AT_FDCWD) {
    n = ::syscall(SYS_getcwd, out, size);  // its length with the NUL; "(unreachable)..." is not absolute
  } else {
    char link[40];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    n = ::syscall(SYS_readlinkat, AT_FDCWD, link, out, size - 1);
    if (n > 0 && static_cast<std::size_t>(n) < size - 1)
      out[n] = '\0';
    else
      n = -1;
  }
  errno = saved;
  return n > 0 && out[0] == '/';
}

const char* path_mapped_at(int dirfd, const char* path, char (&buffer)[PATH_MAX]) noexcept {
  if (path == nullptr) return path;
  if (path[0] == '/') return sysfs_path_rewrite(path, rpcie_devices_dir(), buffer, sizeof buffer) ? buffer : path;
  if (!sysfs_relative_candidate(path)) return path;
  char dir[PATH_MAX];
  if (!fd_dir_path(dirfd, dir, sizeof dir)) return path;
  return sysfs_path_rewrite_at(dir, path, rpcie_devices_dir(), buffer, sizeof buffer) ? buffer : path;
}

bool fd_is_devices_dir(int dirfd) noexcept {
  char dir[PATH_MAX];
  return dirfd >= 0 && fd_dir_path(dirfd, dir, sizeof dir) && sysfs_path_is_devices_dir(dir);
}

namespace {

using OpenFn = int (*)(const char*, int, ...);
using OpenatFn = int (*)(int, const char*, int, ...);
using FopenFn = FILE* (*)(const char*, const char*);
using StatFn = int (*)(const char*, struct stat*);
using Stat64Fn = int (*)(const char*, struct stat64*);
using FstatatFn = int (*)(int, const char*, struct stat*, int);
using Fstatat64Fn = int (*)(int, const char*, struct stat64*, int);
using XstatFn = int (*)(int, const char*, struct stat*);
using Xstat64Fn = int (*)(int, const char*, struct stat64*);
using FxstatatFn = int (*)(int, int, const char*, struct stat*, int);
using Fxstatat64Fn = int (*)(int, int, const char*, struct stat64*, int);
using StatxFn = int (*)(int, const char*, int, unsigned, struct statx*);
using AccessFn = int (*)(const char*, int);
using FaccessatFn = int (*)(int, const char*, int, int);
using ReadlinkFn = ssize_t (*)(const char*, char*, size_t);
using ReadlinkatFn = ssize_t (*)(int, const char*, char*, size_t);
using ReadlinkChkFn = ssize_t (*)(const char*, char*, size_t, size_t);
using ReadlinkatChkFn = ssize_t (*)(int, const char*, char*, size_t, size_t);
using RealpathFn = char* (*)(const char*, char*);
using RealpathChkFn = char* (*)(const char*, char*, size_t);
using ChdirFn = int (*)(const char*);
using GetxattrFn = ssize_t (*)(const char*, const char*, void*, size_t);
using ListxattrFn = ssize_t (*)(const char*, char*, size_t);

// One of open, open64, openat, openat64 (`at`: it takes a directory descriptor first).
struct OpenSymbol {
  const char* name;
  bool at;
  std::atomic<void*> next{nullptr};
};
OpenSymbol open_symbol{"open", false}, open64_symbol{"open64", false};
OpenSymbol openat_symbol{"openat", true}, openat64_symbol{"openat64", true};

std::atomic<void*> fopen_next, fopen64_next, stat_next, stat64_next, lstat_next, lstat64_next, fstatat_next,
    fstatat64_next, __xstat_next, __xstat64_next, __lxstat_next, __lxstat64_next, __fxstatat_next, __fxstatat64_next,
    statx_next, access_next, faccessat_next, readlink_next, readlinkat_next, __readlink_chk_next, __readlinkat_chk_next,
    realpath_next, __realpath_chk_next, chdir_next, getxattr_next, lgetxattr_next, listxattr_next, llistxattr_next;

int open_mapped(OpenSymbol& symbol, int dirfd, const char* path, int flags, mode_t mode) noexcept {
  char buffer[PATH_MAX];
  const char* mapped = path_mapped_at(dirfd, path, buffer);
  void* fn = symbol_next(symbol.name, symbol.next);
  return symbol.at ? reinterpret_cast<OpenatFn>(fn)(dirfd, mapped, flags, mode)
                   : reinterpret_cast<OpenFn>(fn)(mapped, flags, mode);
}

// The per-symbol interposers hand their variable arguments here: the mode is there only
// with O_CREAT or O_TMPFILE.
int open_forward(OpenSymbol& symbol, int dirfd, const char* path, int flags, va_list args) noexcept {
  const bool mode_given = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE;
  return open_mapped(symbol, dirfd, path, flags, mode_given ? static_cast<mode_t>(va_arg(args, int)) : 0);
}

// readlink and readlinkat: the link /sys/bus/pci/devices/<rpcie address> reads as the
// device directory's path (`mapped`, when it names the function itself).
bool link_of_function(const char* path, const char* mapped, char* out, size_t size, ssize_t& n) noexcept {
  if (mapped == path) return false;
  const char* rest = mapped + ::strlen(rpcie_devices_dir()) + 1;
  if (::strchr(rest, '/') != nullptr) return false;
  const size_t length = ::strlen(mapped) < size ? ::strlen(mapped) : size;
  ::memcpy(out, mapped, length);
  n = static_cast<ssize_t>(length);
  return true;
}

}  // namespace
}  // namespace rpcie::mmio

using namespace rpcie::mmio;

extern "C" {

int open(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const int fd = open_forward(open_symbol, AT_FDCWD, path, flags, args);
  va_end(args);
  return fd;
}

int open64(const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const int fd = open_forward(open64_symbol, AT_FDCWD, path, flags, args);
  va_end(args);
  return fd;
}

int openat(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const int fd = open_forward(openat_symbol, dirfd, path, flags, args);
  va_end(args);
  return fd;
}

int openat64(int dirfd, const char* path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const int fd = open_forward(openat64_symbol, dirfd, path, flags, args);
  va_end(args);
  return fd;
}

// _FORTIFY_SOURCE's checked forms (open with flags not known at compile time).
int __open_2(const char* path, int flags) { return open_mapped(open_symbol, AT_FDCWD, path, flags, 0); }
int __open64_2(const char* path, int flags) { return open_mapped(open64_symbol, AT_FDCWD, path, flags, 0); }
int __openat_2(int dirfd, const char* path, int flags) { return open_mapped(openat_symbol, dirfd, path, flags, 0); }
int __openat64_2(int dirfd, const char* path, int flags) { return open_mapped(openat64_symbol, dirfd, path, flags, 0); }

FILE* fopen(const char* path, const char* mode) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(fopen, FopenFn)(path_mapped_at(AT_FDCWD, path, buffer), mode);
}

FILE* fopen64(const char* path, const char* mode) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(fopen64, FopenFn)(path_mapped_at(AT_FDCWD, path, buffer), mode);
}

int stat(const char* path, struct stat* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(stat, StatFn)(path_mapped_at(AT_FDCWD, path, buffer), st);
}

int stat64(const char* path, struct stat64* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(stat64, Stat64Fn)(path_mapped_at(AT_FDCWD, path, buffer), st);
}

// In sysfs /sys/bus/pci/devices/<address> is a link; lstat of an rpcie one describes the
// device directory it stands for.
int lstat(const char* path, struct stat* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(lstat, StatFn)(path_mapped_at(AT_FDCWD, path, buffer), st);
}

int lstat64(const char* path, struct stat64* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(lstat64, Stat64Fn)(path_mapped_at(AT_FDCWD, path, buffer), st);
}

int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(fstatat, FstatatFn)(dirfd, path_mapped_at(dirfd, path, buffer), st, flags);
}

int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(fstatat64, Fstatat64Fn)(dirfd, path_mapped_at(dirfd, path, buffer), st, flags);
}

// What binaries built against glibc before 2.33 call for stat, lstat and fstatat.
int __xstat(int version, const char* path, struct stat* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(__xstat, XstatFn)(version, path_mapped_at(AT_FDCWD, path, buffer), st);
}

int __xstat64(int version, const char* path, struct stat64* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(__xstat64, Xstat64Fn)(version, path_mapped_at(AT_FDCWD, path, buffer), st);
}

int __lxstat(int version, const char* path, struct stat* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(__lxstat, XstatFn)(version, path_mapped_at(AT_FDCWD, path, buffer), st);
}

int __lxstat64(int version, const char* path, struct stat64* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(__lxstat64, Xstat64Fn)(version, path_mapped_at(AT_FDCWD, path, buffer), st);
}

int __fxstatat(int version, int dirfd, const char* path, struct stat* st, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(__fxstatat, FxstatatFn)(version, dirfd, path_mapped_at(dirfd, path, buffer), st, flags);
}

int __fxstatat64(int version, int dirfd, const char* path, struct stat64* st, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(__fxstatat64, Fxstatat64Fn)(version, dirfd, path_mapped_at(dirfd, path, buffer), st, flags);
}

int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* st) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(statx, StatxFn)(dirfd, path_mapped_at(dirfd, path, buffer), flags, mask, st);
}

int access(const char* path, int mode) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(access, AccessFn)(path_mapped_at(AT_FDCWD, path, buffer), mode);
}

int faccessat(int dirfd, const char* path, int mode, int flags) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(faccessat, FaccessatFn)(dirfd, path_mapped_at(dirfd, path, buffer), mode, flags);
}

ssize_t readlink(const char* path, char* out, size_t size) {
  char buffer[PATH_MAX];
  const char* mapped = path_mapped_at(AT_FDCWD, path, buffer);
  ssize_t n = 0;
  return link_of_function(path, mapped, out, size, n) ? n : RPCIE_NEXT(readlink, ReadlinkFn)(mapped, out, size);
}

ssize_t readlinkat(int dirfd, const char* path, char* out, size_t size) {
  char buffer[PATH_MAX];
  const char* mapped = path_mapped_at(dirfd, path, buffer);
  ssize_t n = 0;
  return link_of_function(path, mapped, out, size, n) ? n
                                                      : RPCIE_NEXT(readlinkat, ReadlinkatFn)(dirfd, mapped, out, size);
}

// _FORTIFY_SOURCE's checked forms (glibc's call its own readlink, not ours).
ssize_t __readlink_chk(const char* path, char* out, size_t size, size_t out_size) {
  char buffer[PATH_MAX];
  const char* mapped = path_mapped_at(AT_FDCWD, path, buffer);
  ssize_t n = 0;
  return size <= out_size && link_of_function(path, mapped, out, size, n)
             ? n
             : RPCIE_NEXT(__readlink_chk, ReadlinkChkFn)(mapped, out, size, out_size);
}

ssize_t __readlinkat_chk(int dirfd, const char* path, char* out, size_t size, size_t out_size) {
  char buffer[PATH_MAX];
  const char* mapped = path_mapped_at(dirfd, path, buffer);
  ssize_t n = 0;
  return size <= out_size && link_of_function(path, mapped, out, size, n)
             ? n
             : RPCIE_NEXT(__readlinkat_chk, ReadlinkatChkFn)(dirfd, mapped, out, size, out_size);
}

char* realpath(const char* path, char* resolved) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(realpath, RealpathFn)(path_mapped_at(AT_FDCWD, path, buffer), resolved);
}

char* __realpath_chk(const char* path, char* resolved, size_t resolved_size) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(__realpath_chk, RealpathChkFn)(path_mapped_at(AT_FDCWD, path, buffer), resolved, resolved_size);
}

int chdir(const char* path) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(chdir, ChdirFn)(path_mapped_at(AT_FDCWD, path, buffer));
}

// ls -l asks for ACLs and security labels: an error there is reported, even after stat worked.
ssize_t getxattr(const char* path, const char* name, void* value, size_t size) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(getxattr, GetxattrFn)(path_mapped_at(AT_FDCWD, path, buffer), name, value, size);
}

ssize_t lgetxattr(const char* path, const char* name, void* value, size_t size) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(lgetxattr, GetxattrFn)(path_mapped_at(AT_FDCWD, path, buffer), name, value, size);
}

ssize_t listxattr(const char* path, char* list, size_t size) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(listxattr, ListxattrFn)(path_mapped_at(AT_FDCWD, path, buffer), list, size);
}

ssize_t llistxattr(const char* path, char* list, size_t size) {
  char buffer[PATH_MAX];
  return RPCIE_NEXT(llistxattr, ListxattrFn)(path_mapped_at(AT_FDCWD, path, buffer), list, size);
}

}  // extern "C"
