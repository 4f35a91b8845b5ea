// rpcie-exportd configuration: the TOML file and the command-line flags that are its
// equivalent (docs/rpcie-exportd.md documents both).
//
// File format (every key optional; unknown keys are errors):
//   listen   = "ADDR[:PORT]"        default 0.0.0.0:7385
//   provider = "auto|tcp|shm|verbs|efa|tcp;ofi_rxm|verbs;ofi_rxm"
//   psk-file = "/etc/rpcie/psk"     key accepted from any client name
//   lease    = "5s"                 heartbeats must arrive within this
//   handshake-timeout = "5s"        an attach's set-up (fabric session, first message) within this
//   access-log = "/var/log/rpcie/access.log"   one line per MMIO access (access_log.hpp)
//   data-path = "sealed|open|auto"  the exports' data-path policy (rpcie/data_path.hpp);
//                                   default auto: what the client asks for
//   [[client]]  name = "NAME"  psk-file = "FILE"       a named client with its own key
//   [[export]]  name, backend, dma = "on-demand|mirror", shared = bool,
//               allow = ["client", ...], data-path = "sealed|open|auto" (overrides the
//               top level's), [export.params] key = "value" ...
// Flags: --export NAME=BACKEND[,key=value...] adds exports (keys dma, shared=yes|no,
// allow=NAME[:NAME...] and data-path are the exporter's; the rest go to the backend);
// --listen, --provider, --psk-file, --access-log, --data-path override the file.
//
// Loading only parses and checks; keys are read and backends created by the exporter.
//
// Every setting remembers where it came from (its `origin`: "FILE:LINE" of the file, or
// the flag, "--export"), so that every error about it, here or when the exporter starts,
// names that place.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "rpcie/data_path.hpp"
#include "rpcie/providers/provider.hpp"
#include "rpcie/result.hpp"

namespace rpcie::dev {

enum class DmaMode { on_demand, mirror };

struct ExportConfig {
  ExportSpec spec;  // backend parameters only (exporter keys removed)
  DmaMode dma = DmaMode::on_demand;
  bool shared = false;
  std::vector<std::string> allow;         // client names; empty: every authenticated client
  std::vector<std::string> allow_origin;  // where each allow entry was given (same order)
  // Its data-path policy; unset: the exporter's (ExporterConfig::data_path).
  std::optional<DataPathChoice> data_path;
  std::string origin = "--export";  // where the export was defined
};

struct ClientConfig {
  std::string name;
  std::string psk_file;
  std::string origin = "[[client]]";  // "FILE:LINE" of its [[client]] table
};

struct ExporterConfig {
  std::string listen_host = "0.0.0.0";
  std::uint16_t port = 7385;
  providers::ProviderChoice provider;  // automatic unless set
  std::string psk_file;                // "" unless set (main() applies the default path)
  std::vector<ClientConfig> clients;
  std::vector<ExportConfig> exports;
  std::chrono::milliseconds lease{5000};
  // Each step of an attach (the claim, the reply, the fabric session and its first message,
  // the verdict), a resume, and each request of an authenticated connection not yet attached
  // (a frame begun must be whole by then) within this; the client has its own timeout
  // besides. Authentication itself has preauth_timeout.
  std::chrono::milliseconds handshake_timeout{5000};
  std::string access_log;  // "" : no access log
  // The data-path policy of every export that sets none (data_path_decide): automatic lets
  // the client choose (its provider's default unless it says).
  DataPathChoice data_path = DataPathChoice::automatic;
  // Pre-authentication connections (exporter.hpp): at most this many per source address,
  // at most `preauth_max` in all; each must authenticate within `preauth_timeout`.
  std::uint32_t preauth_per_address = 4;
  std::uint32_t preauth_max = 512;
  std::chrono::milliseconds preauth_timeout{1000};
  // The nice value of the data threads (rpcie/thread_sched.hpp), nullopt: the daemon's own.
  std::optional<int> data_nice;
  // Where psk-file, listen and access-log came from: "FILE:LINE", the flag, or the default.
  std::string psk_file_origin = "--psk-file";
  std::string listen_origin = "--listen";
  std::string access_log_origin = "--access-log";
};

// Applies the TOML file at `path` to `config`. EINVAL with "FILE:LINE:COL: reason" for a
// syntax error, "FILE:LINE: key: reason" for a bad value or an unknown key (LINE of the
// value, or of the table that lacks a key); ENOENT when the file cannot be read.
Result<void> config_file_apply(const std::string& path, ExporterConfig& config);
// The same for the text of such a file, named `path` in messages (the fuzz target's way in).
Result<void> config_text_apply(std::string_view text, const std::string& path, ExporterConfig& config);

// "NAME=BACKEND[,key=value...]" with the exporter's own keys split off.
Result<ExportConfig> export_config_parse(std::string_view text);

// Whether `a` and `b` configure the same export: every setting alike, the places they were
// given (origins) aside. A reload keeps such an export as it runs.
bool export_config_same(const ExportConfig& a, const ExportConfig& b) noexcept;

// The data-path policy `e` runs under: its own, else the exporter's.
DataPathChoice export_data_path_policy(const ExporterConfig& config, const ExportConfig& e) noexcept;

// Checks the whole configuration: distinct export and client names, valid client names in
// allow lists and [[client]], at least one export, and every name of an allow list with a
// [[client]] entry of its own (an allow list names clients; the shared key is accepted under
// any name without one, so without that entry every holder of the shared key could use
// the name). Errors start with the origin of the offending entry ("FILE:LINE: ").
Result<void> config_check(const ExporterConfig& config);

}  // namespace rpcie::dev
