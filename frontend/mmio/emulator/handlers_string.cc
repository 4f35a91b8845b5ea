// String instructions: MOVS, STOS, LODS (B/W/D/Q), with or without REP. Element by element
// in the CPU's order: each element is one load from [RSI] (BAR or ordinary memory, looked
// up for every element) and one store to [RDI]; RSI/RDI move by the element size, backwards
// when RFLAGS.DF is set; REP repeats RCX times and counts RCX down. A failed access under
// FailMode::sigbus leaves the registers at the failing element, as a fault would.
#include "exec.hpp"

namespace rpcie::mmio {
namespace {

enum class StringKind { move, store, load };

constexpr ZydisRegister kAccumulator[9] = {ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_AL,   ZYDIS_REGISTER_AX,
                                           ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_EAX,  ZYDIS_REGISTER_NONE,
                                           ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_RAX};

struct StringRegisters {
  std::uint64_t source = 0, destination = 0, count = 1;
};

template <StringKind kKind>
Step string_element(Exec& exec, StringRegisters& r, unsigned bytes) noexcept {
  std::uint8_t element[8] = {};
  if constexpr (kKind == StringKind::store) {
    std::uint64_t value = 0;
    exec.cpu.gpr_get(kAccumulator[bytes], value);
    value_bytes(value, bytes, element);
  } else {
    if (!exec.bus.load(static_cast<std::uintptr_t>(r.source), bytes, element)) return Step::failed;
  }
  if constexpr (kKind == StringKind::load) {
    exec.cpu.gpr_set(kAccumulator[bytes], bytes_value(element, bytes));
  } else {
    if (!exec.bus.store(static_cast<std::uintptr_t>(r.destination), bytes, element)) return Step::failed;
  }
  return Step::done;
}

template <StringKind kKind>
Step string_run(Exec& exec) noexcept {
  const ZydisDecodedInstruction& instruction = exec.instruction();
  const unsigned bytes = instruction.operand_width / 8;
  if (instruction.address_width != 64 || bytes == 0 || bytes > 8 || kAccumulator[bytes] == ZYDIS_REGISTER_NONE) {
    return Step::unsupported;
  }
  const bool repeat = (instruction.attributes & ZYDIS_ATTRIB_HAS_REP) != 0;
  StringRegisters r;
  exec.cpu.gpr_get(ZYDIS_REGISTER_RSI, r.source);
  exec.cpu.gpr_get(ZYDIS_REGISTER_RDI, r.destination);
  if (repeat) exec.cpu.gpr_get(ZYDIS_REGISTER_RCX, r.count);
  const std::uint64_t step = (exec.cpu.flags() & kFlagDirection) != 0 ? -std::uint64_t{bytes} : bytes;
  Step outcome = Step::done;
  while (r.count > 0) {
    outcome = string_element<kKind>(exec, r, bytes);
    if (outcome != Step::done) break;
    if (kKind != StringKind::store) r.source += step;
    if (kKind != StringKind::load) r.destination += step;
    --r.count;
  }
  exec.cpu.gpr_set(ZYDIS_REGISTER_RSI, r.source);
  exec.cpu.gpr_set(ZYDIS_REGISTER_RDI, r.destination);
  if (repeat) exec.cpu.gpr_set(ZYDIS_REGISTER_RCX, r.count);
  return outcome;
}

// MOVSD names both the string move and SSE's scalar double move.
Step movsd_either(Exec& exec) noexcept {
  if (exec.instruction().meta.category == ZYDIS_CATEGORY_STRINGOP) return string_run<StringKind::move>(exec);
  return vector_move(exec);
}

}  // namespace

void handlers_string_register(Handler* table) noexcept {
  table[ZYDIS_MNEMONIC_MOVSB] = string_run<StringKind::move>;
  table[ZYDIS_MNEMONIC_MOVSW] = string_run<StringKind::move>;
  table[ZYDIS_MNEMONIC_MOVSD] = movsd_either;
  table[ZYDIS_MNEMONIC_MOVSQ] = string_run<StringKind::move>;
  table[ZYDIS_MNEMONIC_STOSB] = string_run<StringKind::store>;
  table[ZYDIS_MNEMONIC_STOSW] = string_run<StringKind::store>;
  table[ZYDIS_MNEMONIC_STOSD] = string_run<StringKind::store>;
  table[ZYDIS_MNEMONIC_STOSQ] = string_run<StringKind::store>;
  table[ZYDIS_MNEMONIC_LODSB] = string_run<StringKind::load>;
  table[ZYDIS_MNEMONIC_LODSW] = string_run<StringKind::load>;
  table[ZYDIS_MNEMONIC_LODSD] = string_run<StringKind::load>;
  table[ZYDIS_MNEMONIC_LODSQ] = string_run<StringKind::load>;
}

}  // namespace rpcie::mmio
