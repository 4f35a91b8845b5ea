#include "common.hpp"

#include <sched.h>
#include <signal.h>

#include <charconv>

#include "rpcie/log.hpp"

namespace rpcie::tools {

std::atomic<bool> g_stop{false};

std::optional<std::size_t> size_parse(std::string_view text) {
  std::size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "GiB") shift = 30;
  else if (!suffix.empty()) return std::nullopt;
  if (value == 0 || value > (SIZE_MAX >> shift)) return std::nullopt;
  return value << shift;
}

void stop_signals_install() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop.store(true); };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool cpu_pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    RPCIE_LOG_WARN("tools", "cannot pin to cpu {}", cpu);
    return false;
  }
  return true;
}

}  // namespace rpcie::tools
