// librpcie-mmio.so's state and its constructor: read RPCIE_MMIO_ERRORS, keep the writer
// lock out of fork, put the SIGSEGV handler in.
#include "preload.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "safe_text.hpp"

namespace rpcie::mmio {

namespace {

// Constant-initialized and never destroyed (see preload.hpp).
union Storage {
  constexpr Storage() : state() {}
  ~Storage() {}
  Preload state;
};
constinit Storage storage;

void fork_prepare() noexcept {
  signal_shim_lock();
  pthread_mutex_lock(&storage.state.writer);
}
void fork_parent() noexcept {
  pthread_mutex_unlock(&storage.state.writer);
  signal_shim_unlock();
}
void fork_child() noexcept {
  storage.state.table.fork_child();
  pthread_mutex_unlock(&storage.state.writer);
  signal_shim_unlock();
}

FailMode fail_mode_parse(const char* text) noexcept {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "all-ones") == 0 || std::strcmp(text, "all_ones") == 0)
    return FailMode::all_ones;
  if (std::strcmp(text, "sigbus") == 0) return FailMode::sigbus;
  SafeLine()
      .text("rpcie-mmio: RPCIE_MMIO_ERRORS=")
      .text(text)
      .text(": expected all-ones or sigbus; using all-ones")
      .write_stderr();
  return FailMode::all_ones;
}

__attribute__((constructor)) void preload_init() {
  storage.state.mode = fail_mode_parse(std::getenv("RPCIE_MMIO_ERRORS"));
  const char* ring = std::getenv("RPCIE_MMIO_RING");
  storage.state.ring_enabled = ring == nullptr || std::strcmp(ring, "off") != 0;
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  segv_handler_take(segv_handler);
}

}  // namespace

Preload& preload() noexcept { return storage.state; }

void Preload::port_release(BarPort* port) noexcept { storage.state.ports.release(port); }

void* mmap_real(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) noexcept {
  // syscall(2) is variadic: each argument goes as a full long.
  return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, static_cast<long>(length), static_cast<long>(prot),
                                           static_cast<long>(flags), static_cast<long>(fd), static_cast<long>(offset)));
}

int munmap_real(void* addr, std::size_t length) noexcept {
  return static_cast<int>(::syscall(SYS_munmap, addr, static_cast<long>(length)));
}

int mprotect_real(void* addr, std::size_t length, int prot) noexcept {
  return static_cast<int>(::syscall(SYS_mprotect, addr, static_cast<long>(length), static_cast<long>(prot)));
}

}  // namespace rpcie::mmio
