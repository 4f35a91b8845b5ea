// SSE/AVX/AVX-512 instructions with a memory operand: the moves (MOVD/MOVQ, MOVSS/MOVSD,
// MOVDQU/MOVDQA/MOVUPS/MOVAPS/MOVUPD/MOVAPD, the non-temporal moves, LDDQU, their VEX forms
// and the EVEX VMOVDQU8/16/32/64, VMOVDQA32/64, VMOVUPS/... with opmask registers) and the
// integer compares glibc's memcmp uses (VPCMP[U]B/W/D/Q, VPCMPEQ/VPCMPGT), where the
// memory operand is loaded and the compare runs on the register copies.
//
// Memory is touched only for the elements an opmask selects (the CPU suppresses the others,
// faults included); each contiguous run of selected elements is one logical access, split
// by the Bus into aligned pieces of at most 8 bytes in ascending order.
#include <cstring>
#include <initializer_list>

#include "exec.hpp"

namespace rpcie::mmio {
namespace {

struct VectorOperands {
  const ZydisDecodedOperand* memory = nullptr;
  const ZydisDecodedOperand* vector[2] = {};    // the vector registers, in operand order
  const ZydisDecodedOperand* opmask = nullptr;  // a mask register that is an operand (compare result)
  const ZydisDecodedOperand* immediate = nullptr;
  unsigned vectors = 0;
};

// Sorts the visible operands; the write mask ({k}) is not one of them (avx.mask).
bool vector_operands(const Exec& exec, VectorOperands& o) noexcept {
  for (unsigned i = 0; i < exec.visible(); ++i) {
    const ZydisDecodedOperand& op = exec.operand(i);
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY) {
      if (o.memory != nullptr) return false;
      o.memory = &op;
    } else if (op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
      o.immediate = &op;
    } else if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) {
      const ZydisRegisterClass c = ZydisRegisterGetClass(op.reg.value);
      if (c == ZYDIS_REGCLASS_MASK) {
        if (op.reg.value == exec.instruction().avx.mask.reg && i != 0) continue;
        o.opmask = &op;
      } else if (o.vectors < 2) {
        o.vector[o.vectors++] = &op;
      } else {
        return false;
      }
    }
  }
  return o.memory != nullptr && exec.instruction().avx.broadcast.mode == ZYDIS_BROADCAST_MODE_INVALID;
}

// The elements the write mask selects (all when there is none).
std::uint64_t write_mask(const Exec& exec) noexcept {
  const auto& mask = exec.instruction().avx.mask;
  std::uint64_t value = ~std::uint64_t{0};
  if (mask.reg != ZYDIS_REGISTER_NONE && mask.reg != ZYDIS_REGISTER_K0) exec.cpu.opmask_get(mask.reg, value);
  return value;
}

unsigned element_bytes(const ZydisDecodedOperand& memory) noexcept {
  const unsigned bytes = memory.element_size / 8;
  return bytes == 0 ? operand_bytes(memory) : bytes;
}

// Loads (kStore false) or stores the selected elements of `bytes` at `address`, a run of
// adjacent selected elements at a time, in ascending order.
template <bool kStore>
Step elements_transfer(Exec& exec, std::uintptr_t address, unsigned bytes, unsigned element, std::uint64_t mask,
                       std::uint8_t* data) noexcept {
  const unsigned count = bytes / element;
  for (unsigned i = 0; i < count;) {
    if ((mask >> i & 1) == 0) {
      ++i;
      continue;
    }
    unsigned end = i + 1;
    while (end < count && (mask >> end & 1) != 0) ++end;
    const unsigned at = i * element, length = (end - i) * element;
    const bool ok =
        kStore ? exec.bus.store(address + at, length, data + at) : exec.bus.load(address + at, length, data + at);
    if (!ok) return Step::failed;
    i = end;
  }
  return Step::done;
}

bool zeroing(const Exec& exec) noexcept { return exec.instruction().avx.mask.mode == ZYDIS_MASK_MODE_ZEROING; }

}  // namespace

