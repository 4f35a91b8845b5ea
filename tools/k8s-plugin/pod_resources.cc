#include "pod_resources.hpp"

#include "grpc_util.hpp"
#include "podresources.grpc.pb.h"

namespace rpcie::k8s {

Result<std::set<std::string>> pod_devices_in_use(const std::string& socket, const std::string& resource_name,
                                                 Deadline deadline) {
  auto stub = v1::PodResourcesLister::NewStub(unix_channel(socket));
  grpc::ClientContext ctx;
  context_deadline_set(ctx, deadline);
  v1::ListPodResourcesResponse response;
  const auto status = stub->List(&ctx, v1::ListPodResourcesRequest(), &response);
  if (!status.ok()) return status_fail(status, "pod resources at " + socket);
  std::set<std::string> in_use;
  for (const auto& pod : response.pod_resources())
    for (const auto& container : pod.containers())
      for (const auto& devices : container.devices())
        if (devices.resource_name() == resource_name)
          for (const auto& id : devices.device_ids()) in_use.insert(id);
  return in_use;
}

}  // namespace rpcie::k8s
