// PLACEHOLDER (branch mmio-preload only, replaced at the merge by the real emulator): every
// fault on a trapped range is an "unsupported instruction", so librpcie-mmio.so ends the
// program with the message instead of guessing a value.
#include <cstdio>
#include <cstring>

#include "emulator.hpp"

namespace rpcie::mmio {

Emulation instruction_emulate(ucontext_t& context, std::uintptr_t fault_address, const TrapLookup& traps,
                              FailMode) noexcept {
  Emulation e;
  e.address = fault_address;
  e.rip = static_cast<std::uintptr_t>(context.uc_mcontext.gregs[REG_RIP]);
  e.kind = traps.find(fault_address) != nullptr ? Emulation::Kind::unsupported : Emulation::Kind::not_trapped;
  return e;
}

std::uint64_t access_failures() noexcept { return 0; }

std::size_t emulation_describe(const Emulation& emulation, char* text, std::size_t size) noexcept {
  const char kText[] = "unsupported instruction (the emulator is a placeholder on this branch)";
  const std::size_t n = sizeof kText - 1 < size ? sizeof kText - 1 : size;
  std::memcpy(text, kText, n);
  static_cast<void>(emulation);
  return n;
}

}  // namespace rpcie::mmio