Step vector_move(Exec& exec) noexcept {
  VectorOperands o;
  if (!vector_operands(exec, o) || o.vectors != 1 || o.opmask != nullptr) return Step::unsupported;
  std::uintptr_t address = 0;
  if (!operand_address(exec.cpu, exec.decoded, *o.memory, address)) return Step::unsupported;
  const unsigned bytes = operand_bytes(*o.memory), element = element_bytes(*o.memory);
  if (bytes == 0 || bytes > kVectorBytes || element == 0 || bytes % element != 0) return Step::unsupported;
  const std::uint64_t mask = write_mask(exec);
  const ZydisRegister reg = o.vector[0]->reg.value;
  VectorValue value;
  if (!exec.cpu.vector_get(reg, value)) return Step::unsupported;
  if (o.memory == &exec.operand(0)) {
    return elements_transfer<true>(exec, address, bytes, element, mask, value.bytes);
  }
  // A load: unselected elements keep the register's bytes (merging) or become zero.
  if (zeroing(exec)) {
    for (unsigned i = 0; i < bytes; ++i) {
      if ((mask >> (i / element) & 1) == 0) value.bytes[i] = 0;
    }
  }
  if (const Step s = elements_transfer<false>(exec, address, bytes, element, mask, value.bytes); s != Step::done) {
    return s;
  }
  const bool legacy = exec.instruction().encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY;
  return exec.cpu.vector_set(reg, value, bytes, legacy ? 16 : kVectorBytes) ? Step::done : Step::unsupported;
}

