#include "stale_state.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <dirent.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "dev_links.hpp"
#include "dma_window.hpp"
#include "inode.hpp"
#include "mount.hpp"
#include "rpcie/log.hpp"

namespace rpcie::hostd {

namespace {

// rpcieN links are looked for below this N: a hostd gives each device the lowest free N.
constexpr unsigned kLinksSearched = 256;

// Removes the link at `path` if it points into `mount`.
void link_remove_if_ours(const std::string& path, const std::string& mount) {
  char target[4096];
  ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  if (n <= 0) return;
  target[n] = 0;
  if (std::string(target).rfind(mount + "/", 0) == 0) ::unlink(path.c_str());
}

}  // namespace

Result<void> stale_state_remove(const StalePlaces& at) {
  RPCIE_TRY(mounts_stale_remove(at.mount));
  links_stale_remove(at.mount, at.dev_dir);
  windows_stale_remove(at.shm_dir);
  return {};
}

// A dead daemon's mount fails statfs (ENOTCONN, ECONNABORTED); a live one answers. statfs,
// not stat: the kernel answers stat of the root from cached attributes without asking the
// daemon.
Result<void> mounts_stale_remove(const std::string& path) {
  for (int i = 0; i < 16 && mountinfo_find(path).fstype == "fuse.rpcie"; ++i) {
    struct statfs sf;
    if (::statfs(path.c_str(), &sf) == 0) return fail(EBUSY, path + " is served by a running rpcie-hostd");
    RPCIE_LOG_WARN("hostd", "{}: a stale mount of an earlier hostd ({}); detaching it", path, std::strerror(errno));
    if (::umount2(path.c_str(), MNT_DETACH) != 0) return fail(errno, "unmount stale " + path);
  }
  return {};
}

void links_stale_remove(const std::string& mount, const std::string& dev_dir) {
  for (unsigned i = 0; i < kLinksSearched; ++i) link_remove_if_ours(dev_link_path(dev_dir, device_name(i)), mount);
  const std::string by = dev_dir + "/" + kByExportDir;
  DIR* hosts = ::opendir(by.c_str());
  if (!hosts) return;
  while (auto* h = ::readdir(hosts)) {
    if (h->d_name[0] == '.') continue;
    const std::string hd = by + "/" + h->d_name;
    if (auto* exports = ::opendir(hd.c_str())) {
      while (auto* e = ::readdir(exports))
        if (e->d_name[0] != '.') link_remove_if_ours(hd + "/" + e->d_name, mount);
      ::closedir(exports);
    }
    ::rmdir(hd.c_str());  // only when empty
  }
  ::closedir(hosts);
}

void windows_stale_remove(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (auto* e = ::readdir(d)) {
    const auto pid = window_file_pid(e->d_name);
    if (!pid) continue;
    const bool ours = *pid == ::getpid();
    if (!ours && (::kill(*pid, 0) == 0 || errno != ESRCH)) continue;
    const std::string path = dir + "/" + e->d_name;
    RPCIE_LOG_INFO("hostd", "removing {} (its hostd is gone)", path);
    ::unlink(path.c_str());
  }
  ::closedir(d);
}

}  // namespace rpcie::hostd
