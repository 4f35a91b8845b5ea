// What an instruction handler works with: the decoded instruction, the interrupted context,
// and the bus its memory operands go through; plus the operand helpers handlers share.
#pragma once

#include <cstdint>

#include "access.hpp"
#include "cpu_context.hpp"
#include "decode.hpp"

namespace rpcie::mmio {

// How a handler ended: the instruction is complete (registers and memory written; the
// caller advances RIP unless the handler set it), not covered, or stopped by a failed BAR
// access under FailMode::sigbus (Bus::failed_address).
enum class Step { done, unsupported, failed };

struct Exec {
  CpuContext& cpu;
  const Decoded& decoded;
  Bus& bus;

  const ZydisDecodedInstruction& instruction() const noexcept { return decoded.instruction; }
  const ZydisDecodedOperand& operand(unsigned i) const noexcept { return decoded.operands[i]; }
  unsigned visible() const noexcept { return decoded.instruction.operand_count_visible; }
};

using Handler = Step (*)(Exec& exec);

// Integer operands (register, immediate or memory; at most 8 bytes), zero-extended;
// immediates are sign-extended to the operand's size first. `address` caches a memory
// operand's address between a read and the write that follows it.
Step integer_read(Exec& exec, const ZydisDecodedOperand& operand, std::uint64_t& value) noexcept;
Step integer_write(Exec& exec, const ZydisDecodedOperand& operand, std::uint64_t value) noexcept;

// The mask of an operand of `bytes` bytes.
constexpr std::uint64_t width_mask(unsigned bytes) noexcept {
  return bytes >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
}

// Each handler family registers its mnemonics in the table (handler_table.cc).
void handlers_move_register(Handler* table) noexcept;
void handlers_alu_register(Handler* table) noexcept;
void handlers_string_register(Handler* table) noexcept;
void handlers_vector_register(Handler* table) noexcept;

// MOVSD is both a string move (A5) and an SSE scalar move (F2 0F 10/11): the string
// handler hands the SSE form to this one.
Step vector_move(Exec& exec) noexcept;

}  // namespace rpcie::mmio
