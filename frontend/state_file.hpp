// The state file: the attachments this hostd holds (and those it is still restoring), so that
// a hostd started again — after SIGKILL, a crash or a stop — re-attaches each of them under
// its old name rpcieN. It lives under /run (--state-file, default kStateFileDefault): it is
// meant to survive a restart of the daemon, not a reboot.
//
// Format (JSON, one object; docs/rpcie-hostd.md, STATE FILE):
//   {"version":1,"attachments":[{"device":"rpcie0","uid":0,"host":"10.0.0.1","port":7385,
//     "export":"edu0","dma_window":16777216,"data_path":"sealed"}, ...]}
// `data_path` is absent when the attach asked for none. Nothing secret is in it: the key is
// hostd's own (--psk-file). Each entry is checked by the rules of an attach request
// (attach_request_parse), so a file cannot ask for more than the control socket could.
//
// Writing is atomic: the whole file goes to FILE.tmp (mode 0600), is flushed (fsync) and
// renamed over FILE; a reader sees the old list or the new one, never a mix.
// Thread-safety: free functions without shared state; callers serialise their stores.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "remote_device.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

struct AttachPolicy;

inline constexpr const char* kStateFileDefault = "/run/rpcie-hostd-state.json";
inline constexpr unsigned kStateIndexMax = 4095;  // rpcie0..rpcie4095: far more than one host attaches

struct StateEntry {
  unsigned index = 0;  // N of rpcieN
  uid_t uid = 0;       // who attached it (attach_owners.hpp)
  AttachParams params;
};

// N of a device name "rpcieN" (decimal, no leading zeros but "rpcie0", at most
// kStateIndexMax); nullopt for anything else.
std::optional<unsigned> device_index_parse(const std::string& name);

// The file's text for `entries` (sorted by index as given).
std::string state_text(const std::vector<StateEntry>& entries);
// Parses a state file's text: EINVAL with what is wrong (not JSON, not version 1, an entry
// that is not an object, a bad "device" or "uid", a field an attach request would refuse
// under `policy`, a device named twice).
Result<std::vector<StateEntry>> state_parse(const std::string& text, const AttachPolicy& policy);

// Reads and parses `path`: no entries when it does not exist; the error names the file.
Result<std::vector<StateEntry>> state_file_load(const std::string& path, const AttachPolicy& policy);
// Replaces `path` with `entries`, atomically (above). The directory must exist.
Result<void> state_file_store(const std::string& path, const std::vector<StateEntry>& entries);

}  // namespace rpcie::hostd
