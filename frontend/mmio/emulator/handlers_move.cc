// Integer moves with a memory operand: MOV (register, immediate and moffs forms), MOVNTI,
// MOVZX, MOVSX, MOVSXD, MOVBE. The source is read (one access of its width), converted,
// and written to the destination.
#include <cstdint>

#include "exec.hpp"

namespace rpcie::mmio {
namespace {

std::uint64_t sign_extend(std::uint64_t value, unsigned bytes) noexcept {
  if (bytes >= 8) return value;
  const std::uint64_t sign = std::uint64_t{1} << (8 * bytes - 1);
  return (value ^ sign) - sign;
}

std::uint64_t byte_swap(std::uint64_t value, unsigned bytes) noexcept {
  std::uint64_t swapped = 0;
  for (unsigned i = 0; i < bytes; ++i) swapped = swapped << 8 | ((value >> (8 * i)) & 0xff);
  return swapped;
}

enum class Convert { none, zero, sign, swap };

template <Convert kConvert>
Step integer_move(Exec& exec) noexcept {
  if (exec.visible() != 2) return Step::unsupported;
  const ZydisDecodedOperand& destination = exec.operand(0);
  const ZydisDecodedOperand& source = exec.operand(1);
  std::uint64_t value = 0;
  if (const Step s = integer_read(exec, source, value); s != Step::done) return s;
  // MOV r/m64, imm32 sign-extends the immediate (Zydis keeps it sign-extended in value.u).
  if (source.type == ZYDIS_OPERAND_TYPE_IMMEDIATE) value = source.imm.value.u;
  if constexpr (kConvert == Convert::sign) value = sign_extend(value, operand_bytes(source));
  if constexpr (kConvert == Convert::swap) value = byte_swap(value, operand_bytes(source));
  return integer_write(exec, destination, value & width_mask(operand_bytes(destination)));
}

}  // namespace

void handlers_move_register(Handler* table) noexcept {
  table[ZYDIS_MNEMONIC_MOV] = integer_move<Convert::none>;
  table[ZYDIS_MNEMONIC_MOVNTI] = integer_move<Convert::none>;
  table[ZYDIS_MNEMONIC_MOVZX] = integer_move<Convert::zero>;
  table[ZYDIS_MNEMONIC_MOVSX] = integer_move<Convert::sign>;
  table[ZYDIS_MNEMONIC_MOVSXD] = integer_move<Convert::sign>;
  table[ZYDIS_MNEMONIC_MOVBE] = integer_move<Convert::swap>;
}

}  // namespace rpcie::mmio
