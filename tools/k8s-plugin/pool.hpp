// The plugin's table of the pool's devices: the health it advertises and which devices it
// holds (attached through hostd for a container). ListAndWatch streams reads it; Allocate and
// the check loop (allocator.hpp) change it. Every change of what the kubelet sees (a health)
// raises the generation and wakes the streams.
// Thread-safety: every member may be called from any thread (one mutex inside).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "rpcie/deadline.hpp"

namespace rpcie::k8s {

// Our attachment of a device, for a container.
struct Holding {
  std::string hostd_device;  // rpcieN
  std::string sysfs;         // the device directory
  std::chrono::steady_clock::time_point since;
};

struct DeviceView {
  std::string id;
  bool healthy = false;
  std::string why;                 // why unhealthy
  std::optional<Holding> holding;  // set while the plugin holds it
};

class Pool {
 public:
  // Every device starts unhealthy ("not checked yet") and not held.
  explicit Pool(std::vector<PoolDevice> devices);

  const std::vector<PoolDevice>& devices() const noexcept { return devices_; }
  const PoolDevice* device_find(const std::string& id) const noexcept;

  // What the kubelet is to see, and its generation.
  std::vector<DeviceView> snapshot(std::uint64_t* generation = nullptr) const;
  std::optional<DeviceView> view(const std::string& id) const;

  // Sets a device's health; a change raises the generation and wakes changed_wait().
  void health_set(const std::string& id, bool healthy, const std::string& why);
  void holding_set(const std::string& id, std::optional<Holding> holding);

  // Until the generation is past `seen`, stop() was called, or `deadline`: true on a change.
  bool changed_wait(std::uint64_t seen, Deadline deadline) const;
  // Wakes every changed_wait() for good (the server is shutting down).
  void stop();
  bool stopped() const;

 private:
  std::vector<PoolDevice> devices_;
  mutable std::mutex lock_;
  mutable std::condition_variable changed_;
  std::vector<DeviceView> views_;  // same order as devices_
  std::uint64_t generation_ = 1;
  bool stopped_ = false;
};

}  // namespace rpcie::k8s
