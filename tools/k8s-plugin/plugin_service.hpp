// The DevicePlugin service (deviceplugin.proto) of rpcie-k8s-plugin, as the kubelet calls it:
//  - GetDevicePluginOptions: GetPreferredAllocation available, no PreStartContainer.
//  - ListAndWatch: the pool's devices with their health at once, then the whole list again
//    each time a health changes, until the kubelet hangs up or the plugin stops.
//  - GetPreferredAllocation: the must-include devices, then healthy devices the plugin does
//    not hold, then the rest, in pool order.
//  - Allocate: per container, attaches its devices (allocator.hpp) and answers, per device,
//    a mount of its directory (the same path inside the container, read-write) and the
//    environment RPCIE_DEVICE=<first device's directory>, RPCIE_DEVICES=<all, comma
//    separated>. A failed attach fails the call (UNAVAILABLE; FAILED_PRECONDITION when the
//    export is held elsewhere) and the device is reported unhealthy.
//  - PreStartContainer: nothing to do.
// Thread-safety: gRPC calls the methods from its threads at once; the state is the Pool's.
#pragma once

#include "allocator.hpp"
#include "deviceplugin.grpc.pb.h"
#include "pool.hpp"

namespace rpcie::k8s {

inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(Pool& pool, Allocator& allocator) : pool_(pool), allocator_(allocator) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* ctx, const v1beta1::Empty* request,
                                      v1beta1::DevicePluginOptions* response) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty* request,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status Allocate(grpc::ServerContext* ctx, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(grpc::ServerContext* ctx, const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse* response) override;

 private:
  Pool& pool_;
  Allocator& allocator_;
};

// The ListAndWatch message of `views`.
v1beta1::ListAndWatchResponse device_list_of(const std::vector<DeviceView>& views);

}  // namespace rpcie::k8s
