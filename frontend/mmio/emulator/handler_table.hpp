// The emulator's instruction table: one handler per Zydis mnemonic, filled by each handler
// family (handlers_move/alu/string/vector) when the library loads, read-only afterwards
// (so a lookup from a signal handler takes no lock).
#pragma once

#include "exec.hpp"

namespace rpcie::mmio {

// The handler of `mnemonic`, or null when the emulator does not cover it.
Handler handler_find(ZydisMnemonic mnemonic) noexcept;

}  // namespace rpcie::mmio