namespace {

std::int64_t element_signed(const std::uint8_t* p, unsigned bytes) noexcept {
  const std::uint64_t v = bytes_value(p, bytes);
  const std::uint64_t sign = std::uint64_t{1} << (8 * bytes - 1);
  return bytes == 8 ? static_cast<std::int64_t>(v) : static_cast<std::int64_t>((v ^ sign) - sign);
}

// The AVX-512 compare predicates (imm8 bits 2:0): EQ, LT, LE, FALSE, NE, NLT, NLE, TRUE.
template <bool kSigned>
bool element_compare(const std::uint8_t* a, const std::uint8_t* b, unsigned bytes, unsigned predicate) noexcept {
  bool less = false, equal = false;
  if constexpr (kSigned) {
    less = element_signed(a, bytes) < element_signed(b, bytes);
    equal = element_signed(a, bytes) == element_signed(b, bytes);
  } else {
    less = bytes_value(a, bytes) < bytes_value(b, bytes);
    equal = bytes_value(a, bytes) == bytes_value(b, bytes);
  }
  constexpr bool kFalse = false;
  const bool results[8] = {equal, less, less || equal, kFalse, !equal, !less, !(less || equal), true};
  return results[predicate & 7];
}

constexpr unsigned kPredicateEqual = 0, kPredicateGreater = 6;

// VPCMP[U]x k {k}, v, m, imm / VPCMPEQx, VPCMPGTx: into an opmask (EVEX) or, element-wise
// all ones, into a vector register (SSE/VEX).
template <bool kSigned, int kFixedPredicate>
Step vector_compare(Exec& exec) noexcept {
  VectorOperands o;
  if (!vector_operands(exec, o) || o.memory != &exec.operand(exec.visible() - (o.immediate != nullptr ? 2 : 1))) {
    return Step::unsupported;
  }
  unsigned predicate = kFixedPredicate >= 0 ? static_cast<unsigned>(kFixedPredicate) : 0;
  if (kFixedPredicate < 0 && o.immediate == nullptr) return Step::unsupported;
  if (kFixedPredicate < 0) predicate = static_cast<unsigned>(o.immediate->imm.value.u);
  const ZydisDecodedOperand* first = o.vector[o.opmask != nullptr ? 0 : (o.vectors == 2 ? 1 : 0)];
  std::uintptr_t address = 0;
  if (first == nullptr || !operand_address(exec.cpu, exec.decoded, *o.memory, address)) return Step::unsupported;
  const unsigned bytes = operand_bytes(*o.memory), element = element_bytes(*o.memory);
  if (bytes == 0 || bytes > kVectorBytes || element == 0 || element > 8) return Step::unsupported;
  const std::uint64_t mask = write_mask(exec);
  VectorValue a, b;
  if (!exec.cpu.vector_get(first->reg.value, a)) return Step::unsupported;
  if (const Step s = elements_transfer<false>(exec, address, bytes, element, mask, b.bytes); s != Step::done) return s;
  std::uint64_t bits = 0;
  VectorValue out;
  for (unsigned i = 0; i < bytes / element; ++i) {
    if ((mask >> i & 1) == 0) continue;
    if (element_compare<kSigned>(a.bytes + i * element, b.bytes + i * element, element, predicate)) {
      bits |= std::uint64_t{1} << i;
      std::memset(out.bytes + i * element, 0xff, element);
    }
  }
  if (o.opmask != nullptr) return exec.cpu.opmask_set(o.opmask->reg.value, bits) ? Step::done : Step::unsupported;
  const bool legacy = exec.instruction().encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY;
  return exec.cpu.vector_set(o.vector[0]->reg.value, out, bytes, legacy ? 16 : kVectorBytes) ? Step::done
                                                                                             : Step::unsupported;
}

// A bitwise function of three bytes given as a VPTERNLOG truth table: bit (a<<2 | b<<1 | c)
// of `table` is the result for those input bits.
std::uint8_t ternary(std::uint8_t a, std::uint8_t b, std::uint8_t c, unsigned table) noexcept {
  unsigned r = 0;
  for (unsigned index = 0; index < 8; ++index) {
    if ((table >> index & 1) == 0) continue;
    r |= (index & 4 ? a : ~a) & (index & 2 ? b : ~b) & (index & 1 ? c : ~c);
  }
  return static_cast<std::uint8_t>(r);
}

// The truth tables of the two-operand forms (B = first source, C = memory).
constexpr int kTableXor = 0x66, kTableAnd = 0x88, kTableOr = 0xee, kTableAndNot = 0x22;
constexpr int kTableImmediate = -1;  // VPTERNLOG: the instruction's imm8

// PXOR/PAND/POR/PANDN (destination is the first source), VPXOR[D/Q]..., VPTERNLOGD/Q: the
// memory operand is loaded (selected elements only) and the function applied bytewise.
template <int kTable>
Step vector_bitwise(Exec& exec) noexcept {
  VectorOperands o;
  if (!vector_operands(exec, o) || o.opmask != nullptr || o.vectors == 0) return Step::unsupported;
  if (kTable == kTableImmediate && o.immediate == nullptr) return Step::unsupported;
  const unsigned table = kTable == kTableImmediate ? static_cast<unsigned>(o.immediate->imm.value.u) : kTable;
  std::uintptr_t address = 0;
  if (!operand_address(exec.cpu, exec.decoded, *o.memory, address)) return Step::unsupported;
  const unsigned bytes = operand_bytes(*o.memory), element = element_bytes(*o.memory);
  if (bytes == 0 || bytes > kVectorBytes || element == 0 || bytes % element != 0) return Step::unsupported;
  const std::uint64_t mask = write_mask(exec);
  VectorValue a, b, c;
  if (!exec.cpu.vector_get(o.vector[0]->reg.value, a) || !exec.cpu.vector_get(o.vector[o.vectors - 1]->reg.value, b)) {
    return Step::unsupported;
  }
  if (const Step s = elements_transfer<false>(exec, address, bytes, element, mask, c.bytes); s != Step::done) return s;
  VectorValue out = a;
  for (unsigned i = 0; i < bytes; ++i) {
    if ((mask >> (i / element) & 1) != 0) {
      out.bytes[i] = ternary(a.bytes[i], b.bytes[i], c.bytes[i], table);
    } else if (zeroing(exec)) {
      out.bytes[i] = 0;
    }
  }
  const bool legacy = exec.instruction().encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY;
  return exec.cpu.vector_set(o.vector[0]->reg.value, out, bytes, legacy ? 16 : kVectorBytes) ? Step::done
                                                                                             : Step::unsupported;
}

}  // namespace

