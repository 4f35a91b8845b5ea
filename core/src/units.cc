#include "rpcie/units.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>

namespace rpcie {

std::optional<std::uint64_t> size_parse(std::string_view text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "GiB")
    shift = 30;
  else if (!suffix.empty())
    return std::nullopt;
  if (value == 0 || value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::optional<std::chrono::nanoseconds> duration_parse(std::string_view text) {
  // std::from_chars for double is in libstdc++ 11+, so the number is parsed exactly as
  // written (no locale, no leading whitespace or '+').
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || !std::isfinite(value) || value < 0) return std::nullopt;
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  double ns_per_unit = 0;
  if (unit.empty() || unit == "s")
    ns_per_unit = 1e9;
  else if (unit == "ms")
    ns_per_unit = 1e6;
  else if (unit == "us")
    ns_per_unit = 1e3;
  else if (unit == "ns")
    ns_per_unit = 1;
  else if (unit == "m" || unit == "min")
    ns_per_unit = 60e9;
  else
    return std::nullopt;
  const double ns = value * ns_per_unit;
  if (ns > 86400e9) return std::nullopt;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(ns)));
}

}  // namespace rpcie
