// The kubelet's pod resources API (podresources.proto, v1 List): which device IDs of one
// resource the node's containers hold now. Served on
// /var/lib/kubelet/pod-resources/kubelet.sock. Errors: UNAVAILABLE from gRPC as ECONNREFUSED,
// DEADLINE_EXCEEDED as ETIMEDOUT, anything else EIO (the message has gRPC's).
// Thread-safety: no state.
#pragma once

#include <set>
#include <string>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie::k8s {

inline constexpr const char* kDefaultPodResources = "/var/lib/kubelet/pod-resources/kubelet.sock";

Result<std::set<std::string>> pod_devices_in_use(const std::string& socket, const std::string& resource_name,
                                                 Deadline deadline);

}  // namespace rpcie::k8s
