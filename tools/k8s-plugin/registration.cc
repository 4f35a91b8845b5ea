#include "registration.hpp"

#include "deviceplugin.grpc.pb.h"
#include "grpc_util.hpp"

namespace rpcie::k8s {

Result<void> kubelet_register(const std::string& kubelet_dir, const std::string& endpoint,
                              const std::string& resource_name, Deadline deadline) {
  const std::string socket = kubelet_dir + "/" + kKubeletSocket;
  auto stub = v1beta1::Registration::NewStub(unix_channel(socket));
  grpc::ClientContext ctx;
  context_deadline_set(ctx, deadline);
  ctx.set_wait_for_ready(false);
  v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(endpoint);
  request.set_resource_name(resource_name);
  request.mutable_options()->set_pre_start_required(false);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty response;
  const auto status = stub->Register(&ctx, request, &response);
  if (!status.ok()) return status_fail(status, "registration with the kubelet at " + socket);
  return {};
}

}  // namespace rpcie::k8s
