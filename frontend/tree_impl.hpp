// The tree's state, shared by its front (tree.cc) and the FUSE operations (fuse_ops.cc), and
// private to those two: nothing else includes this header.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <memory>
#include <string>

#include "events.hpp"
#include "inode.hpp"
#include "mount.hpp"
#include "tree.hpp"
#include "watchdog.hpp"

namespace rpcie::hostd {

// Attributes and entries may be cached this long (seconds); withdraw tells the kernel at once
// anyway.
inline constexpr double kAttrTimeout = 1.0;

struct TreeImpl {
  explicit TreeImpl(const TreeOptions& options);

  const TreeOptions opt;
  NodeTable nodes;
  Events events;
  Watchdog watchdog;                // answers EIO
  std::unique_ptr<FuseMount> fuse;  // null until mounted

  std::string sysfs_path(const Node& n) const { return opt.mount + "/pci/devices/" + n.bdf; }
  // False if `ino` names nothing (now).
  bool attr_fill(fuse_ino_t ino, struct stat* st) const;
  // lookup's answer for `ino`: its entry, or ENOENT.
  void entry_reply(fuse_req_t req, fuse_ino_t ino) const;
};

// The operations the session is made with; their userdata is the TreeImpl.
const fuse_lowlevel_ops& fuse_ops_table();

}  // namespace rpcie::hostd
