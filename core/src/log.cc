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

std::string log_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b == '\\') {
      out += "\\\\";
    } else if (b < 0x20 || b == 0x7f) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

LogLimiter::Admission LogLimiter::admit() noexcept {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard held(lock_);
  if (now - window_start_ >= interval_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return {};
  }
  ++in_window_;
  const Admission a{true, suppressed_};
  suppressed_ = 0;
  return a;
}

void log_write(LogLevel level, std::string_view subsystem, std::string_view text) noexcept {
  static constexpr const char* kTags[] = {"error", "warn", "info", "debug"};
  try {
    std::string line =
        fmt::format("rpcie[{}] {}: {}: {}\n", getpid(), subsystem, kTags[static_cast<int>(level)], log_escape(text));
    ssize_t rc = ::write(STDERR_FILENO, line.data(), line.size());
    (void)rc;  // nowhere to report a failed log write
  } catch (...) {
    // Formatting or allocation failed: drop the line rather than throw out of a logger.
  }
}

}  // namespace rpcie
