// What rpcie-k8s-plugin does with the pool (docs/rpcie-k8s-plugin.md, LIFE OF A DEVICE):
//  - allocate(): attaches devices through hostd for a container. A device the plugin already
//    holds is detached first (the kubelet hands a device to one container at a time: a
//    second Allocate means its previous container is gone) and attached afresh. A failed
//    attach marks the device unhealthy (EBUSY: another node holds it) and detaches what this
//    call attached: never half an allocation, never a device two nodes hold.
//  - check(): one round of the periodic checks: held devices are healthy while hostd shows
//    their attachment connected; the others while their exporter says they could be
//    attached (exporter_probe.hpp); held devices that the kubelet's pod resources no longer
//    list (after `release_grace`, the time between Allocate and the container's start)
//    are detached.
//  - adopt(): at start, hostd's attachments of pool devices become held ones (a restarted
//    plugin), to be released by check() when no container has them.
// Thread-safety: allocate() and check() may run at once on different threads; attaches and
// detaches are serialised by one mutex (a check never detaches what an Allocate is attaching).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "hostd_client.hpp"
#include "pool.hpp"
#include "rpcie/client.hpp"
#include "rpcie/result.hpp"

namespace rpcie::k8s {

struct AllocatorOptions {
  std::string control;                              // hostd's control socket
  std::string pod_resources;                        // the kubelet's pod resources socket ("": never release)
  std::string resource_name;                        // rpcie.io/<name>
  std::chrono::milliseconds attach_timeout{30000};  // one attach or detach through hostd
  std::chrono::milliseconds call_timeout{5000};     // status, detach, pod resources, probes
  std::chrono::milliseconds release_grace{30000};
  client::ClientOptions probe;  // to ask exporters (key, client name)
};

class Allocator {
 public:
  Allocator(Pool& pool, AllocatorOptions options) : pool_(pool), o_(std::move(options)) {}

  // The device directories of `ids`, in order, attached for one container.
  Result<std::vector<Holding>> allocate(const std::vector<std::string>& ids);
  void adopt();
  void check();

 private:
  Result<Holding> device_attach(const PoolDevice& d);
  void held_health_update();
  void free_health_update();
  void unused_release();
  void holding_drop(const std::string& id, const Holding& h, const char* why);

  Pool& pool_;
  AllocatorOptions o_;
  std::mutex ops_;  // attaches and detaches, one at a time
};

}  // namespace rpcie::k8s
