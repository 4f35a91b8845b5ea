// Integer instructions that read (and most also write) a memory operand: the arithmetic and
// logic read-modify-writes (ADD, OR, ADC, SBB, AND, SUB, XOR, INC, DEC, NOT, NEG), the
// compares (CMP, TEST), bit tests (BT, BTS, BTR, BTC), and the exchanges (XCHG, XADD,
// CMPXCHG). A read-modify-write is one load then one store at the operand's width; a LOCK
// prefix changes nothing (there is no atomicity across a fabric). RFLAGS are the CPU's own
// (alu_flags.hpp).
#include "alu_flags.hpp"
#include "exec.hpp"

namespace rpcie::mmio {
namespace {

// A source operand at the destination's width (immediates arrive sign-extended by Zydis).
Step source_read(Exec& exec, const ZydisDecodedOperand& source, unsigned bytes, std::uint64_t& value) noexcept {
  if (source.type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
    value = source.imm.value.u & width_mask(bytes);
    return Step::done;
  }
  return integer_read(exec, source, value);
}

template <class Op, bool kWrite>
Step alu_binary(Exec& exec) noexcept {
  if (exec.visible() != 2) return Step::unsupported;
  const ZydisDecodedOperand& destination = exec.operand(0);
  const unsigned bytes = operand_bytes(destination);
  std::uint64_t a = 0, b = 0;
  if (const Step s = integer_read(exec, destination, a); s != Step::done) return s;
  if (const Step s = source_read(exec, exec.operand(1), bytes, b); s != Step::done) return s;
  const Flagged f = alu_run<Op>(bytes, a, b, exec.cpu.flags());
  if constexpr (kWrite) {
    if (const Step s = integer_write(exec, destination, f.result); s != Step::done) return s;
  }
  exec.cpu.flags_set(f.flags, kFlagsStatus);
  return Step::done;
}

template <class Op>
Step alu_unary(Exec& exec) noexcept {
  if (exec.visible() != 1) return Step::unsupported;
  const ZydisDecodedOperand& destination = exec.operand(0);
  std::uint64_t a = 0;
  if (const Step s = integer_read(exec, destination, a); s != Step::done) return s;
  const Flagged f = alu_run<Op>(operand_bytes(destination), a, 0, exec.cpu.flags());
  if (const Step s = integer_write(exec, destination, f.result); s != Step::done) return s;
  exec.cpu.flags_set(f.flags, kFlagsStatus);
  return Step::done;
}

// BT with a register offset addresses a bit string: the operand moves by whole operands
// (signed), as the CPU does; an immediate offset stays within the operand.
template <class Op, bool kWrite>
Step alu_bit(Exec& exec) noexcept {
  if (exec.visible() != 2) return Step::unsupported;
  ZydisDecodedOperand destination = exec.operand(0);
  const unsigned bytes = operand_bytes(destination);
  if (bytes < 2 || bytes > 8) return Step::unsupported;
  const unsigned bits = 8 * bytes;
  std::uint64_t offset = 0;
  if (const Step s = source_read(exec, exec.operand(1), bytes, offset); s != Step::done) return s;
  if (destination.type == ZYDIS_OPERAND_TYPE_MEMORY && exec.operand(1).type == ZYDIS_OPERAND_TYPE_REGISTER) {
    const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
    const auto signed_offset = static_cast<std::int64_t>((offset ^ sign) - sign);
    destination.mem.disp.value += (signed_offset >> (bits == 16 ? 4 : bits == 32 ? 5 : 6)) * bytes;
  }
  offset &= bits - 1;
  std::uint64_t a = 0;
  if (const Step s = integer_read(exec, destination, a); s != Step::done) return s;
  const Flagged f = alu_run<Op>(bytes, a, offset, exec.cpu.flags());
  if constexpr (kWrite) {
    if (const Step s = integer_write(exec, destination, f.result); s != Step::done) return s;
  }
  exec.cpu.flags_set(f.flags, kFlagsStatus);
  return Step::done;
}

// XCHG: the memory operand is loaded, then the register's value stored there.
Step exchange(Exec& exec) noexcept {
  if (exec.visible() != 2) return Step::unsupported;
  const bool first_is_memory = exec.operand(0).type == ZYDIS_OPERAND_TYPE_MEMORY;
  const ZydisDecodedOperand& memory = exec.operand(first_is_memory ? 0 : 1);
  const ZydisDecodedOperand& reg = exec.operand(first_is_memory ? 1 : 0);
  std::uint64_t loaded = 0, stored = 0;
  if (const Step s = integer_read(exec, memory, loaded); s != Step::done) return s;
  if (const Step s = integer_read(exec, reg, stored); s != Step::done) return s;
  if (const Step s = integer_write(exec, memory, stored); s != Step::done) return s;
  return integer_write(exec, reg, loaded);
}

// XADD: the sum is stored, the register gets the old value; flags of the ADD.
Step exchange_add(Exec& exec) noexcept {
  if (exec.visible() != 2) return Step::unsupported;
  const ZydisDecodedOperand& destination = exec.operand(0);
  std::uint64_t a = 0, b = 0;
  if (const Step s = integer_read(exec, destination, a); s != Step::done) return s;
  if (const Step s = integer_read(exec, exec.operand(1), b); s != Step::done) return s;
  const Flagged f = alu_run<OpAdd>(operand_bytes(destination), a, b, exec.cpu.flags());
  if (const Step s = integer_write(exec, destination, f.result); s != Step::done) return s;
  if (const Step s = integer_write(exec, exec.operand(1), a); s != Step::done) return s;
  exec.cpu.flags_set(f.flags, kFlagsStatus);
  return Step::done;
}

// CMPXCHG: flags of CMP accumulator, destination; equal stores the source, unequal loads the
// accumulator. The unequal case stores nothing (the CPU's locked write-back of the unchanged
// value would be a second side effect on a device register).
Step compare_exchange(Exec& exec) noexcept {
  if (exec.visible() != 2) return Step::unsupported;
  const ZydisDecodedOperand& destination = exec.operand(0);
  const unsigned bytes = operand_bytes(destination);
  constexpr ZydisRegister kAccumulator[9] = {ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_AL,   ZYDIS_REGISTER_AX,
                                             ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_EAX,  ZYDIS_REGISTER_NONE,
                                             ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_RAX};
  if (bytes == 0 || bytes > 8 || kAccumulator[bytes] == ZYDIS_REGISTER_NONE) return Step::unsupported;
  std::uint64_t a = 0, accumulator = 0, source = 0;
  if (const Step s = integer_read(exec, destination, a); s != Step::done) return s;
  if (const Step s = integer_read(exec, exec.operand(1), source); s != Step::done) return s;
  exec.cpu.gpr_get(kAccumulator[bytes], accumulator);
  const Flagged f = alu_run<OpCmp>(bytes, accumulator, a, exec.cpu.flags());
  if (a == accumulator) {
    if (const Step s = integer_write(exec, destination, source); s != Step::done) return s;
  } else {
    exec.cpu.gpr_set(kAccumulator[bytes], a);
  }
  exec.cpu.flags_set(f.flags, kFlagsStatus);
  return Step::done;
}

}  // namespace

void handlers_alu_register(Handler* table) noexcept {
  table[ZYDIS_MNEMONIC_ADD] = alu_binary<OpAdd, true>;
  table[ZYDIS_MNEMONIC_OR] = alu_binary<OpOr, true>;
  table[ZYDIS_MNEMONIC_ADC] = alu_binary<OpAdc, true>;
  table[ZYDIS_MNEMONIC_SBB] = alu_binary<OpSbb, true>;
  table[ZYDIS_MNEMONIC_AND] = alu_binary<OpAnd, true>;
  table[ZYDIS_MNEMONIC_SUB] = alu_binary<OpSub, true>;
  table[ZYDIS_MNEMONIC_XOR] = alu_binary<OpXor, true>;
  table[ZYDIS_MNEMONIC_CMP] = alu_binary<OpCmp, false>;
  table[ZYDIS_MNEMONIC_TEST] = alu_binary<OpTest, false>;
  table[ZYDIS_MNEMONIC_INC] = alu_unary<OpInc>;
  table[ZYDIS_MNEMONIC_DEC] = alu_unary<OpDec>;
  table[ZYDIS_MNEMONIC_NOT] = alu_unary<OpNot>;
  table[ZYDIS_MNEMONIC_NEG] = alu_unary<OpNeg>;
  table[ZYDIS_MNEMONIC_BT] = alu_bit<OpBt, false>;
  table[ZYDIS_MNEMONIC_BTS] = alu_bit<OpBts, true>;
  table[ZYDIS_MNEMONIC_BTR] = alu_bit<OpBtr, true>;
  table[ZYDIS_MNEMONIC_BTC] = alu_bit<OpBtc, true>;
  table[ZYDIS_MNEMONIC_XCHG] = exchange;
  table[ZYDIS_MNEMONIC_XADD] = exchange_add;
  table[ZYDIS_MNEMONIC_CMPXCHG] = compare_exchange;
}

}  // namespace rpcie::mmio
