// The interrupted thread's registers as the kernel saved them in the signal frame: general
// registers, RFLAGS and RIP in uc_mcontext.gregs; x87/SSE/AVX/AVX-512 state in the XSAVE
// area at uc_mcontext.fpregs (standard, non-compacted format: what the kernel writes for a
// user signal frame). Writes here become the thread's registers when the handler returns.
//
// Async-signal-safe: no allocation; the XSAVE component offsets come from CPUID leaf 0xD,
// read once per process into relaxed atomics (a race only repeats the same answer).
#pragma once

#include <Zydis/Zydis.h>
#include <ucontext.h>

#include <cstdint>

namespace rpcie::mmio {

// One vector register at its widest (zmm: 64 bytes); xmm is bytes 0..15, ymm 0..31.
inline constexpr unsigned kVectorBytes = 64;
struct VectorValue {
  std::uint8_t bytes[kVectorBytes] = {};
};

// RFLAGS bits an arithmetic instruction sets: CF, PF, AF, ZF, SF, OF.
inline constexpr std::uint64_t kFlagsStatus = 0x8d5;
inline constexpr std::uint64_t kFlagCarry = 0x1;
inline constexpr std::uint64_t kFlagZero = 0x40;
inline constexpr std::uint64_t kFlagDirection = 0x400;

class CpuContext {
 public:
  explicit CpuContext(ucontext_t& context) noexcept : context_(context) {}

  std::uint64_t rip() const noexcept;
  void rip_set(std::uint64_t rip) noexcept;
  std::uint64_t flags() const noexcept;
  // Replaces the bits of `mask` with those of `flags`.
  void flags_set(std::uint64_t flags, std::uint64_t mask) noexcept;

  // General registers of any width (AL, AH, AX, EAX, RAX, R8B, ...): the value, zero-extended.
  // false: `reg` is not a general register.
  bool gpr_get(ZydisRegister reg, std::uint64_t& value) const noexcept;
  // Writes as the CPU does: a 32-bit write zero-extends into the 64-bit register, 8- and
  // 16-bit writes keep the other bits.
  bool gpr_set(ZydisRegister reg, std::uint64_t value) noexcept;

  // Vector registers xmm/ymm/zmm 0..31: all 64 bytes of the zmm holding `reg`. false: not a
  // vector register, or its state is not in the signal frame (no XSAVE area, component absent).
  bool vector_get(ZydisRegister reg, VectorValue& value) const noexcept;
  // Writes bytes [0, count) of the zmm holding `reg` from `value`, zeroes [count, zero_to)
  // and keeps the rest (legacy SSE writes keep bits 128 and up; VEX/EVEX zero up to 64 bytes).
  bool vector_set(ZydisRegister reg, const VectorValue& value, unsigned count, unsigned zero_to) noexcept;

  // Opmask registers k0..k7.
  bool opmask_get(ZydisRegister reg, std::uint64_t& value) const noexcept;
  bool opmask_set(ZydisRegister reg, std::uint64_t value) noexcept;

 private:
  ucontext_t& context_;
};

}  // namespace rpcie::mmio
