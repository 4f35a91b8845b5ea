// librpcie-mmio.so's process-wide state, shared by its parts: the mmap hooks
// (mmap_hooks.cc) fill the table, the SIGSEGV handler (segv_handler.cc) reads it, and the
// signal-disposition shim (signal_shim.cc) keeps the program's own SIGSEGV handler.
//
// Lives in static storage, constant-initialized (an mmap before the library's constructor
// already finds an empty table) and never destroyed (a thread faulting during exit still
// finds its port).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "device_ring.hpp"
#include "emulator/emulator.hpp"
#include "mapping_port.hpp"
#include "trap_table.hpp"

namespace rpcie::mmio {

struct Preload {
  TrapTable table{port_release};
  MappingPortPool ports;
  DeviceRingPool rings;
  bool ring_enabled = true;  // RPCIE_MMIO_RING=off: every access through the file port
  // Serializes the writers of `table`, `ports` and `rings` (mmap, munmap, mprotect, mremap); never
  // taken in a signal handler; held across fork by the atfork handlers.
  pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;
  FailMode mode = FailMode::all_ones;
  std::atomic<bool> handler_installed{false};

  static void port_release(BarPort* port) noexcept;
};

Preload& preload() noexcept;

// The program's view of SIGSEGV (what it installed through sigaction/signal), kept apart
// from the kernel's (which always holds ours). Readers are async-signal-safe (a seqlock).
struct sigaction program_segv_get() noexcept;
// Takes the kernel's SIGSEGV disposition as the program's and installs `handler` there.
void segv_handler_take(void (*handler)(int, siginfo_t*, void*)) noexcept;
// The real sigaction of libc (the next definition after ours).
int sigaction_real(int sig, const struct sigaction* act, struct sigaction* old) noexcept;
// The program's SIGSEGV action becomes SIG_DFL (SA_RESETHAND). Async-signal-safe.
void program_segv_reset() noexcept;
// librpcie-mmio.so's SIGSEGV handler (segv_handler.cc).
void segv_handler(int sig, siginfo_t* info, void* context) noexcept;
// Hands a SIGSEGV that is not ours to the program's handler, or to the default action.
void program_segv_deliver(int sig, siginfo_t* info, void* context) noexcept;
// pthread_atfork halves of the signal shim's lock.
void signal_shim_lock() noexcept;
void signal_shim_unlock() noexcept;

// Raw system calls, so a hook never re-enters itself or another interposer's state.
void* mmap_real(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) noexcept;
int munmap_real(void* addr, std::size_t length) noexcept;
int mprotect_real(void* addr, std::size_t length, int prot) noexcept;

}  // namespace rpcie::mmio
