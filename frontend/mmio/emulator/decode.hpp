// Decoding the faulting instruction (Zydis) and resolving its operands against the
// interrupted context: effective addresses, register and immediate values.
#pragma once

#include <Zydis/Zydis.h>

#include <cstdint>

#include "cpu_context.hpp"

namespace rpcie::mmio {

struct Decoded {
  ZydisDecodedInstruction instruction;
  ZydisDecodedOperand operands[ZYDIS_MAX_OPERAND_COUNT];
  std::uint8_t bytes[ZYDIS_MAX_INSTRUCTION_LENGTH];
  std::uint8_t length;  // bytes read at RIP (the instruction's length once decoded)
};

// Reads the bytes at `rip` (never past the page unless the instruction continues there, which
// the CPU has then fetched) and decodes them. false: not a valid 64-bit instruction;
// `decoded.bytes`/`length` still hold what was read.
bool instruction_decode(std::uintptr_t rip, Decoded& decoded) noexcept;

// The effective address of a memory operand (base + index * scale + displacement, RIP-relative
// from the next instruction, FS/GS bases added). false: an addressing form not covered
// (32-bit addresses, VSIB, other segments).
bool operand_address(const CpuContext& cpu, const Decoded& decoded, const ZydisDecodedOperand& operand,
                     std::uintptr_t& address) noexcept;

// Operand size in bytes.
inline unsigned operand_bytes(const ZydisDecodedOperand& operand) noexcept { return operand.size / 8; }

}  // namespace rpcie::mmio
