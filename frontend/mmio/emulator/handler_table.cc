#include "handler_table.hpp"

namespace rpcie::mmio {
namespace {

struct HandlerTable {
  Handler handlers[ZYDIS_MNEMONIC_MAX_VALUE + 1] = {};

  HandlerTable() noexcept {
    handlers_move_register(handlers);
    handlers_alu_register(handlers);
    handlers_string_register(handlers);
    handlers_vector_register(handlers);
  }
};

// Built during static initialization, before any fault can reach the emulator.
const HandlerTable g_table;

}  // namespace

Handler handler_find(ZydisMnemonic mnemonic) noexcept {
  if (mnemonic <= ZYDIS_MNEMONIC_INVALID || mnemonic > ZYDIS_MNEMONIC_MAX_VALUE) return nullptr;
  return g_table.handlers[mnemonic];
}

}  // namespace rpcie::mmio
