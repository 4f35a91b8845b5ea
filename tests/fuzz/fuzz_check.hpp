// What the fuzz targets share: an invariant check that aborts with a line scripts/fuzz
// reports ("NAME: invariant violated: WHAT").
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace rpcie::fuzz {

[[noreturn]] inline void die(const char* target, const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "%s: invariant violated: %s%s%s\n", target, what, detail.empty() ? "" : " -- ", detail.c_str());
  std::abort();
}

}  // namespace rpcie::fuzz
