#include "cpu_context.hpp"

#include <cpuid.h>
#include <signal.h>

#include <atomic>
#include <cstring>

namespace rpcie::mmio {
namespace {

// gregs index of each 64-bit general register, in Zydis's id order (RAX, RCX, RDX, RBX,
// RSP, RBP, RSI, RDI, R8..R15).
constexpr int kGregOfId[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                               REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

// XSAVE layout (Intel SDM vol. 1, 13.4): the legacy FXSAVE region holds xmm0-15 at 160; the
// kernel's software bytes (struct _fpx_sw_bytes) sit at 464; the XSAVE header's XSTATE_BV
// at 512. State components: 1 SSE, 2 AVX (upper halves of ymm0-15), 5 opmask,
// 6 ZMM_Hi256 (upper halves of zmm0-15), 7 Hi16_ZMM (zmm16-31).
constexpr unsigned kLegacyXmm = 160;
constexpr unsigned kSwBytes = 464;
constexpr unsigned kXstateBv = 512;
enum Component : unsigned { kSse = 1, kAvx = 2, kOpmask = 5, kZmmHi256 = 6, kHi16Zmm = 7 };

struct Slot {
  unsigned offset = 0;  // in the XSAVE area
  unsigned size = 0;    // of the component
};

constinit std::atomic<std::uint32_t> g_component_slots[8] = {};

Slot component_slot(unsigned component) noexcept {
  if (component == kSse) return {kLegacyXmm, 256};
  std::uint32_t packed = g_component_slots[component].load(std::memory_order_relaxed);
  if (packed == 0) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(0xd, component, &eax, &ebx, &ecx, &edx) == 0) return {};
    packed = (ebx << 16) | (eax & 0xffff);
    g_component_slots[component].store(packed, std::memory_order_relaxed);
  }
  return {packed >> 16, packed & 0xffff};
}

std::uint64_t u64_at(const std::uint8_t* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The frame's XSAVE area as bytes, and whether a component's storage is in it.
struct XsaveArea {
  std::uint8_t* base;

  bool extended() const noexcept {
    std::uint32_t magic;
    std::memcpy(&magic, base + kSwBytes, sizeof magic);
    return magic == FP_XSTATE_MAGIC1;
  }
  // Where component `c` lives, or null when the frame has no room for it.
  std::uint8_t* storage(unsigned c) const noexcept {
    if (c == kSse) return base + kLegacyXmm;
    if (!extended()) return nullptr;
    const std::uint64_t features = u64_at(base + kSwBytes + 8);
    std::uint32_t xstate_size;
    std::memcpy(&xstate_size, base + kSwBytes + 16, sizeof xstate_size);
    const Slot slot = component_slot(c);
    if ((features >> c & 1) == 0 || slot.size == 0 || slot.offset + slot.size > xstate_size) return nullptr;
    return base + slot.offset;
  }
  // Non-init state: a clear XSTATE_BV bit means the component reads as zeros.
  bool in_use(unsigned c) const noexcept { return !extended() || (u64_at(base + kXstateBv) >> c & 1) != 0; }
  void use(unsigned c) const noexcept {
    if (!extended() || in_use(c)) return;
    std::memset(storage(c), 0, c == kSse ? 256 : component_slot(c).size);
    const std::uint64_t bv = u64_at(base + kXstateBv) | (std::uint64_t{1} << c);
    std::memcpy(base + kXstateBv, &bv, sizeof bv);
  }

  void read(unsigned c, unsigned at, unsigned length, std::uint8_t* out) const noexcept {
    std::uint8_t* s = storage(c);
    if (s == nullptr || !in_use(c)) {
      std::memset(out, 0, length);
      return;
    }
    std::memcpy(out, s + at, length);
  }
  // Writing zeros into an absent or unused component changes nothing; anything else needs it.
  bool write(unsigned c, unsigned at, unsigned length, const std::uint8_t* in) const noexcept {
    bool zeros = true;
    for (unsigned i = 0; i < length; ++i) zeros = zeros && in[i] == 0;
    std::uint8_t* s = storage(c);
    if (s == nullptr || !in_use(c)) {
      if (zeros) return true;
      if (s == nullptr) return false;
      use(c);
    }
    std::memcpy(s + at, in, length);
    return true;
  }
};

// The pieces of zmm `index`: (component, offset in it, bytes of the register, length).
struct Piece {
  unsigned component, at, from, length;
};
unsigned vector_pieces(unsigned index, Piece (&pieces)[3]) noexcept {
  if (index >= 16) {
    pieces[0] = {kHi16Zmm, 64 * (index - 16), 0, 64};
    return 1;
  }
  pieces[0] = {kSse, 16 * index, 0, 16};
  pieces[1] = {kAvx, 16 * index, 16, 16};
  pieces[2] = {kZmmHi256, 32 * index, 32, 32};
  return 3;
}

bool vector_index(ZydisRegister reg, unsigned& index) noexcept {
  const ZydisRegisterClass c = ZydisRegisterGetClass(reg);
  if (c != ZYDIS_REGCLASS_XMM && c != ZYDIS_REGCLASS_YMM && c != ZYDIS_REGCLASS_ZMM) return false;
  index = static_cast<unsigned>(ZydisRegisterGetId(reg));
  return index < 32;
}

}  // namespace

std::uint64_t CpuContext::rip() const noexcept {
  return static_cast<std::uint64_t>(context_.uc_mcontext.gregs[REG_RIP]);
}
void CpuContext::rip_set(std::uint64_t rip) noexcept { context_.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(rip); }
std::uint64_t CpuContext::flags() const noexcept {
  return static_cast<std::uint64_t>(context_.uc_mcontext.gregs[REG_EFL]);
}
void CpuContext::flags_set(std::uint64_t flags, std::uint64_t mask) noexcept {
  const std::uint64_t merged = (this->flags() & ~mask) | (flags & mask);
  context_.uc_mcontext.gregs[REG_EFL] = static_cast<greg_t>(merged);
}

bool CpuContext::gpr_get(ZydisRegister reg, std::uint64_t& value) const noexcept {
  const ZydisRegister full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
  if (ZydisRegisterGetClass(full) != ZYDIS_REGCLASS_GPR64) return false;
  const auto whole = static_cast<std::uint64_t>(context_.uc_mcontext.gregs[kGregOfId[ZydisRegisterGetId(full)]]);
  const unsigned width = ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, reg);
  if (reg >= ZYDIS_REGISTER_AH && reg <= ZYDIS_REGISTER_BH) {
    value = (whole >> 8) & 0xff;
  } else {
    value = width == 64 ? whole : whole & ((std::uint64_t{1} << width) - 1);
  }
  return true;
}

