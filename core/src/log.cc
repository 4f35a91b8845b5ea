#include "rpcie/log.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace rpcie {
namespace {

LogLevel level_initial() noexcept {
  LogLevel l = LogLevel::warn;
  if (const char* env = std::getenv("RPCIE_LOG")) log_level_parse(env, &l);
  return l;
}

std::atomic<int>& level_storage() noexcept {
  static std::atomic<int> level{static_cast<int>(level_initial())};
  return level;
}

}  // namespace

LogLevel log_level() noexcept { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }
void log_level_set(LogLevel level) noexcept { level_storage().store(static_cast<int>(level)); }

bool log_level_parse(std::string_view text, LogLevel* out) noexcept {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"error", LogLevel::error}, {"warn", LogLevel::warn}, {"info", LogLevel::info}, {"debug", LogLevel::debug}};
  for (auto [name, level] : kNames) {
    if (text == name) {
      *out = level;
      return true;
    }
  }
  return false;
}

void log_write(LogLevel level, std::string_view subsystem, std::string_view text) noexcept {
  static constexpr const char* kTags[] = {"error", "warn", "info", "debug"};
  try {
    std::string line = fmt::format("rpcie[{}] {}: {}: {}\n", getpid(), subsystem, kTags[static_cast<int>(level)], text);
    ssize_t rc = ::write(STDERR_FILENO, line.data(), line.size());
    (void)rc;  // nowhere to report a failed log write
  } catch (...) {
    // Formatting or allocation failed: drop the line rather than throw out of a logger.
  }
}

}  // namespace rpcie
