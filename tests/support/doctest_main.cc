// doctest's main, plus the skips of tests/support/skip.hpp: exit 77 with the reasons when
// every case that ran passed but some could not check anything here (1 under CI=true).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "skip.hpp"

namespace {

std::mutex g_lock;
std::vector<std::string> g_skips;

}  // namespace

void rpcie::test::skip(const std::string& reason) {
  std::lock_guard g(g_lock);
  g_skips.push_back(reason);
}

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit() || rc != 0) return rc;
  std::lock_guard g(g_lock);
  if (g_skips.empty()) return 0;
  const char* ci = std::getenv("CI");
  const bool under_ci = ci != nullptr && std::string(ci) == "true";
  for (const auto& why : g_skips)
    std::fprintf(stderr, "%s: %s\n", under_ci ? "FAIL: would skip under CI=true" : "SKIP", why.c_str());
  return under_ci ? 1 : 77;
}
