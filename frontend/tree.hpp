// The FUSE file system of rpcie-hostd: every attached device as a directory in the layout
// of Linux sysfs (<mount>/pci/devices/<DDDDD:BB:DD.F>/), so that pciutils and UIO-style
// drivers work unchanged. docs/rpcie-hostd.md describes each file.
//
// Requests are answered from FUSE worker threads, except reads of `events`, which are
// parked without a thread and answered when an interrupt arrives, the link is lost, the
// device is detached or the reader is interrupted (EINTR). lookup, getattr, readdir and
// open never touch the fabric. Every request that does is bounded twice: the operation's
// own deadline (a little under --timeout) and a watchdog that answers EIO to any such
// request older than the timeout, whatever the fabric does.
//
// Thread-safety: all members may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

class RemoteDevice;
struct TreeImpl;

struct TreeOptions {
  std::string mount = "/run/rpcie";
  std::string dev_dir = "/dev";  // where rpcieN and rpcie/by-export/ links go
  std::chrono::milliseconds timeout{5000};
  gid_t group = 0;
  mode_t mode = 0660;  // device files (config, resourceN, events) and the DMA window
  // Memory-BAR writes spliced from FUSE into the staging buffer (where a pipe holds a
  // request): one copy fewer per write, a splice and a read instead of one read per request.
  bool splice_writes = true;
};

class Tree {
 public:
  // Mounts at options.mount (created if missing). What an earlier hostd left there and in
  // dev_dir must be gone first (stale_state_remove).
  static Result<std::unique_ptr<Tree>> mount(const TreeOptions& options);
  ~Tree();  // answers what is parked, unmounts, removes the links

  // Serves requests until a stop signal (SIGINT/SIGTERM). Returns 0 or
  // the negative errno of the FUSE loop. Call from the main thread, with the stop signals
  // blocked in every thread since start-up: run() unblocks them for itself and the FUSE
  // workers only.
  int run();

  // Publishes an attached device: visible at once, with its /dev links. Its name rpcieN
  // is the device's index.
  struct Published {
    std::string name, path, sysfs;
  };
  Result<Published> publish(std::shared_ptr<RemoteDevice> device);
  // Removes it: the tree and links are gone (the kernel told) before this returns; parked
  // requests are answered ENODEV. Then detaches. ENOENT if there is no such device.
  Result<void> withdraw(const std::string& name, Deadline deadline);
  std::vector<std::string> names() const;
  // Lowest N for which rpcieN is free, reserved until index_release (withdraw releases it).
  unsigned index_reserve();
  // Reserves rpcieN itself (an attachment the state file restores); false when it is taken.
  bool index_reserve_at(unsigned index);
  void index_release(unsigned index);

  struct DeviceView {
    std::string name, path, sysfs;
    std::shared_ptr<RemoteDevice> device;
  };
  std::vector<DeviceView> devices() const;

 private:
  explicit Tree(const TreeOptions& options);
  std::unique_ptr<TreeImpl> impl_;
};

}  // namespace rpcie::hostd