void handlers_vector_register(Handler* table) noexcept {
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_PXOR, ZYDIS_MNEMONIC_VPXOR, ZYDIS_MNEMONIC_VPXORD, ZYDIS_MNEMONIC_VPXORQ}) {
    table[m] = vector_bitwise<kTableXor>;
  }
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_PAND, ZYDIS_MNEMONIC_VPAND, ZYDIS_MNEMONIC_VPANDD, ZYDIS_MNEMONIC_VPANDQ}) {
    table[m] = vector_bitwise<kTableAnd>;
  }
  for (const ZydisMnemonic m : {ZYDIS_MNEMONIC_POR, ZYDIS_MNEMONIC_VPOR, ZYDIS_MNEMONIC_VPORD, ZYDIS_MNEMONIC_VPORQ}) {
    table[m] = vector_bitwise<kTableOr>;
  }
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_PANDN, ZYDIS_MNEMONIC_VPANDN, ZYDIS_MNEMONIC_VPANDND, ZYDIS_MNEMONIC_VPANDNQ}) {
    table[m] = vector_bitwise<kTableAndNot>;
  }
  table[ZYDIS_MNEMONIC_VPTERNLOGD] = vector_bitwise<kTableImmediate>;
  table[ZYDIS_MNEMONIC_VPTERNLOGQ] = vector_bitwise<kTableImmediate>;
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_MOVD,      ZYDIS_MNEMONIC_MOVQ,      ZYDIS_MNEMONIC_MOVSS,     ZYDIS_MNEMONIC_MOVDQU,
        ZYDIS_MNEMONIC_MOVDQA,    ZYDIS_MNEMONIC_MOVUPS,    ZYDIS_MNEMONIC_MOVAPS,    ZYDIS_MNEMONIC_MOVUPD,
        ZYDIS_MNEMONIC_MOVAPD,    ZYDIS_MNEMONIC_MOVNTDQ,   ZYDIS_MNEMONIC_MOVNTDQA,  ZYDIS_MNEMONIC_MOVNTPS,
        ZYDIS_MNEMONIC_MOVNTPD,   ZYDIS_MNEMONIC_LDDQU,     ZYDIS_MNEMONIC_VMOVD,     ZYDIS_MNEMONIC_VMOVQ,
        ZYDIS_MNEMONIC_VMOVSS,    ZYDIS_MNEMONIC_VMOVSD,    ZYDIS_MNEMONIC_VMOVDQU,   ZYDIS_MNEMONIC_VMOVDQA,
        ZYDIS_MNEMONIC_VMOVUPS,   ZYDIS_MNEMONIC_VMOVAPS,   ZYDIS_MNEMONIC_VMOVUPD,   ZYDIS_MNEMONIC_VMOVAPD,
        ZYDIS_MNEMONIC_VMOVNTDQ,  ZYDIS_MNEMONIC_VMOVNTDQA, ZYDIS_MNEMONIC_VMOVNTPS,  ZYDIS_MNEMONIC_VMOVNTPD,
        ZYDIS_MNEMONIC_VLDDQU,    ZYDIS_MNEMONIC_VMOVDQU8,  ZYDIS_MNEMONIC_VMOVDQU16, ZYDIS_MNEMONIC_VMOVDQU32,
        ZYDIS_MNEMONIC_VMOVDQU64, ZYDIS_MNEMONIC_VMOVDQA32, ZYDIS_MNEMONIC_VMOVDQA64}) {
    table[m] = vector_move;
  }
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_VPCMPB, ZYDIS_MNEMONIC_VPCMPW, ZYDIS_MNEMONIC_VPCMPD, ZYDIS_MNEMONIC_VPCMPQ}) {
    table[m] = vector_compare<true, -1>;
  }
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_VPCMPUB, ZYDIS_MNEMONIC_VPCMPUW, ZYDIS_MNEMONIC_VPCMPUD, ZYDIS_MNEMONIC_VPCMPUQ}) {
    table[m] = vector_compare<false, -1>;
  }
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_PCMPEQB, ZYDIS_MNEMONIC_PCMPEQW, ZYDIS_MNEMONIC_PCMPEQD, ZYDIS_MNEMONIC_PCMPEQQ,
        ZYDIS_MNEMONIC_VPCMPEQB, ZYDIS_MNEMONIC_VPCMPEQW, ZYDIS_MNEMONIC_VPCMPEQD, ZYDIS_MNEMONIC_VPCMPEQQ}) {
    table[m] = vector_compare<false, kPredicateEqual>;
  }
  for (const ZydisMnemonic m :
       {ZYDIS_MNEMONIC_PCMPGTB, ZYDIS_MNEMONIC_PCMPGTW, ZYDIS_MNEMONIC_PCMPGTD, ZYDIS_MNEMONIC_PCMPGTQ,
        ZYDIS_MNEMONIC_VPCMPGTB, ZYDIS_MNEMONIC_VPCMPGTW, ZYDIS_MNEMONIC_VPCMPGTD, ZYDIS_MNEMONIC_VPCMPGTQ}) {
    table[m] = vector_compare<true, kPredicateGreater>;
  }
}

}  // namespace rpcie::mmio
