#include "scratch.hpp"

#include <fmt/format.h>

#include "rpcie/pci.hpp"

namespace rpcie::dev::membar {

namespace {

using ::rpcie::membar::kScratchBar;
using ::rpcie::membar::kScratchBarSize;

tl::unexpected<Error> refused(const char* what, std::uint64_t offset, unsigned width) {
  return fail(EINVAL, fmt::format("membar: {} of {} bytes at BAR{} 0x{:x}: not a naturally aligned access of width "
                                  "1, 2, 4 or 8 inside the {} bytes of the scratch BAR",
                                  what, width, kScratchBar, offset, kScratchBarSize));
}

}  // namespace

Result<std::uint64_t> Scratch::read(std::uint64_t offset, unsigned width) const {
  if (!pci::access_valid(offset, width, kScratchBarSize)) return refused("read", offset, width);
  std::uint64_t value = 0;
  for (unsigned i = 0; i < width; ++i) value |= std::uint64_t{bytes_[offset + i]} << (8 * i);
  return value;
}

Result<void> Scratch::write(std::uint64_t offset, unsigned width, std::uint64_t value) {
  if (!pci::access_valid(offset, width, kScratchBarSize)) return refused("write", offset, width);
  for (unsigned i = 0; i < width; ++i) bytes_[offset + i] = static_cast<std::uint8_t>(value >> (8 * i));
  return {};
}

}  // namespace rpcie::dev::membar
