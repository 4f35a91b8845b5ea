// rpcie logging: one logger per subsystem, to stderr.
//
// Levels: error, warn, info, debug. The threshold comes from $RPCIE_LOG (error|warn|info|
// debug, default warn for libraries and tests, programs raise it with log_level_set()).
// Hot paths must not log per I/O at info level; use RPCIE_LOG_ONCE for conditions that may
// repeat. Thread-safe: each line is written with a single write(2).
#pragma once

#include <atomic>
#include <string_view>

#include <fmt/format.h>

namespace rpcie {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

LogLevel log_level() noexcept;
void log_level_set(LogLevel level) noexcept;
// Parses "error", "warn", "info", "debug"; false if unknown.
bool log_level_parse(std::string_view text, LogLevel* out) noexcept;
void log_write(LogLevel level, std::string_view subsystem, std::string_view text) noexcept;

template <class... Args>
void log(LogLevel level, std::string_view subsystem, fmt::format_string<Args...> f, Args&&... args) {
  if (level > log_level()) return;
  log_write(level, subsystem, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace rpcie

#define RPCIE_LOG_ERROR(sub, ...) ::rpcie::log(::rpcie::LogLevel::error, sub, __VA_ARGS__)
#define RPCIE_LOG_WARN(sub, ...) ::rpcie::log(::rpcie::LogLevel::warn, sub, __VA_ARGS__)
#define RPCIE_LOG_INFO(sub, ...) ::rpcie::log(::rpcie::LogLevel::info, sub, __VA_ARGS__)
#define RPCIE_LOG_DEBUG(sub, ...) ::rpcie::log(::rpcie::LogLevel::debug, sub, __VA_ARGS__)
// Logs the first occurrence at this call site only.
#define RPCIE_LOG_ONCE(level, sub, ...)                                           \
  do {                                                                            \
    static std::atomic<bool> rpcie_logged_once{false};                            \
    if (!rpcie_logged_once.exchange(true)) ::rpcie::log(level, sub, __VA_ARGS__); \
  } while (0)
