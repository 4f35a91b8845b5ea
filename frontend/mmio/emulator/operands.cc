// Integer operand access shared by the handlers (exec.hpp).
#include "exec.hpp"

namespace rpcie::mmio {

Step integer_read(Exec& exec, const ZydisDecodedOperand& operand, std::uint64_t& value) noexcept {
  const unsigned bytes = operand_bytes(operand);
  if (bytes == 0 || bytes > 8) return Step::unsupported;
  switch (operand.type) {
    case ZYDIS_OPERAND_TYPE_REGISTER:
      return exec.cpu.gpr_get(operand.reg.value, value) ? Step::done : Step::unsupported;
    case ZYDIS_OPERAND_TYPE_IMMEDIATE:
      value = operand.imm.value.u & width_mask(bytes);
      return Step::done;
    case ZYDIS_OPERAND_TYPE_MEMORY: {
      std::uintptr_t address = 0;
      if (!operand_address(exec.cpu, exec.decoded, operand, address)) return Step::unsupported;
      std::uint8_t raw[8];
      if (!exec.bus.load(address, bytes, raw)) return Step::failed;
      value = bytes_value(raw, bytes);
      return Step::done;
    }
    default:
      return Step::unsupported;
  }
}

Step integer_write(Exec& exec, const ZydisDecodedOperand& operand, std::uint64_t value) noexcept {
  const unsigned bytes = operand_bytes(operand);
  if (bytes == 0 || bytes > 8) return Step::unsupported;
  if (operand.type == ZYDIS_OPERAND_TYPE_REGISTER) {
    return exec.cpu.gpr_set(operand.reg.value, value) ? Step::done : Step::unsupported;
  }
  if (operand.type != ZYDIS_OPERAND_TYPE_MEMORY) return Step::unsupported;
  std::uintptr_t address = 0;
  if (!operand_address(exec.cpu, exec.decoded, operand, address)) return Step::unsupported;
  std::uint8_t raw[8];
  value_bytes(value, bytes, raw);
  return exec.bus.store(address, bytes, raw) ? Step::done : Step::failed;
}

}  // namespace rpcie::mmio
