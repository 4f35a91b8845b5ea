// mmap, mmap64, munmap, mprotect and mremap of librpcie-mmio.so. The kernel is asked first;
// only its ENODEV on an rpcie register BAR (bar_probe.hpp) makes a trapped range, and only
// a shared mapping of a FUSE file is probed as a memory BAR. Everything else passes through
// with one extra comparison (an empty table) or a lock-free scan of the table.
// mmap and mmap64 are two symbols to interpose; with _FILE_OFFSET_BITS=64 glibc's header
// renames mmap to mmap64 and the two definitions would collide (off_t is 64-bit here anyway).
#undef _FILE_OFFSET_BITS
#include <fcntl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

#include "preload.hpp"

namespace rpcie::mmio {

namespace {

constexpr long kFuseSuperMagic = 0x65735546;

std::uintptr_t page_size() noexcept {
  static const std::uintptr_t size = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  return size;
}
std::size_t pages_round(std::size_t length) noexcept { return (length + page_size() - 1) & ~(page_size() - 1); }

class WriterLock {
 public:
  WriterLock() noexcept { pthread_mutex_lock(&preload().writer); }
  ~WriterLock() { pthread_mutex_unlock(&preload().writer); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
};

// A reservation standing for a register BAR: [p, p + length) PROT_NONE, one port.
void* register_bar_map(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) noexcept {
  BarFile file;
  if (!bar_probe(fd, file)) {
    errno = ENODEV;
    return MAP_FAILED;
  }
  if (offset < 0) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  if (const int e = bar_range_check(file.size, static_cast<std::uint64_t>(offset), length); e != 0) {
    errno = e;
    return MAP_FAILED;
  }
  if ((flags & MAP_TYPE) == MAP_SHARED && (prot & PROT_WRITE) != 0 && !file.writable) {
    errno = EACCES;  // as the kernel answers for a shared writable mapping of a read-only descriptor
    return MAP_FAILED;
  }
  Preload& state = preload();
  WriterLock lock;
  MappingPort* port = state.ports.take();
  if (port == nullptr && state.table.reclaim_wait(TrapTable::kReclaimTimeoutMs))
    port = state.ports.take();  // the pool was full of ports retired by munmap
  const int port_fd = port != nullptr ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (port_fd < 0) {
    const int e = port == nullptr ? ENOMEM : errno;
    state.ports.release(port);
    errno = e;
    return MAP_FAILED;
  }
  DeviceRing* ring = state.ring_enabled ? state.rings.acquire(file.device, control_path_default(), fd) : nullptr;
  port->open(port_fd, file, &state.table, ring, &state.rings);
  const int keep = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
  void* p = mmap_real(addr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | keep, -1, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    state.ports.release(port);
    errno = e;
    return MAP_FAILED;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  static_cast<void>(state.table.remove(base, pages_round(length)));  // MAP_FIXED replaced what was there
  TrapEntry entry;
  entry.range = TrapRange{base, pages_round(length), static_cast<std::uint64_t>(offset), port};
  entry.kind = EntryKind::trapped;
  entry.prot = prot;
  entry.writable = file.writable;
  entry.device = file.device;
  int inserted = state.table.insert(entry);
  if (inserted == ENOMEM && state.table.reclaim_wait(TrapTable::kReclaimTimeoutMs))
    inserted = state.table.insert(entry);
  if (const int e = inserted; e != 0) {
    munmap_real(p, length);
    state.ports.release(port);
    errno = e;
    return MAP_FAILED;
  }
  return p;
}

// A shared mapping of an rpcie memory BAR: remembered for the write-back before register stores.
void memory_bar_note(void* p, std::size_t length, int flags, int fd, off_t offset) noexcept {
  if ((flags & MAP_TYPE) != MAP_SHARED || fd < 0 || (flags & MAP_ANONYMOUS) != 0) return;
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != kFuseSuperMagic) return;
  BarFile file;
  if (!bar_probe(fd, file)) return;
  TrapEntry entry;
  entry.range =
      TrapRange{reinterpret_cast<std::uintptr_t>(p), pages_round(length), static_cast<std::uint64_t>(offset), nullptr};
  entry.kind = EntryKind::memory;
  entry.device = file.device;
  WriterLock lock;
  static_cast<void>(preload().table.insert(entry));  // full: that mapping is not written back early
}

// [base, base + length) no longer holds what the table says (MAP_FIXED, mremap over it).
void table_forget(std::uintptr_t base, std::size_t length) noexcept {
  Preload& state = preload();
  if (!state.table.overlaps(base, length)) return;
  WriterLock lock;
  static_cast<void>(state.table.remove(base, length));
}

void* mmap_any(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) noexcept {
  void* p = mmap_real(addr, length, prot, flags, fd, offset);
  if (p == MAP_FAILED) {
    if (errno != ENODEV || fd < 0 || (flags & MAP_ANONYMOUS) != 0) return p;
    return register_bar_map(addr, length, prot, flags, fd, offset);
  }
  if ((flags & MAP_FIXED) != 0) table_forget(reinterpret_cast<std::uintptr_t>(p), pages_round(length));
  memory_bar_note(p, length, flags, fd, offset);
  return p;
}

// Calls f(start, length) on each part of [base, end) outside the trapped entries among
// `entries` (ascending by base); the first nonzero answer ends it and is returned.
template <class F>
int untrapped_each(std::uintptr_t base, std::uintptr_t end, const TrapEntry* entries, std::size_t n, F&& f) noexcept {
  std::uintptr_t cursor = base;
  for (std::size_t i = 0; i <= n; ++i) {
    if (i < n && entries[i].kind != EntryKind::trapped) continue;
    const std::uintptr_t gap_end = i < n ? (entries[i].range.base > end ? end : entries[i].range.base) : end;
    if (gap_end > cursor)
      if (const int rc = f(reinterpret_cast<void*>(cursor), gap_end - cursor); rc != 0) return rc;
    if (i < n && entries[i].range.base + entries[i].range.length > cursor)
      cursor = entries[i].range.base + entries[i].range.length;
  }
  return 0;
}

}  // namespace

}  // namespace rpcie::mmio

using namespace rpcie::mmio;

extern "C" {

void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) noexcept {
  return mmap_any(addr, length, prot, flags, fd, offset);
}

void* mmap64(void* addr, size_t length, int prot, int flags, int fd, off64_t offset) noexcept {
  return mmap_any(addr, length, prot, flags, fd, offset);
}

// Forget first: a fault in the range from now on is the program's, as after munmap. Then
// wait (bounded) for the handlers still emulating in it: the kernel must not hand its
// addresses to another mapping while one may still touch them. If one outlives the wait,
// its trapped parts stay reserved (PROT_NONE, leaked) and the rest is unmapped; munmap
// still succeeds: for the program the range is gone.
int munmap(void* addr, size_t length) noexcept {
  const auto base = reinterpret_cast<std::uintptr_t>(addr);
  Preload& state = preload();
  if (base % page_size() != 0 || length == 0 || !state.table.overlaps(base, pages_round(length)))
    return munmap_real(addr, length);
  WriterLock lock;
  const std::uintptr_t end = base + pages_round(length);
  TrapEntry entries[TrapTable::kCapacity];
  const std::size_t n = state.table.overlapping(base, end - base, entries, TrapTable::kCapacity);
  if (const int e = state.table.remove(base, end - base); e != 0) {
    errno = e;
    return -1;
  }
  if (state.table.reclaim_wait(TrapTable::kReclaimTimeoutMs)) return munmap_real(addr, length);
  return untrapped_each(base, end, entries, n, munmap_real);  // unmap around the trapped parts
}

// The trapped parts of the range keep PROT_NONE and only record `prot` (fault_allowed in
// segv_handler.cc applies it); the rest is the kernel's business.
int mprotect(void* addr, size_t length, int prot) noexcept {
  const auto base = reinterpret_cast<std::uintptr_t>(addr);
  Preload& state = preload();
  if (base % page_size() != 0 || length == 0 || !state.table.overlaps(base, pages_round(length)))
    return mprotect_real(addr, length, prot);
  WriterLock lock;
  const std::uintptr_t end = base + pages_round(length);
  TrapEntry entries[TrapTable::kCapacity];
  const std::size_t n = state.table.overlapping(base, end - base, entries, TrapTable::kCapacity);
  for (std::size_t i = 0; i < n; ++i)
    if (entries[i].kind == EntryKind::trapped && (prot & PROT_WRITE) != 0 && !entries[i].writable) {
      errno = EACCES;  // the kernel's answer for PROT_WRITE on a shared mapping of a read-only file
      return -1;
    }
  if (untrapped_each(base, end, entries, n, [prot](void* p, std::size_t l) { return mprotect_real(p, l, prot); }) != 0)
    return -1;
  if (const int e = state.table.protect(base, end - base, prot); e != 0) {
    errno = e;
    return -1;
  }
  return 0;
}

// A trapped range cannot move or grow (EINVAL); a memory-BAR mapping that moves is no
// longer written back before register stores (documented in rpcie-run.md).
void* mremap(void* old_address, size_t old_size, size_t new_size, int flags, ...) noexcept {
  void* new_address = nullptr;
  if ((flags & MREMAP_FIXED) != 0) {
    va_list args;
    va_start(args, flags);
    new_address = va_arg(args, void*);
    va_end(args);
  }
  const auto old_base = reinterpret_cast<std::uintptr_t>(old_address);
  Preload& state = preload();
  if (state.table.overlaps(old_base, pages_round(old_size == 0 ? 1 : old_size))) {
    WriterLock lock;
    TrapEntry entries[TrapTable::kCapacity];
    const std::size_t n =
        state.table.overlapping(old_base, pages_round(old_size == 0 ? 1 : old_size), entries, TrapTable::kCapacity);
    for (std::size_t i = 0; i < n; ++i)
      if (entries[i].kind == EntryKind::trapped) {
        errno = EINVAL;
        return MAP_FAILED;
      }
  }
  void* p = reinterpret_cast<void*>(::syscall(SYS_mremap, old_address, static_cast<long>(old_size),
                                              static_cast<long>(new_size), static_cast<long>(flags), new_address));
  if (p == MAP_FAILED) return p;
  if (p != old_address || new_size < old_size) table_forget(old_base, pages_round(old_size == 0 ? 1 : old_size));
  table_forget(reinterpret_cast<std::uintptr_t>(p), pages_round(new_size));
  return p;
}

}  // extern "C"
