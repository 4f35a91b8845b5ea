// Log text escaping (a peer's bytes cannot start a forged line) and the rate limiter for
// events a peer can cause at will.
#include <chrono>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "rpcie/log.hpp"

using namespace std::chrono_literals;

TEST_CASE("log_escape writes control characters and backslashes as escapes") {
  CHECK(rpcie::log_escape("plain name-1.x") == "plain name-1.x");
  CHECK(rpcie::log_escape("a\nrpcie[1] exportd: info: forged") == "a\\x0arpcie[1] exportd: info: forged");
  CHECK(rpcie::log_escape(std::string("\r\t\x1b\x7f", 4)) == "\\x0d\\x09\\x1b\\x7f");
  CHECK(rpcie::log_escape(std::string("nul\0end", 7)) == "nul\\x00end");
  // A backslash is escaped too, so "\x0a" in a name cannot pass for an escaped newline.
  CHECK(rpcie::log_escape("a\\x0a") == "a\\\\x0a");
  CHECK(rpcie::log_escape("caf\xc3\xa9") == "caf\xc3\xa9");
}

TEST_CASE("LogLimiter admits a burst per interval and counts the rest") {
  rpcie::LogLimiter limiter(3, 200ms);
  int admitted = 0;
  for (int i = 0; i < 1000; ++i) admitted += limiter.admit().admitted ? 1 : 0;
  CHECK(admitted == 3);
  std::this_thread::sleep_for(250ms);
  const auto next = limiter.admit();
  CHECK(next.admitted);
  CHECK(next.suppressed == 997);
  CHECK(limiter.admit().suppressed == 0);
}

TEST_CASE("RPCIE_LOG_LIMITED compiles with and without arguments and admits through its limiter") {
  rpcie::LogLimiter limiter(1, 1h);
  RPCIE_LOG_LIMITED(limiter, rpcie::LogLevel::debug, "test", "no arguments");
  RPCIE_LOG_LIMITED(limiter, rpcie::LogLevel::debug, "test", "frame from {} dropped", "10.0.0.1");
  const auto third = limiter.admit();
  CHECK_FALSE(third.admitted);
}
