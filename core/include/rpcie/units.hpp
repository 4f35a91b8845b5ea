// Parsing of sizes and durations as operators write them on command lines and in config
// files. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rpcie {

// "64K", "4M", "1G", "123", also "KiB"/"MiB"/"GiB" -> bytes. nullopt if malformed, zero or
// overflowing.
std::optional<std::uint64_t> size_parse(std::string_view text);

// "0", "250us", "10ms", "1.5s", "2m" -> duration. A bare number is seconds. nullopt if
// malformed, negative or over a day.
std::optional<std::chrono::nanoseconds> duration_parse(std::string_view text);

}  // namespace rpcie
