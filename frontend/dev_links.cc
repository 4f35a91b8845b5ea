#include "dev_links.hpp"

#include <cerrno>

#include <unistd.h>

#include "mount.hpp"
#include "rpcie/process.hpp"

namespace rpcie::hostd {

std::string dev_link_path(const std::string& dev_dir, const std::string& name) { return dev_dir + "/" + name; }

Result<std::vector<std::string>> dev_links_create(const std::string& dev_dir, const std::string& name,
                                                  const AttachParams& p, const std::string& target) {
  const std::string host_dir =
      dev_dir + "/" + kByExportDir + "/" + p.host + (p.port == kDefaultPort ? "" : ":" + std::to_string(p.port));
  RPCIE_TRY(dirs_make(host_dir, 0755));
  std::vector<std::string> made;
  for (const auto& link : {dev_link_path(dev_dir, name), host_dir + "/" + p.export_name}) {
    ::unlink(link.c_str());
    if (::symlink(target.c_str(), link.c_str()) != 0) {
      const int e = errno;
      for (const auto& m : made) ::unlink(m.c_str());
      return fail(e, "symlink " + link);
    }
    made.push_back(link);
  }
  return made;
}

void dev_links_remove(const std::vector<std::string>& links) {
  for (const auto& link : links) ::unlink(link.c_str());
  const std::string host_dir = links.size() > 1 ? links[1].substr(0, links[1].rfind('/')) : "";
  if (!host_dir.empty()) ::rmdir(host_dir.c_str());  // only when empty
}

}  // namespace rpcie::hostd
