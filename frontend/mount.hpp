// The FUSE mount of the tree: the session, the mount itself and the loop that serves it, and
// what the kernel's side of the mount needs (read-ahead). Stale mounts of an earlier hostd are
// stale_state's.
// Ownership: FuseMount owns the session; its destructor unmounts (the kernel drops what it
// cached of the tree) and destroys the session.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <memory>
#include <string>

#include "rpcie/result.hpp"

namespace rpcie::hostd {

// The topmost mount at `path` in `table` (a mountinfo file): its device ("0:N", the name of
// its bdi) and file system type ("fuse.rpcie" for ours). Empty fields when nothing is mounted.
struct MountInfo {
  std::string dev, fstype;
};
MountInfo mountinfo_find(const std::string& path, const std::string& table = "/proc/self/mountinfo");

// mkdir -p: every missing directory of `path`, with `mode`.
Result<void> dirs_make(const std::string& path, mode_t mode);

class FuseMount {
 public:
  // Creates `path` if missing, and mounts there a FUSE file system answered by `ops`, which
  // get `userdata` (it must outlive the FuseMount).
  static Result<std::unique_ptr<FuseMount>> open(const std::string& path, const fuse_lowlevel_ops& ops, void* userdata);
  ~FuseMount();
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  // Serves requests on worker threads until a stop signal (SIGINT/SIGTERM). Returns 0
  // or the negative errno of the FUSE loop. Call from the main thread, with the stop signals
  // blocked in every thread since start-up: run() unblocks them for itself and the workers
  // (SIGHUP, blocked likewise, stays blocked: the daemon takes it elsewhere).
  int run();
  // For notifications to the kernel (valid until destruction).
  fuse_session* session() const noexcept { return se_; }

 private:
  FuseMount() = default;
  fuse_session* se_ = nullptr;
  bool mounted_ = false;
};

}  // namespace rpcie::hostd
