// What an earlier rpcie-hostd that ended without cleaning up (killed, crashed) left behind,
// found and removed at start-up before anything is made: its FUSE mount, its links in the
// device directory and its DMA window files. What a running hostd uses is never touched.
// (The control socket's stale file is the control server's: only a bind tells it apart.)
// Thread-safety: no state; not to be run beside a hostd starting at the same places.
#pragma once

#include <string>

#include "rpcie/result.hpp"

namespace rpcie::hostd {

struct StalePlaces {
  std::string mount;    // the tree's mount point
  std::string dev_dir;  // where the rpcieN and by-export links go
  std::string shm_dir;  // where the DMA window files are
};

// All of the below, mounts first: EBUSY (and nothing else is touched) if a running hostd
// serves `mount`.
Result<void> stale_state_remove(const StalePlaces& at);

// Mounts of an earlier hostd at `path` (possibly stacked): a dead daemon's mount is detached;
// a live one is EBUSY.
Result<void> mounts_stale_remove(const std::string& path);
// Links in `dev_dir` (rpcieN, by-export/*/*) that point into `mount`, and by-export host
// directories left empty.
void links_stale_remove(const std::string& mount, const std::string& dev_dir);
// Window files in `dir` whose hostd is gone. Files with this process's pid are stale too:
// it has made no window yet, and a hostd restarted under the same pid (a container's pid 1)
// would otherwise find its window names taken (EEXIST).
void windows_stale_remove(const std::string& dir);

}  // namespace rpcie::hostd
