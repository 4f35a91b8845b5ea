// Process-wide conventions every rpcie program shares: signals, the stop flag of daemons,
// host names and the default port with HOST[:PORT] parsing. No transport here.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "rpcie/result.hpp"

namespace rpcie {

// Ignore SIGPIPE process-wide. Every rpcie program calls it first thing.
void signals_init() noexcept;

// Long-running tools: SIGINT, SIGTERM and SIGHUP set the flag that stop_requested()
// returns (SIGHUP, the terminal going away, ends a tool cleanly too).
void stop_signals_install() noexcept;
const std::atomic<bool>& stop_requested() noexcept;

// Daemons: SIGINT and SIGTERM set the stop flag; SIGHUP sets the reload flag instead, which
// the daemon's serving loop takes (exchange(false)) and answers by reloading its
// configuration. Async-signal-safe handlers; the flags are process-wide.
void daemon_signals_install() noexcept;
std::atomic<bool>& reload_requested() noexcept;

inline constexpr std::uint16_t kDefaultPort = 7385;

// "HOST", "HOST:PORT", "[V6]:PORT" -> host and port (default_port when absent).
Result<std::pair<std::string, std::uint16_t>> address_parse(std::string_view text, std::uint16_t default_port);

// The host name of this machine (gethostname), for same-host detection and default client
// names.
std::string host_name();

}  // namespace rpcie
