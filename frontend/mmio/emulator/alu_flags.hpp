// Integer operations computed by the CPU itself, so that RFLAGS come out exactly as the
// instruction would have set them (including the flags Intel calls undefined): the
// context's status flags are loaded, the same operation runs on register copies, and the
// resulting flags are read back.
//
// The asm moves RSP below the red zone before pushing (the handler may be a leaf function
// that keeps locals there).
#pragma once

#include <cstdint>

#include "cpu_context.hpp"
#include "rpcie/pci.hpp"

namespace rpcie::mmio {

struct Flagged {
  std::uint64_t result;
  std::uint64_t flags;  // the CPU's RFLAGS after the operation (status bits are the answer)
};

#define RPCIE_MMIO_FLAGS_LOAD         \
  "lea -128(%%rsp), %%rsp\n\t"        \
  "pushfq\n\t"                        \
  "pop %[t]\n\t"                      \
  "and $-2262, %[t]\n\t" /* ~0x8d5 */ \
  "or %[in], %[t]\n\t"                \
  "push %[t]\n\t"                     \
  "popfq\n\t"
#define RPCIE_MMIO_FLAGS_SAVE \
  "pushfq\n\t"                \
  "pop %[t]\n\t"              \
  "lea 128(%%rsp), %%rsp\n\t"

// An operation of two operands `insn b, a` (AT&T order: a is the destination).
#define RPCIE_MMIO_ALU_BINARY(Name, insn)                                             \
  struct Name {                                                                       \
    template <class T>                                                                \
    static Flagged run(T a, T b, std::uint64_t flags) noexcept {                      \
      std::uint64_t t = 0;                                                            \
      asm volatile(RPCIE_MMIO_FLAGS_LOAD insn " %[b], %[a]\n\t" RPCIE_MMIO_FLAGS_SAVE \
                   : [a] "+r"(a), [t] "=&r"(t)                                        \
                   : [b] "r"(b), [in] "r"(flags & kFlagsStatus)                       \
                   : "cc", "memory");                                                 \
      return {a, t};                                                                  \
    }                                                                                 \
  };
// An operation of one operand.
#define RPCIE_MMIO_ALU_UNARY(Name, insn)                                        \
  struct Name {                                                                 \
    template <class T>                                                          \
    static Flagged run(T a, T, std::uint64_t flags) noexcept {                  \
      std::uint64_t t = 0;                                                      \
      asm volatile(RPCIE_MMIO_FLAGS_LOAD insn " %[a]\n\t" RPCIE_MMIO_FLAGS_SAVE \
                   : [a] "+r"(a), [t] "=&r"(t)                                  \
                   : [in] "r"(flags & kFlagsStatus)                             \
                   : "cc", "memory");                                           \
      return {a, t};                                                            \
    }                                                                           \
  };
// Bit tests: binary operations (run by Name##Wide) that have no byte form; callers refuse
// width 1 before getting here.
#define RPCIE_MMIO_ALU_BIT(Name, insn)                           \
  RPCIE_MMIO_ALU_BINARY(Name##Wide, insn)                        \
  struct Name {                                                  \
    template <class T>                                           \
    static Flagged run(T a, T b, std::uint64_t flags) noexcept { \
      if constexpr (sizeof(T) == 1) {                            \
        return {a, flags};                                       \
      } else {                                                   \
        return Name##Wide::run(a, b, flags);                     \
      }                                                          \
    }                                                            \
  };

RPCIE_MMIO_ALU_BINARY(OpAdd, "add")
RPCIE_MMIO_ALU_BINARY(OpOr, "or")
RPCIE_MMIO_ALU_BINARY(OpAdc, "adc")
RPCIE_MMIO_ALU_BINARY(OpSbb, "sbb")
RPCIE_MMIO_ALU_BINARY(OpAnd, "and")
RPCIE_MMIO_ALU_BINARY(OpSub, "sub")
RPCIE_MMIO_ALU_BINARY(OpXor, "xor")
RPCIE_MMIO_ALU_BINARY(OpCmp, "cmp")
RPCIE_MMIO_ALU_BINARY(OpTest, "test")
RPCIE_MMIO_ALU_UNARY(OpInc, "inc")
RPCIE_MMIO_ALU_UNARY(OpDec, "dec")
RPCIE_MMIO_ALU_UNARY(OpNot, "not")
RPCIE_MMIO_ALU_UNARY(OpNeg, "neg")
RPCIE_MMIO_ALU_BIT(OpBt, "bt")
RPCIE_MMIO_ALU_BIT(OpBts, "bts")
RPCIE_MMIO_ALU_BIT(OpBtr, "btr")
RPCIE_MMIO_ALU_BIT(OpBtc, "btc")

// Op::run at the width of `bytes` (1, 2, 4 or 8).
template <class Op>
Flagged alu_run(unsigned bytes, std::uint64_t a, std::uint64_t b, std::uint64_t flags) noexcept {
  return pci::width_visit(bytes, [&]<class T>(T) {
    const Flagged f = Op::template run<T>(static_cast<T>(a), static_cast<T>(b), flags);
    return Flagged{static_cast<T>(f.result), f.flags};
  });
}

}  // namespace rpcie::mmio
