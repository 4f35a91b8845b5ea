// Registering with the kubelet (deviceplugin.proto, service Registration): the plugin's
// socket, named relative to the device-plugins directory, and its resource name, for API
// version v1beta1. Called once the plugin's own socket serves, and again whenever the
// kubelet restarted (it then removes the plugins' sockets: the plugin serves anew first).
// Errors: the kubelet's refusal (EIO with its message), ECONNREFUSED when no kubelet
// listens, ETIMEDOUT. Thread-safety: no state.
#pragma once

#include <string>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie::k8s {

inline constexpr const char* kApiVersion = "v1beta1";
inline constexpr const char* kDefaultKubeletDir = "/var/lib/kubelet/device-plugins";
inline constexpr const char* kKubeletSocket = "kubelet.sock";

Result<void> kubelet_register(const std::string& kubelet_dir, const std::string& endpoint,
                              const std::string& resource_name, Deadline deadline);

}  // namespace rpcie::k8s
