// One open file of the tree (what FUSE's file handle points at): created by open, deleted by
// release. A request holds its OpenFile only while FUSE runs it, except a parked `events`
// read, which the file's release answers first.
#pragma once

#include <fuse_lowlevel.h>

#include <cstdint>
#include <memory>

#include "events.hpp"
#include "inode.hpp"

namespace rpcie::hostd {

struct OpenFile {
  std::shared_ptr<Node> node;
  unsigned id = 0;
  bool writable = false;  // opened for writing: close waits for the writes to be performed
  // The device's generation at open: device files of an older one fail with EIO for good.
  std::uint64_t generation = 0;
  // events files, under Events' lock:
  EventsCursor cursor;
  fuse_pollhandle* ph = nullptr;
  std::uint16_t vector() const { return static_cast<std::uint16_t>(id - kEvents); }
};

}  // namespace rpcie::hostd
