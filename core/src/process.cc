#include "rpcie/process.hpp"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <optional>
#include <string>

namespace rpcie {

void signals_init() noexcept { ::signal(SIGPIPE, SIG_IGN); }

namespace {
std::atomic<bool> g_stop{false};
std::atomic<bool> g_reload{false};

void handler_set(int sig, void (*handler)(int)) noexcept {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}
}  // namespace

void stop_signals_install() noexcept {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) handler_set(sig, [](int) { g_stop.store(true); });
}

void daemon_signals_install() noexcept {
  for (int sig : {SIGINT, SIGTERM}) handler_set(sig, [](int) { g_stop.store(true); });
  handler_set(SIGHUP, [](int) { g_reload.store(true); });
}

const std::atomic<bool>& stop_requested() noexcept { return g_stop; }
std::atomic<bool>& reload_requested() noexcept { return g_reload; }

Result<std::pair<std::string, std::uint16_t>> address_parse(std::string_view text, std::uint16_t default_port) {
  auto bad = [&](const char* why) {
    return fail(EINVAL, std::string(why) + " in address '" + std::string(text) + "'");
  };
  std::string_view host = text;
  std::optional<std::string_view> port_text;
  if (!text.empty() && text.front() == '[') {  // [v6] or [v6]:port
    auto close = text.find(']');
    if (close == std::string_view::npos) return bad("unterminated '['");
    host = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("junk after ']'");
      port_text = rest.substr(1);
    }
  } else if (auto colon = text.find(':'); colon != std::string_view::npos && colon == text.rfind(':')) {
    host = text.substr(0, colon);  // host:port (more than one ':' is a bare IPv6 address)
    port_text = text.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  std::uint16_t port = default_port;
  if (port_text) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port_text->data(), port_text->data() + port_text->size(), value);
    if (port_text->empty() || ec != std::errc() || end != port_text->data() + port_text->size() || value > 65535)
      return bad("bad port");
    port = static_cast<std::uint16_t>(value);
  }
  return std::pair{std::string(host), port};
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace rpcie
