// emulation_describe: one line about an emulation, built without stdio (not async-signal-safe).
#include <Zydis/Zydis.h>

#include <cstring>

#include "emulator.hpp"

namespace rpcie::mmio {
namespace {

class Line {
 public:
  Line(char* text, std::size_t size) noexcept : text_(text), size_(size) {}
  Line& add(const char* s) noexcept {
    for (; *s != '\0'; ++s) put(*s);
    return *this;
  }
  Line& hex(std::uint64_t value, unsigned min_digits = 1) noexcept {
    char digits[16];
    unsigned n = 0;
    do {
      digits[n++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0 || n < min_digits);
    while (n > 0) put(digits[--n]);
    return *this;
  }
  std::size_t finish() noexcept {
    if (size_ > 0) text_[length_ < size_ ? length_ : size_ - 1] = '\0';
    return length_ < size_ ? length_ : (size_ > 0 ? size_ - 1 : 0);
  }

 private:
  void put(char c) noexcept {
    if (length_ + 1 < size_) text_[length_] = c;
    ++length_;
  }
  char* text_;
  std::size_t size_;
  std::size_t length_ = 0;
};

const char* mnemonic_name(const Emulation& e) noexcept {
  ZydisDecoder decoder;
  ZydisDecodedInstruction instruction;
  if (!ZYAN_SUCCESS(ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)) ||
      !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoder, nullptr, e.bytes, e.length, &instruction))) {
    return "undecodable";
  }
  const char* name = ZydisMnemonicGetString(instruction.mnemonic);
  return name != nullptr ? name : "unknown";
}

void instruction_add(Line& line, const Emulation& e) noexcept {
  line.add("0x").hex(e.rip).add(":");
  for (unsigned i = 0; i < e.length; ++i) line.add(" ").hex(e.bytes[i], 2);
  line.add(" (").add(mnemonic_name(e)).add(")");
}

}  // namespace

std::size_t emulation_describe(const Emulation& emulation, char* text, std::size_t size) noexcept {
  Line line(text, size);
  switch (emulation.kind) {
    case Emulation::Kind::done:
      instruction_add(line.add("emulated instruction at "), emulation);
      break;
    case Emulation::Kind::not_trapped:
      line.add("fault at 0x").hex(emulation.address).add(" is not on a trapped BAR mapping (instruction at 0x");
      line.hex(emulation.rip).add(")");
      break;
    case Emulation::Kind::unsupported:
      instruction_add(line.add("unsupported instruction at "), emulation);
      line.add(" touching 0x").hex(emulation.address);
      break;
    case Emulation::Kind::access_failed:
      line.add("failed BAR access at 0x").hex(emulation.address).add(" by instruction at ");
      instruction_add(line, emulation);
      break;
  }
  return line.finish();
}

}  // namespace rpcie::mmio
