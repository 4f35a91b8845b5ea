// The codec's machinery: a bounds-checked reader, a writer, and the four walkers over a
// message's declaration in protocol.hpp (fields() and the optional valid()): size, write,
// read and check. Every message goes through these; none has code of its own.
//
// Internal to core (protocol.cc); header-only templates, no state, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "rpcie/protocol.hpp"

namespace rpcie::proto::wire {

// Bounds-checked little-endian reader over a span. Once a read fails, every later read
// fails too (and yields 0 or an empty view), so a decoder can read a whole payload and
// check ok() once.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> b) : bytes_(b) {}

  template <class T>
  T uint() {
    static_assert(std::is_unsigned_v<T>);
    if (!take(sizeof(T))) return 0;
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<T>(static_cast<T>(bytes_[pos_ - sizeof(T) + i]) << (8 * i));
    return v;
  }
  std::span<const std::uint8_t> blob(std::size_t n) {
    if (!take(n)) return {};
    return bytes_.subspan(pos_ - n, n);
  }
  std::span<const std::uint8_t> rest() { return blob(bytes_.size() - pos_); }

  // Makes every later read fail (a field broke a rule that must stop the walk).
  void fail() { ok_ = false; }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  bool take(std::size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// Writer into a buffer already checked to be large enough.
class Writer {
 public:
  explicit Writer(std::uint8_t* p) : p_(p) {}
  template <class T>
  void uint(T v) {
    static_assert(std::is_unsigned_v<T>);
    for (std::size_t i = 0; i < sizeof(T); ++i) *p_++ = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void blob(std::span<const std::uint8_t> b) {
    if (!b.empty()) std::memcpy(p_, b.data(), b.size());
    p_ += b.size();
  }

 private:
  std::uint8_t* p_;
};

// --- What a field is -------------------------------------------------------------------

struct Plain {};  // a field declared without a layout

struct FieldProbe {
  template <class... A>
  void operator()(const char*, A&&...) const {}
};
// A struct that declares its fields (a message or an entry of one).
template <class T>
concept Record = requires(T& m, FieldProbe f) {
  T::fields(m, f);
};

// An integer or an enum: fixed width, little-endian, as this unsigned type.
template <class T>
concept Scalar = std::is_integral_v<T> || std::is_enum_v<T>;
template <class T>
struct WireOf {
  using type = std::make_unsigned_t<T>;
};
template <class T>
requires std::is_enum_v<T>
struct WireOf<T> {
  using type = std::make_unsigned_t<std::underlying_type_t<T>>;
};
template <class T>
using Wire = typename WireOf<T>::type;

// Opaque bytes or text: a view into the message buffer.
template <class T>
concept Bytes = std::is_same_v<T, std::span<const std::uint8_t>> || std::is_same_v<T, std::string_view>;

template <class T>
struct IsList : std::false_type {};
template <class E>
struct IsList<std::vector<E>> : std::true_type {};
template <class T>
concept List = IsList<T>::value && Record<typename T::value_type>;

template <class T>
std::span<const std::uint8_t> bytes_of(const T& v) {
  return {reinterpret_cast<const std::uint8_t*>(v.data()), v.size()};
}
template <class T>
T view_of(std::span<const std::uint8_t> b) {
  if constexpr (std::is_same_v<T, std::string_view>)
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  else
    return b;
}

template <class L>
struct IsLen : std::false_type {};
template <class C, std::size_t Min, std::size_t Max>
struct IsLen<Len<C, Min, Max>> : std::true_type {};
template <class L>
struct IsFixed : std::false_type {};
template <std::size_t N>
struct IsFixed<Fixed<N>> : std::true_type {};
template <class L>
struct IsRest : std::false_type {};
template <std::size_t Max>
struct IsRest<Rest<Max>> : std::true_type {};

// Each layout goes with one kind of member (a mismatch does not compile).
template <class T, class L>
constexpr bool layout_fits() {
  if constexpr (Scalar<T>) return !(IsLen<L>::value || IsFixed<L>::value || IsRest<L>::value);
  if constexpr (Bytes<T>) return IsLen<L>::value || IsFixed<L>::value || IsRest<L>::value;
  if constexpr (List<T>) return IsLen<L>::value;
  if constexpr (Record<T>) return std::is_same_v<L, Plain>;
  return false;
}

// --- Size ------------------------------------------------------------------------------

template <Record R>
std::size_t record_size(const R& m) noexcept;

struct Sizer {
  std::size_t n = 0;
  template <class T, class L = Plain>
  void operator()(const char*, const T& v, L = {}) noexcept {
    static_assert(layout_fits<T, L>(), "this layout does not fit this member");
    if constexpr (Scalar<T>) {
      n += sizeof(T);
    } else if constexpr (Record<T>) {
      n += record_size(v);
    } else {
      if constexpr (IsLen<L>::value) n += sizeof(typename L::CountType);
      if constexpr (Bytes<T>) n += v.size();
      if constexpr (List<T>)
        for (const auto& e : v) n += record_size(e);
    }
  }
};
// Encoded size of `m`'s fields.
template <Record R>
std::size_t record_size(const R& m) noexcept {
  Sizer s;
  R::fields(m, s);
  return s.n;
}

// --- Write -----------------------------------------------------------------------------

// Writes `m`'s fields; `m` has passed check() and the buffer holds record_size(m) bytes.
struct Put {
  Writer& w;
  template <class T, class L = Plain>
  void operator()(const char*, const T& v, L = {}) const {
    if constexpr (Scalar<T>) {
      w.uint(static_cast<Wire<T>>(v));
    } else if constexpr (Record<T>) {
      T::fields(v, *this);
    } else {
      if constexpr (IsLen<L>::value) w.uint(static_cast<typename L::CountType>(v.size()));
      if constexpr (Bytes<T>) w.blob(bytes_of(v));
      if constexpr (List<T>)
        for (const auto& e : v) T::value_type::fields(e, *this);
    }
  }
};

// --- Read ------------------------------------------------------------------------------

// A count read off the wire outside its Len bounds.
struct CountFault {
  const char* field = nullptr;
  std::uint64_t count = 0;
  std::size_t min = 0;
  std::size_t max = 0;
  bool entries = false;  // a list (else bytes)
};

// Reads fields in order. A count outside its bounds is refused as soon as it is read,
// before anything is reserved for it: that stops the walk (the reader fails) and `fault`
// says which. Otherwise the caller checks r.ok() (truncation) and then check().
struct Get {
  Reader& r;
  CountFault fault;

  template <class T, class L = Plain>
  void operator()(const char* name, T& v, L = {}) {
    if constexpr (Scalar<T>) {
      v = static_cast<T>(r.uint<Wire<T>>());
    } else if constexpr (Record<T>) {
      T::fields(v, *this);
    } else if constexpr (IsFixed<L>::value) {
      v = view_of<T>(r.blob(L::kSize));
    } else if constexpr (IsRest<L>::value) {
      v = view_of<T>(r.rest());
    } else {
      const std::size_t n = r.uint<typename L::CountType>();
      if (!r.ok()) return;
      if (n < L::kMin || n > L::kMax) {
        fault = {name, n, L::kMin, L::kMax, List<T>};
        r.fail();
        return;
      }
      if constexpr (Bytes<T>) {
        v = view_of<T>(r.blob(n));
      } else {
        v.reserve(n);  // bounded by L::kMax above, never by the peer
        for (std::size_t i = 0; i < n && r.ok(); ++i) {
          typename T::value_type e;
          T::value_type::fields(e, *this);
          v.push_back(std::move(e));
        }
      }
    }
  }
};

// --- Check -----------------------------------------------------------------------------

// Where a message breaks its declaration.
struct Fault {
  static constexpr std::size_t kWhole = SIZE_MAX;
  const char* field = nullptr;  // the field out of its layout or range; null: the message's rule
  std::size_t index = kWhole;   // the entry, for a list field
};

template <Record R>
bool record_valid(const R& m) noexcept;

template <class T, std::int64_t Min, std::uint64_t Max>
constexpr bool value_in(const T& v, Range<Min, Max>) noexcept {
  if constexpr (std::is_enum_v<T>)
    return value_in(static_cast<Wire<T>>(v), Range<Min, Max>{});
  else
    return std::cmp_less_equal(Min, v) && std::cmp_less_equal(v, Max);
}
template <class T, std::uint64_t Known>
constexpr bool value_in(const T& v, Flags<Known>) noexcept {
  return (static_cast<std::uint64_t>(static_cast<Wire<T>>(v)) & ~Known) == 0;
}
template <class T, auto... Values>
constexpr bool value_in(const T& v, OneOf<Values...>) noexcept {
  return ((v == Values) || ...);
}
template <class T>
constexpr bool value_in(const T&, Plain) noexcept {
  return true;
}

// Walks the fields of one record; stops at the first fault.
struct Check {
  std::optional<Fault> fault;

  template <class T, class L = Plain>
  void operator()(const char* name, const T& v, L layout = {}) noexcept {
    if (fault) return;
    if constexpr (Scalar<T>) {
      if (!value_in(v, layout)) fault = Fault{name};
    } else if constexpr (Record<T>) {
      if (!record_valid(v)) fault = Fault{name};
    } else if constexpr (IsFixed<L>::value) {
      if (v.size() != L::kSize) fault = Fault{name};
    } else if constexpr (IsRest<L>::value) {
      if (v.size() > L::kMax) fault = Fault{name};
    } else {
      if (v.size() < L::kMin || v.size() > L::kMax) {
        fault = Fault{name};
        return;
      }
      if constexpr (List<T>)
        for (std::size_t i = 0; i < v.size(); ++i)
          if (!record_valid(v[i])) {
            fault = Fault{name, i};
            return;
          }
    }
  }
};

// The first place where `m` breaks its declaration (layouts and ranges of its fields, then
// its own rule), or nullopt when the encoder may send it and the decoder accept it.
template <Record R>
std::optional<Fault> check(const R& m) noexcept {
  Check c;
  R::fields(m, c);
  if (c.fault) return c.fault;
  if constexpr (requires { R::valid(m); })
    if (!R::valid(m)) return Fault{};
  return std::nullopt;
}
template <Record R>
bool record_valid(const R& m) noexcept {
  return !check(m).has_value();
}

}  // namespace rpcie::proto::wire
