// The program's SIGSEGV disposition, kept by librpcie-mmio.so while the kernel holds the
// library's handler: sigaction, signal, bsd_signal, ssignal, sysv_signal/__sysv_signal and
// sigset are interposed for SIGSEGV (glibc's signal() does not go through the PLT
// sigaction, so each entry point is its own). A program installing its handler later does
// not displace the library's; sigaction returns to it the handler it installed itself.
// Other signals go to libc untouched.
#include <dlfcn.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "preload.hpp"

extern "C" int __sigaction(int, const struct sigaction*, struct sigaction*) noexcept;  // glibc's own

namespace rpcie::mmio {

namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

// Seqlock over the program's action: the writer (under `lock`, with SIGSEGV blocked so a
// handler on its own thread cannot spin on an odd count) bumps `sequence` around the copy.
struct ProgramAction {
  std::atomic<unsigned> sequence{0};
  struct sigaction action {};
};
ProgramAction program;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void program_action_store(const struct sigaction& action) noexcept {
  sigset_t segv, old;
  sigemptyset(&segv);
  sigaddset(&segv, SIGSEGV);
  pthread_sigmask(SIG_BLOCK, &segv, &old);
  for (;;) {  // writers exclude each other by making the count odd (the handler writes too)
    unsigned even = program.sequence.load() & ~1u;
    if (program.sequence.compare_exchange_weak(even, even + 1)) break;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::memcpy(&program.action, &action, sizeof action);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  program.sequence.fetch_add(1);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

SigactionFn sigaction_next() noexcept {
  static std::atomic<SigactionFn> next{nullptr};
  SigactionFn fn = next.load();
  if (fn == nullptr) {
    fn = reinterpret_cast<SigactionFn>(::dlsym(RTLD_NEXT, "sigaction"));
    if (fn == nullptr) fn = __sigaction;
    next.store(fn);
  }
  return fn;
}

// sigaction(SIGSEGV, ...) as the program sees it.
int segv_sigaction(const struct sigaction* act, struct sigaction* old) noexcept {
  pthread_mutex_lock(&lock);
  if (!preload().handler_installed.load()) {  // before our constructor: the kernel's is the program's
    const int rc = sigaction_real(SIGSEGV, act, old);
    pthread_mutex_unlock(&lock);
    return rc;
  }
  if (old != nullptr) *old = program_segv_get();
  if (act != nullptr) program_action_store(*act);
  pthread_mutex_unlock(&lock);
  return 0;
}

// The BSD/SysV signal() family for SIGSEGV: flags as glibc gives them.
sighandler_t segv_signal(sighandler_t handler, int flags) noexcept {
  struct sigaction act {
  }, old{};
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  if (segv_sigaction(&act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace

int sigaction_real(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return sigaction_next()(sig, act, old);
}

struct sigaction program_segv_get() noexcept {
  struct sigaction action;
  for (;;) {
    const unsigned before = program.sequence.load();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::memcpy(&action, &program.action, sizeof action);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if ((before & 1) == 0 && program.sequence.load() == before) return action;
  }
}

void program_segv_reset() noexcept {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  program_action_store(dfl);
}

void signal_shim_lock() noexcept { pthread_mutex_lock(&lock); }
void signal_shim_unlock() noexcept { pthread_mutex_unlock(&lock); }

// Takes the kernel's disposition as the program's, then puts ours in.
void segv_handler_take(void (*handler)(int, siginfo_t*, void*)) noexcept {
  pthread_mutex_lock(&lock);
  struct sigaction current {};
  sigaction_real(SIGSEGV, nullptr, &current);
  program_action_store(current);
  struct sigaction ours {};
  ours.sa_sigaction = handler;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  if (sigaction_real(SIGSEGV, &ours, nullptr) == 0) preload().handler_installed.store(true);
  pthread_mutex_unlock(&lock);
}

}  // namespace rpcie::mmio

using rpcie::mmio::segv_signal;

extern "C" {

int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (sig == SIGSEGV) return rpcie::mmio::segv_sigaction(act, old);
  return rpcie::mmio::sigaction_real(sig, act, old);
}

// Each of these is glibc's own for other signals (found with dlsym, so a further
// interposer still sees the call).
#define RPCIE_SIGNAL_SHIM(name, segv_flags)                                              \
  sighandler_t name(int sig, sighandler_t handler) noexcept {                            \
    if (sig == SIGSEGV && handler != SIG_HOLD) return segv_signal(handler, segv_flags);  \
    using Fn = sighandler_t (*)(int, sighandler_t);                                      \
    static std::atomic<Fn> next{nullptr};                                                \
    Fn fn = next.load();                                                                 \
    if (fn == nullptr) next.store(fn = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, #name))); \
    if (fn == nullptr) {                                                                 \
      errno = ENOSYS;                                                                    \
      return SIG_ERR;                                                                    \
    }                                                                                    \
    return fn(sig, handler);                                                             \
  }
RPCIE_SIGNAL_SHIM(signal, SA_RESTART)
RPCIE_SIGNAL_SHIM(bsd_signal, SA_RESTART)
RPCIE_SIGNAL_SHIM(ssignal, SA_RESTART)
RPCIE_SIGNAL_SHIM(sysv_signal, SA_RESETHAND | SA_NODEFER)
RPCIE_SIGNAL_SHIM(__sysv_signal, SA_RESETHAND | SA_NODEFER)
RPCIE_SIGNAL_SHIM(sigset, 0)
#undef RPCIE_SIGNAL_SHIM

}  // extern "C"
