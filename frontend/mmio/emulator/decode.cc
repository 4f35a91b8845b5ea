#include "decode.hpp"

#include <asm/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emulator.hpp"

namespace rpcie::mmio {
namespace {

bool decode_bytes(const std::uint8_t* bytes, std::size_t length, Decoded& decoded) noexcept {
  ZydisDecoder decoder;
  if (!ZYAN_SUCCESS(ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64))) return false;
  return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&decoder, bytes, length, &decoded.instruction, decoded.operands));
}

bool segment_base(ZydisRegister segment, std::uint64_t& base) noexcept {
  if (segment == ZYDIS_REGISTER_NONE || segment == ZYDIS_REGISTER_DS || segment == ZYDIS_REGISTER_SS ||
      segment == ZYDIS_REGISTER_ES || segment == ZYDIS_REGISTER_CS) {
    base = 0;
    return true;
  }
  if (segment != ZYDIS_REGISTER_FS && segment != ZYDIS_REGISTER_GS) return false;
  const int saved = errno;  // arch_prctl is async-signal-safe; keep the program's errno
  unsigned long value = 0;
  const long rc = syscall(SYS_arch_prctl, segment == ZYDIS_REGISTER_FS ? ARCH_GET_FS : ARCH_GET_GS, &value);
  errno = saved;
  base = value;
  return rc == 0;
}

}  // namespace

bool instruction_decode(std::uintptr_t rip, Decoded& decoded) noexcept {
  std::size_t available = kPage - rip % kPage;
  if (available > sizeof decoded.bytes) available = sizeof decoded.bytes;
  std::memcpy(decoded.bytes, reinterpret_cast<const void*>(rip), available);
  decoded.length = static_cast<std::uint8_t>(available);
  if (decode_bytes(decoded.bytes, available, decoded)) {
    decoded.length = decoded.instruction.length;
    return true;
  }
  if (available == sizeof decoded.bytes) return false;
  // The instruction may continue on the next page: the CPU fetched it whole, so it is mapped.
  ZydisDecoder decoder;
  ZydisDecodedInstruction probe;
  ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  if (ZydisDecoderDecodeInstruction(&decoder, nullptr, decoded.bytes, available, &probe) != ZYDIS_STATUS_NO_MORE_DATA) {
    return false;
  }
  std::memcpy(decoded.bytes, reinterpret_cast<const void*>(rip), sizeof decoded.bytes);
  decoded.length = sizeof decoded.bytes;
  if (!decode_bytes(decoded.bytes, sizeof decoded.bytes, decoded)) return false;
  decoded.length = decoded.instruction.length;
  return true;
}

bool operand_address(const CpuContext& cpu, const Decoded& decoded, const ZydisDecodedOperand& operand,
                     std::uintptr_t& address) noexcept {
  if (operand.type != ZYDIS_OPERAND_TYPE_MEMORY || decoded.instruction.address_width != 64) return false;
  const ZydisDecodedOperandMem& mem = operand.mem;
  std::uint64_t value = static_cast<std::uint64_t>(mem.disp.value);
  if (mem.base == ZYDIS_REGISTER_RIP) {
    value += cpu.rip() + decoded.instruction.length;
  } else if (mem.base != ZYDIS_REGISTER_NONE) {
    std::uint64_t base = 0;
    if (!cpu.gpr_get(mem.base, base)) return false;
    value += base;
  }
  if (mem.index != ZYDIS_REGISTER_NONE) {
    std::uint64_t index = 0;
    if (!cpu.gpr_get(mem.index, index)) return false;  // VSIB (vector index) is not covered
    value += index * mem.scale;
  }
  std::uint64_t segment = 0;
  if (!segment_base(mem.segment, segment)) return false;
  address = static_cast<std::uintptr_t>(value + segment);
  return true;
}

}  // namespace rpcie::mmio
