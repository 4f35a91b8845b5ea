#include "harness.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace rpcie::mmio::test {
namespace {

void on_segv(int, siginfo_t* info, void* context) {
  Harness& h = harness();
  const Emulation e = instruction_emulate(*static_cast<ucontext_t*>(context),
                                          reinterpret_cast<std::uintptr_t>(info->si_addr), h.traps, h.mode.load());
  if (e.kind == Emulation::Kind::done) {
    h.last_failed = e.failed;
    return;
  }
  Escape& x = escape();
  if (x.armed) {
    x.emulation = e;
    x.armed = false;
    siglongjmp(x.jump, 1);
  }
  char line[256];
  const std::size_t n = emulation_describe(e, line, sizeof line);
  (void)!write(2, line, n);
  (void)!write(2, "\n", 1);
  abort();
}

Harness* harness_create() {
  auto* h = new Harness;
  void* p = mmap(nullptr, kBarBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) abort();
  h->bar = static_cast<std::uint8_t*>(p);
  h->traps.range = {reinterpret_cast<std::uintptr_t>(p), kBarBytes, kBarOffset, &h->device};
  return h;
}

}  // namespace

void harness_arm() {
  harness();
  struct sigaction sa = {};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, nullptr) != 0) abort();
}

void device_fill(unsigned step, unsigned first) {
  harness_arm();
  for (std::size_t i = 0; i < kBarBytes; ++i) device().bytes[i] = static_cast<std::uint8_t>(i * step + first);
  device().reset();
  device().fail = false;
  harness().mode = FailMode::all_ones;
}

Harness& harness() {
  static Harness* h = harness_create();
  return *h;
}

Escape& escape() {
  static thread_local Escape e;
  return e;
}

}  // namespace rpcie::mmio::test
