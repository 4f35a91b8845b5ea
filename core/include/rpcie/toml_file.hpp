// Reading rpcie's TOML configuration files (rpcie-exportd's, rpcie-hostd's) with errors that
// name the place: "FILE:LINE:COLUMN: reason" for a syntax error, "FILE:LINE: reason" for a
// value (toml++ keeps each node's source region). toml++ throws on bad TOML; the exceptions
// stay inside these functions and come out as EINVAL errors.
// Header-only: its users depend on tomlplusplus (toml_dep), core itself does not.
// Thread-safety: no state.
#pragma once

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "rpcie/result.hpp"

namespace rpcie::toml_file {

// "FILE:LINE: " of a node of the file `path`.
inline std::string at(const std::string& path, const toml::node& n) {
  return path + ":" + std::to_string(n.source().begin.line) + ": ";
}

// "FILE:LINE" of a node (an origin to remember, without the separator).
inline std::string origin(const std::string& path, const toml::node& n) {
  return path + ":" + std::to_string(n.source().begin.line);
}

inline Error parse_error_of(const toml::parse_error& e, const std::string& path) {
  const auto& where = e.source().begin;
  return Error{ErrorDomain::posix, EINVAL,
               path + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": " +
                   std::string(e.description())};
}

// The file at `path` parsed: ENOENT when it cannot be opened, EINVAL for bad TOML.
inline Result<toml::table> file_load(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (e.description().find("File could not be opened") != std::string_view::npos)
      return fail(ENOENT, path + ": cannot open the config file");
    return tl::unexpected(parse_error_of(e, path));
  }
}

// `text` parsed as the file `path` (named in messages): EINVAL for bad TOML.
inline Result<toml::table> text_load(std::string_view text, const std::string& path) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return tl::unexpected(parse_error_of(e, path));
  }
}

// EINVAL "FILE:LINE: <what>unknown key 'K'" for the first key of `t` not among `known`.
template <class... Known>
Result<void> keys_check(const toml::table& t, const std::string& path, const std::string& what, Known... known) {
  for (auto&& [k, v] : t) {
    const std::string_view key = k.str();
    if (((key != known) && ...)) return fail(EINVAL, at(path, v) + what + "unknown key '" + std::string(key) + "'");
  }
  return {};
}

// A string node's value; EINVAL "<where>must be a string" otherwise.
inline Result<std::string> string_get(const toml::node& n, const std::string& where) {
  if (auto s = n.value_exact<std::string>()) return *s;
  return fail(EINVAL, where + "must be a string");
}

}  // namespace rpcie::toml_file