bool CpuContext::gpr_set(ZydisRegister reg, std::uint64_t value) noexcept {
  const ZydisRegister full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
  if (ZydisRegisterGetClass(full) != ZYDIS_REGCLASS_GPR64) return false;
  greg_t& slot = context_.uc_mcontext.gregs[kGregOfId[ZydisRegisterGetId(full)]];
  auto whole = static_cast<std::uint64_t>(slot);
  const unsigned width = ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, reg);
  if (reg >= ZYDIS_REGISTER_AH && reg <= ZYDIS_REGISTER_BH) {
    whole = (whole & ~std::uint64_t{0xff00}) | ((value & 0xff) << 8);
  } else if (width == 64 || width == 32) {
    whole = width == 64 ? value : value & 0xffffffffu;
  } else {
    const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
    whole = (whole & ~mask) | (value & mask);
  }
  slot = static_cast<greg_t>(whole);
  return true;
}

bool CpuContext::vector_get(ZydisRegister reg, VectorValue& value) const noexcept {
  unsigned index = 0;
  if (!vector_index(reg, index) || context_.uc_mcontext.fpregs == nullptr) return false;
  const XsaveArea area{reinterpret_cast<std::uint8_t*>(context_.uc_mcontext.fpregs)};
  Piece pieces[3];
  const unsigned n = vector_pieces(index, pieces);
  for (unsigned i = 0; i < n; ++i)
    area.read(pieces[i].component, pieces[i].at, pieces[i].length, value.bytes + pieces[i].from);
  return true;
}

bool CpuContext::vector_set(ZydisRegister reg, const VectorValue& value, unsigned count, unsigned zero_to) noexcept {
  VectorValue merged;
  if (!vector_get(reg, merged)) return false;
  for (unsigned i = 0; i < kVectorBytes; ++i) {
    if (i < count) {
      merged.bytes[i] = value.bytes[i];
    } else if (i < zero_to) {
      merged.bytes[i] = 0;
    }
  }
  unsigned index = 0;
  vector_index(reg, index);
  const XsaveArea area{reinterpret_cast<std::uint8_t*>(context_.uc_mcontext.fpregs)};
  Piece pieces[3];
  const unsigned n = vector_pieces(index, pieces);
  for (unsigned i = 0; i < n; ++i) {
    if (!area.write(pieces[i].component, pieces[i].at, pieces[i].length, merged.bytes + pieces[i].from)) return false;
  }
  return true;
}

bool CpuContext::opmask_get(ZydisRegister reg, std::uint64_t& value) const noexcept {
  if (ZydisRegisterGetClass(reg) != ZYDIS_REGCLASS_MASK || context_.uc_mcontext.fpregs == nullptr) return false;
  const XsaveArea area{reinterpret_cast<std::uint8_t*>(context_.uc_mcontext.fpregs)};
  std::uint8_t bytes[8];
  area.read(kOpmask, 8 * static_cast<unsigned>(ZydisRegisterGetId(reg)), 8, bytes);
  value = u64_at(bytes);
  return true;
}

bool CpuContext::opmask_set(ZydisRegister reg, std::uint64_t value) noexcept {
  if (ZydisRegisterGetClass(reg) != ZYDIS_REGCLASS_MASK || context_.uc_mcontext.fpregs == nullptr) return false;
  const XsaveArea area{reinterpret_cast<std::uint8_t*>(context_.uc_mcontext.fpregs)};
  std::uint8_t bytes[8];
  std::memcpy(bytes, &value, sizeof bytes);
  return area.write(kOpmask, 8 * static_cast<unsigned>(ZydisRegisterGetId(reg)), 8, bytes);
}

}  // namespace rpcie::mmio
