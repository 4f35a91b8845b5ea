// The links a published device has in the device directory (--dev-dir, default /dev), both to
// its directory in the tree: <dev_dir>/rpcieN, and <dev_dir>/rpcie/by-export/<host>[:port]/
// <export> (the port only when it is not the default). Host and export names come from a
// control-socket request and become path components that root creates: they are checked
// here first (export_name_check, host_name_check), and dev_links_create checks them again.
// Thread-safety: no state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "remote_device.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

inline constexpr const char* kByExportDir = "rpcie/by-export";  // under dev_dir
inline constexpr std::size_t kExportNameMax = 64;               // as rpcie-exportd's export names
inline constexpr std::size_t kHostNameMax = 253;                // a DNS name's longest text form

// An export name as rpcie-exportd accepts one: 1-64 of A-Z a-z 0-9 _ . -, and not "." or
// "..". EINVAL otherwise, with the name (control characters as \xNN) and the rule.
Result<void> export_name_check(std::string_view name);
// A host as an address or a name: an IPv4 literal, an IPv6 literal (an optional %zone of
// A-Z a-z 0-9 _ . -), or a host name of dot-separated labels of 1-63 of A-Z a-z 0-9 _ -
// not beginning or ending with '-', at most 253 bytes. EINVAL otherwise, as above.
Result<void> host_name_check(std::string_view host);

// <dev_dir>/<name>, the link rpcieN.
std::string dev_link_path(const std::string& dev_dir, const std::string& name);
// Creates both links of device `name` attached with `p` to `target`, replacing what is at
// their names (an earlier hostd's leftovers, or the by-export link of an earlier attachment
// of the same export: the newest attachment has it). Returns their paths, the rpcieN link
// first; on error none is left. EINVAL for a host or export name the checks above refuse.
Result<std::vector<std::string>> dev_links_create(const std::string& dev_dir, const std::string& name,
                                                  const AttachParams& p, const std::string& target);
// Removes `links` (as dev_links_create returned them) where they still point at `target`
// (another attachment may have taken the by-export name since), and the host's by-export
// directory once it is empty.
void dev_links_remove(const std::vector<std::string>& links, const std::string& target);

}  // namespace rpcie::hostd
