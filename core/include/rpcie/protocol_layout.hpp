// How a wire message declares itself (protocol.hpp declares every message this way).
//
// Each message is declared once, as a struct, and the codec's reader, writer, sizer and
// validator all walk that declaration (core/src/wire_codec.hpp):
//   kType, kName            its type number and its name (protocol.hpp checks both unique);
//   fields(m, f)            calls f("name", m.member[, layout]) for each field, in wire order;
//   valid(m) (optional)     a rule that spans fields (alignment, overflow, distinct BARs).
// Entries of a message (a region, an export, a BAR) declare fields() and valid() the same
// way, without kType and kName.
//
// A member's C++ type gives its wire form: an integer or enum is its width, little-endian
// (an enum by its underlying type, an int32 as its two's complement u32); a struct with
// fields() is its fields inline. The optional layout says the rest: how variable-length
// members are counted and capped, and which values a scalar may take.
//
// Header-only, constexpr, no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <variant>

namespace rpcie::proto::wire {

// Bytes (std::string_view, std::span) or entries (std::vector of a struct with fields())
// after a little-endian count of type Count, Min..Max of them. A count outside Min..Max is
// refused as soon as it is read, before anything is reserved for it.
template <class Count, std::size_t Min, std::size_t Max>
struct Len {
  static_assert(std::is_unsigned_v<Count> && Min <= Max && Max <= std::numeric_limits<Count>::max());
  using CountType = Count;
  static constexpr std::size_t kMin = Min;
  static constexpr std::size_t kMax = Max;
};
// Exactly N bytes, no count on the wire.
template <std::size_t N>
struct Fixed {
  static constexpr std::size_t kSize = N;
};
// The rest of the payload, no count on the wire, at most Max bytes. Last field only.
template <std::size_t Max>
struct Rest {
  static constexpr std::size_t kMax = Max;
};
// An integer in Min..Max.
template <std::int64_t Min, std::uint64_t Max>
struct Range {
  static constexpr std::int64_t kMin = Min;
  static constexpr std::uint64_t kMax = Max;
};
// Flag bits: none outside Known.
template <std::uint64_t Known>
struct Flags {
  static constexpr std::uint64_t kKnown = Known;
};
// An enum (or integer) that is one of the values listed.
template <auto... Values>
struct OneOf {};

// `value` fits in `width` bytes (config_write, mmio_write).
constexpr bool value_fits(std::uint64_t value, unsigned width) noexcept {
  return width >= 8 || value >> (8 * width) == 0;
}
// `offset + length` does not wrap.
constexpr bool range_fits(std::uint64_t offset, std::uint64_t length) noexcept { return offset + length >= offset; }

// Whether the messages of the variant V (alternatives with kType and kName) each have their
// own type number and their own name.
template <class V>
struct MessageList;
template <class... M>
struct MessageList<std::variant<M...>> {
  static constexpr bool unique() noexcept {
    constexpr std::common_type_t<decltype(M::kType)...> types[] = {M::kType...};
    constexpr std::string_view names[] = {M::kName...};
    for (std::size_t i = 0; i < sizeof...(M); ++i)
      for (std::size_t j = i + 1; j < sizeof...(M); ++j)
        if (types[i] == types[j] || names[i] == names[j]) return false;
    return true;
  }
};
template <class V>
inline constexpr bool kMessagesUnique = MessageList<V>::unique();

}  // namespace rpcie::proto::wire
