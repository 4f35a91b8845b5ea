// How the integration test tools (rpcie-devcheck, rpcie-doorbellcheck) report a check:
// CHECK_THAT prints "FAIL: FILE:LINE: CONDITION: message" and counts the failure in
// check_failures, which the tool's exit status reports (1 when any). Single-threaded tools.
#pragma once

#include <cstdio>

namespace rpcie::testing {

// Failed checks so far in this process.
inline int check_failures = 0;

}  // namespace rpcie::testing

#define CHECK_THAT(cond, ...)                                      \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::printf("FAIL: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                    \
      std::printf("\n");                                           \
      std::fflush(stdout);                                         \
      ++::rpcie::testing::check_failures;                          \
    }                                                              \
  } while (0)
