// rpcie-k8s-plugin's configuration file (TOML; docs/rpcie-k8s-plugin.md CONFIGURATION): the
// pool of remote devices the plugin advertises as one extended resource, and how to reach
// hostd and the exporters. Errors name the place as hostd's and exportd's do:
// "FILE:LINE:COLUMN: ..." for bad TOML, "FILE:LINE: ..." for a bad key or value.
// Thread-safety: a PluginConfig is a value; parse functions keep no state.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rpcie/result.hpp"

namespace rpcie::k8s {

// The component name on the plugin's log lines.
inline constexpr const char* kLog = "k8s";

inline constexpr const char* kDefaultConfig = "/etc/rpcie/k8s-plugin.toml";
inline constexpr const char* kResourceDomain = "rpcie.io";

// One remote device of the pool: an export of an rpcie-exportd.
struct PoolDevice {
  std::string id;  // the device ID the kubelet sees: 1-63 of A-Z a-z 0-9 _ . - (default: export)
  std::string host;
  std::uint16_t port = 7385;
  std::string export_name;

  std::string exporter() const { return host + ":" + std::to_string(port); }  // as hostd's status spells it
};

struct PluginConfig {
  std::string resource;                            // "edu" -> advertised as rpcie.io/edu
  std::string control;                             // hostd's control socket ("": $RPCIE_CONTROL or /run/rpcie.sock)
  std::string psk_file = "/etc/rpcie/psk";         // to ask exporters who holds their exports
  std::string client_name;                         // the name exporters know that key by ("": host name)
  std::chrono::milliseconds check_interval{5000};  // health probes and the in-use check
  std::chrono::milliseconds release_grace{30000};  // allocated, not yet listed by pod resources
  std::vector<PoolDevice> devices;                 // at least one, ids unique

  std::string resource_name() const { return std::string(kResourceDomain) + "/" + resource; }
};

// The file at `path`: ENOENT when it cannot be opened, EINVAL (message FILE:LINE: ...) when
// it is not a valid configuration.
Result<PluginConfig> config_load(const std::string& path);
// `text` as the file `path` (for tests and messages).
Result<PluginConfig> config_parse(std::string_view text, const std::string& path);

// Whether `name` may be a resource name or a device ID: 1-63 of A-Z a-z 0-9 _ . -, not
// starting with '.' or '-'.
bool name_valid(std::string_view name) noexcept;

}  // namespace rpcie::k8s
