// rpcie-hostd's configuration file (docs/rpcie-hostd.md, CONFIGURATION FILE): TOML, by default
// /etc/rpcie/hostd.toml and then /etc/rpcie/hostd.d/*.toml in name order (`--config FILE`
// reads FILE alone).
//
// Format:
//   Top-level keys are hostd's long option names (kOptionKeys) with the option's value: a
//   string, or a number where the option takes one (timeout = 2.5, dma-window = 16777216), or
//   a boolean where it is on or off (splice-writes = true),
//   allow-remote an array of strings. A later file's key replaces an earlier file's; the
//   command line overrides every file.
//   [[attach]] tables: host (required), port (default 7385), export (required), dma-window
//   (size text or bytes; default: --dma-window), device ("rpcieN", the name hostd gives it:
//   /dev/rpcieN), data-path ("sealed", "open" or "auto"), owner (uid that owns it, as
//   attach_owners.hpp; default 0, root). Attached at start and retried until they succeed
//   (attach_manager.hpp, configured_apply).
//
// Every error names its place: "FILE:LINE:COLUMN: reason" for bad TOML, "FILE:LINE: key:
// reason" for an unknown key, a wrong type or a bad value; EINVAL either way (ENOENT: a file
// that cannot be read). Two [[attach]] entries for one host, port and export, or one device
// name, are an error that names both places.
// Thread-safety: free functions without shared state.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rpcie/data_path.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

struct AttachPolicy;
struct AttachParams;

inline constexpr const char* kConfigFileDefault = "/etc/rpcie/hostd.toml";
inline constexpr const char* kConfigDirName = "hostd.d";  // beside the default file

// The top-level keys: every long option of rpcie-hostd but --config and --foreground (how
// the daemon is run, not what it does).
inline constexpr std::string_view kOptionKeys[] = {
    "mount",     "control",    "psk-file",       "provider",     "timeout",       "attach-timeout",
    "data-path", "dma-window", "max-dma-window", "allow-remote", "group",         "mode",
    "name",      "dev-dir",    "state-file",     "metrics",      "splice-writes",
};

// One top-level key's value as the option's text (numbers written as the option reads them).
struct OptionSetting {
  std::vector<std::string> values;  // one, but allow-remote's list
  std::string origin;               // "FILE:LINE"
};

// One [[attach]] entry.
struct ConfiguredAttach {
  std::string host;
  std::uint16_t port = 7385;
  std::string export_name;
  std::optional<std::size_t> dma_window;  // bytes; unset: hostd's --dma-window
  std::optional<unsigned> device;         // N of rpcieN
  std::optional<DataPathChoice> data_path;
  uid_t owner = 0;
  std::string origin;  // "FILE:LINE" of its [[attach]] line
  // The same attachment: host (as spelt), port and export.
  bool same_target(const ConfiguredAttach& o) const noexcept {
    return host == o.host && port == o.port && export_name == o.export_name;
  }
};

struct HostdConfig {
  std::map<std::string, OptionSetting> options;  // key -> value
  std::vector<ConfiguredAttach> attaches;        // in file order
  std::vector<std::string> files;                // read, in order
};

// Applies the text of one file, named `path` in messages, to `config` (the fuzz target's way
// in): its keys replace earlier ones, its entries are appended and checked against those
// already there for duplicates.
Result<void> hostd_config_text_apply(std::string_view text, const std::string& path, HostdConfig& config);

// Where hostd's configuration comes from.
struct ConfigSource {
  std::string file;            // read if it exists (required when `file_required`)
  bool file_required = false;  // --config given: a missing file is an error
  std::string dropin_dir;      // its *.toml read in name order after `file`; empty: none
};
// The source for `--config` `given` (empty: not given): the default file and directory, or
// the given file alone.
ConfigSource config_source_of(const std::string& given);
// Reads every file of `source` (above).
Result<HostdConfig> hostd_config_load(const ConfigSource& source);

// An entry's attach parameters under `policy` (the rules of an attach request: its DMA
// window at most --max-dma-window); EINVAL "FILE:LINE: attach: reason" otherwise.
Result<AttachParams> configured_params(const ConfiguredAttach& entry, const AttachPolicy& policy);

// The entries of `configured` whose host (as spelt), port and export are those of none of
// `present` (the attachments held or pending): what a start or a reload attaches.
std::vector<ConfiguredAttach> configured_missing(const std::vector<ConfiguredAttach>& configured,
                                                 const std::vector<AttachParams>& present);

// The [[attach]] table that `entry` is written as by `rpcie attach --persist` (config_edit.hpp).
std::string configured_text(const ConfiguredAttach& entry);

}  // namespace rpcie::hostd
