// The links a published device has in the device directory (--dev-dir, default /dev), both to
// its directory in the tree: <dev_dir>/rpcieN, and <dev_dir>/rpcie/by-export/<host>[:port]/
// <export> (the port only when it is not the default). Thread-safety: no state.
#pragma once

#include <string>
#include <vector>

#include "remote_device.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

inline constexpr const char* kByExportDir = "rpcie/by-export";  // under dev_dir

// <dev_dir>/<name>, the link rpcieN.
std::string dev_link_path(const std::string& dev_dir, const std::string& name);
// Creates both links of device `name` attached with `p` to `target`, replacing what an earlier
// hostd left at their names (the names are free in this one). Returns their paths, the rpcieN
// link first; on error none is left.
Result<std::vector<std::string>> dev_links_create(const std::string& dev_dir, const std::string& name,
                                                  const AttachParams& p, const std::string& target);
// Removes `links` (as dev_links_create returned them) and the host's by-export directory once
// it is empty.
void dev_links_remove(const std::vector<std::string>& links);

}  // namespace rpcie::hostd
