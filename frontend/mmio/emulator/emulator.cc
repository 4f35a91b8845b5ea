// instruction_emulate: decode, look the mnemonic up in the handler table, run the handler,
// and advance RIP past the instruction when it completed.
#include "emulator.hpp"

#include <cerrno>
#include <cstring>

#include "exec.hpp"
#include "handler_table.hpp"

namespace rpcie::mmio {

Emulation instruction_emulate(ucontext_t& context, std::uintptr_t fault_address, const TrapLookup& traps,
                              FailMode mode) noexcept {
  const int saved_errno = errno;
  CpuContext cpu(context);
  Emulation emulation;
  emulation.rip = static_cast<std::uintptr_t>(cpu.rip());
  emulation.address = fault_address;
  if (traps.find(fault_address) == nullptr) {
    emulation.kind = Emulation::Kind::not_trapped;
    return emulation;
  }
  Decoded decoded;
  const bool decoded_ok = instruction_decode(emulation.rip, decoded);
  emulation.length = decoded.length;
  std::memcpy(emulation.bytes, decoded.bytes, decoded.length);
  const Handler handler = decoded_ok ? handler_find(decoded.instruction.mnemonic) : nullptr;
  emulation.kind = Emulation::Kind::unsupported;
  if (handler != nullptr) {
    Bus bus(traps, mode);
    Exec exec{cpu, decoded, bus};
    const Step step = handler(exec);
    emulation.failed = bus.failed_count();
    switch (step) {
      case Step::done:
        cpu.rip_set(emulation.rip + decoded.length);
        emulation.kind = Emulation::Kind::done;
        break;
      case Step::failed:
        emulation.kind = Emulation::Kind::access_failed;
        emulation.address = bus.failed_address();
        break;
      case Step::unsupported:
        break;
    }
  }
  errno = saved_errno;
  return emulation;
}

}  // namespace rpcie::mmio
