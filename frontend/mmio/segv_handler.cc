// The SIGSEGV handler of librpcie-mmio.so: a fault on a trapped register-BAR range is
// emulated (emulator/emulator.hpp); any other goes to the program's own handler as the
// program installed it, or to the default action (a NULL dereference still dies of
// SIGSEGV). Async-signal-safe throughout; errno preserved.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "preload.hpp"
#include "safe_text.hpp"

namespace rpcie::mmio {

namespace {

// x86 page-fault error code bits (the kernel passes them in REG_ERR).
constexpr greg_t kFaultWrite = 0x2, kFaultFetch = 0x10;

// What the program asked of the range: a store into a range mapped without PROT_WRITE, any
// access to one it made PROT_NONE, and executing from it fault as the program asked.
bool fault_allowed(const TrapEntry& entry, const ucontext_t& context) noexcept {
  const greg_t error = context.uc_mcontext.gregs[REG_ERR];
  if ((error & kFaultFetch) != 0) return false;
  if ((error & kFaultWrite) != 0) return (entry.prot & PROT_WRITE) != 0;
  return (entry.prot & (PROT_READ | PROT_WRITE)) != 0;
}

// At most one message of a kind per second (the count says how many there were).
bool log_allowed(std::atomic<std::int64_t>& last_second) noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  std::int64_t last = last_second.load();
  return last != now.tv_sec && last_second.compare_exchange_strong(last, now.tv_sec);
}

void failure_log(const Emulation& emulation, bool sigbus) noexcept {
  static std::atomic<std::int64_t> last_second{-1};
  if (!log_allowed(last_second)) return;
  SafeLine line;
  line.text("rpcie-mmio: MMIO access failed at ").hex(emulation.address).text(" (instruction at ").hex(emulation.rip);
  line.text(sigbus ? "): raising SIGBUS" : "): loads read all ones, stores are dropped");
  line.text(" (").dec(access_failures()).text(" failed so far)").write_stderr();
}

// Posted stores hostd could not perform, learnt of by the ports (after a load, every store
// before it is known): counted as failed accesses and said. A line held back by the rate limit
// is said later, summed, at the next trapped access after the second has passed.
void stores_dropped_report() noexcept {
  static std::atomic<std::uint64_t> unsaid{0};
  static std::atomic<std::int64_t> last_second{-1};
  const std::uint64_t dropped = stores_dropped_take();
  if (dropped != 0) {
    access_failures_add(dropped);
    unsaid.fetch_add(dropped);
  }
  if (unsaid.load() == 0 || !log_allowed(last_second)) return;
  const std::uint64_t count = unsaid.exchange(0);
  if (count == 0) return;
  SafeLine line;
  line.text("rpcie-mmio: ").dec(count).text(count == 1 ? " posted store was" : " posted stores were");
  line.text(" dropped by rpcie-hostd (").dec(access_failures()).text(" failed so far)").write_stderr();
}

[[noreturn]] void unsupported_end(const Emulation& emulation) noexcept {
  char text[400];
  const std::size_t n = emulation_describe(emulation, text, sizeof text - 1);
  text[n < sizeof text - 1 ? n : sizeof text - 1] = '\0';
  SafeLine().text("rpcie-mmio: ").text(text).write_stderr();
  std::abort();
}

// SIGBUS at `address`, as a failed access on a real bus: to the program's SIGBUS handler
// if it has one (the library does not interpose SIGBUS), else the default action.
void sigbus_raise(std::uintptr_t address) noexcept {
  struct sigaction current {};
  sigaction_real(SIGBUS, nullptr, &current);
  if (current.sa_handler == SIG_IGN) {  // a fault cannot be ignored: the kernel forces the default too
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction_real(SIGBUS, &dfl, nullptr);
  }
  sigset_t bus;
  sigemptyset(&bus);
  sigaddset(&bus, SIGBUS);
  pthread_sigmask(SIG_UNBLOCK, &bus, nullptr);
  siginfo_t info{};
  info.si_signo = SIGBUS;
  info.si_code = BUS_ADRERR;
  info.si_addr = reinterpret_cast<void*>(address);
  ::syscall(SYS_rt_tgsigqueueinfo, ::getpid(), ::gettid(), SIGBUS, &info);
}

// true: the fault was ours and is dealt with.
bool trapped_fault_handle(ucontext_t& context, std::uintptr_t address) noexcept {
  Preload& state = preload();
  TrapTable::Reader reader(state.table);
  const TrapEntry* entry = state.table.entry_find(address);
  if (entry == nullptr || entry->kind != EntryKind::trapped || !fault_allowed(*entry, context)) return false;
  const Emulation emulation = instruction_emulate(context, address, state.table, state.mode);
  const bool failed = emulation.failed != 0;  // this instruction's own, not another thread's
  stores_dropped_report();
  switch (emulation.kind) {
    case Emulation::Kind::done:
      if (failed) failure_log(emulation, false);
      return true;
    case Emulation::Kind::not_trapped:
      return false;
    case Emulation::Kind::unsupported:
      unsupported_end(emulation);
    case Emulation::Kind::access_failed:
      reader.leave();  // the program's SIGBUS handler may never return
      failure_log(emulation, true);
      sigbus_raise(emulation.address);
      return true;
  }
  return false;
}

}  // namespace

void segv_handler(int sig, siginfo_t* info, void* context) noexcept {
  const int saved = errno;
  const bool fault = info != nullptr && info->si_code > 0;  // not sent by kill/raise/sigqueue
  if (fault &&
      trapped_fault_handle(*static_cast<ucontext_t*>(context), reinterpret_cast<std::uintptr_t>(info->si_addr))) {
    errno = saved;
    return;
  }
  errno = saved;
  program_segv_deliver(sig, info, context);
}

void program_segv_deliver(int sig, siginfo_t* info, void* context) noexcept {
  struct sigaction action = program_segv_get();
  const bool sent = info == nullptr || info->si_code <= 0;
  if (action.sa_handler == SIG_IGN && sent) return;
  if (action.sa_handler == SIG_IGN || action.sa_handler == SIG_DFL) {
    // Return with the default in place: the instruction faults again and the program
    // dies of it as it would have without the library. A sent signal is sent again.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction_real(sig, &dfl, nullptr);
    if (sent) ::raise(sig);
    return;
  }
  if ((action.sa_flags & SA_RESETHAND) != 0) program_segv_reset();
  sigset_t block = action.sa_mask, old;
  if ((action.sa_flags & SA_NODEFER) == 0) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  if ((action.sa_flags & SA_SIGINFO) != 0)
    action.sa_sigaction(sig, info, context);
  else
    action.sa_handler(sig);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace rpcie::mmio
