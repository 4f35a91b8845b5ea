// rpcie logging: one logger per subsystem, to stderr.
//
// Levels: error, warn, info, debug. The threshold comes from $RPCIE_LOG (error|warn|info|
// debug, default warn for libraries and tests, programs raise it with log_level_set()).
// Hot paths must not log per I/O at info level; use RPCIE_LOG_ONCE for conditions that may
// repeat, and a LogLimiter for conditions a peer can cause at will (bad MACs, forged
// messages): a hostile peer must not be able to fill the log. Thread-safe: each line is
// written with a single write(2).
//
// Control characters (below 0x20, and 0x7f) in a line's text are written as \xNN, so text
// that came from a peer (a client name, an error message) cannot start a forged line.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace rpcie {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

LogLevel log_level() noexcept;
void log_level_set(LogLevel level) noexcept;
// Parses "error", "warn", "info", "debug"; false if unknown.
bool log_level_parse(std::string_view text, LogLevel* out) noexcept;
void log_write(LogLevel level, std::string_view subsystem, std::string_view text) noexcept;
// `text` with every control character (< 0x20, 0x7f) written as \xNN and a backslash as
// \\: what log_write() prints.
std::string log_escape(std::string_view text);

// Admits at most `burst` lines per `interval` for one kind of event; the rest are counted.
// The first line admitted after some were refused reports how many were (`suppressed()`).
// Thread-safe (a mutex: callers are on error paths, not hot ones).
class LogLimiter {
 public:
  explicit LogLimiter(std::uint32_t burst = 5, std::chrono::milliseconds interval = std::chrono::seconds(10)) noexcept
      : burst_(burst), interval_(interval) {}
  struct Admission {
    bool admitted = false;
    std::uint64_t suppressed = 0;  // lines refused since the last admitted one
  };
  // Counts one event and says whether to log it.
  Admission admit() noexcept;

 private:
  std::mutex lock_;
  std::uint32_t burst_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point window_start_{};
  std::uint32_t in_window_ = 0;
  std::uint64_t suppressed_ = 0;
};

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
// Logs through `limiter` (a LogLimiter): at most its burst per interval, then a count of
// the lines left out, appended as " (N similar lines suppressed)".
#define RPCIE_LOG_LIMITED(limiter, level, sub, fmt_text, ...)                                          \
  do {                                                                                                 \
    const auto rpcie_admission = (limiter).admit();                                                    \
    if (rpcie_admission.admitted) {                                                                    \
      if (rpcie_admission.suppressed == 0)                                                             \
        ::rpcie::log(level, sub, fmt_text __VA_OPT__(, ) __VA_ARGS__);                                 \
      else                                                                                             \
        ::rpcie::log(level, sub, fmt_text " ({} similar lines suppressed)" __VA_OPT__(, ) __VA_ARGS__, \
                     rpcie_admission.suppressed);                                                      \
    }                                                                                                  \
  } while (0)
// Logs the first occurrence at this call site only.
#define RPCIE_LOG_ONCE(level, sub, ...)                                           \
  do {                                                                            \
    static std::atomic<bool> rpcie_logged_once{false};                            \
    if (!rpcie_logged_once.exchange(true)) ::rpcie::log(level, sub, __VA_ARGS__); \
  } while (0)
