#include "plugin_service.hpp"

#include <algorithm>
#include <cerrno>

#include "rpcie/log.hpp"

namespace rpcie::k8s {
namespace {

// How often a quiet ListAndWatch stream looks whether the kubelet went away.
constexpr auto kStreamPoll = std::chrono::milliseconds(500);

}  // namespace

v1beta1::ListAndWatchResponse device_list_of(const std::vector<DeviceView>& views) {
  v1beta1::ListAndWatchResponse out;
  for (const auto& v : views) {
    auto* d = out.add_devices();
    d->set_id(v.id);
    d->set_health(v.healthy ? kHealthy : kUnhealthy);
  }
  return out;
}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                         v1beta1::DevicePluginOptions* response) {
  response->set_pre_start_required(false);
  response->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                                               grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  std::uint64_t generation = 0;
  auto views = pool_.snapshot(&generation);
  log(LogLevel::info, kLog, "ListAndWatch: the kubelet watches {} devices", views.size());
  if (!writer->Write(device_list_of(views))) return grpc::Status::OK;
  while (!ctx->IsCancelled() && !pool_.stopped()) {
    if (!pool_.changed_wait(generation, Deadline::after(kStreamPoll))) continue;
    auto now = pool_.snapshot(&generation);
    for (std::size_t i = 0; i < now.size() && i < views.size(); ++i) {  // same devices, same order
      if (now[i].healthy == views[i].healthy) continue;
      if (now[i].healthy)
        log(LogLevel::info, kLog, "ListAndWatch: {} healthy", now[i].id);
      else
        log(LogLevel::info, kLog, "ListAndWatch: {} unhealthy: {}", now[i].id, now[i].why);
    }
    views = std::move(now);
    if (!writer->Write(device_list_of(views))) break;
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::GetPreferredAllocation(grpc::ServerContext*,
                                                         const v1beta1::PreferredAllocationRequest* request,
                                                         v1beta1::PreferredAllocationResponse* response) {
  const auto views = pool_.snapshot();
  for (const auto& c : request->container_requests()) {
    std::vector<std::string> pick(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
    const auto want = static_cast<std::size_t>(std::max(c.allocation_size(), 0));
    auto offered = [&](const std::string& id) {
      return std::find(c.available_deviceids().begin(), c.available_deviceids().end(), id) !=
             c.available_deviceids().end();
    };
    for (int pass = 0; pass < 2; ++pass) {  // first the healthy free devices, then any offered
      for (const auto& v : views) {
        if (pick.size() >= want) break;
        const bool good = v.healthy && !v.holding;
        if ((pass == 0 && !good) || !offered(v.id) || std::find(pick.begin(), pick.end(), v.id) != pick.end()) continue;
        pick.push_back(v.id);
      }
    }
    auto* r = response->add_container_responses();
    for (const auto& id : pick) r->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                                           v1beta1::AllocateResponse* response) {
  for (const auto& c : request->container_requests()) {
    const std::vector<std::string> ids(c.devicesids().begin(), c.devicesids().end());
    log(LogLevel::info, kLog, "Allocate: {} device(s) for a container", ids.size());
    auto held = allocator_.allocate(ids);
    if (!held) {
      const auto code =
          held.error().code == EBUSY ? grpc::StatusCode::FAILED_PRECONDITION : grpc::StatusCode::UNAVAILABLE;
      return grpc::Status(code, held.error().describe());
    }
    auto* r = response->add_container_responses();
    std::string all;
    for (const auto& h : *held) {
      auto* m = r->add_mounts();
      m->set_container_path(h.sysfs);
      m->set_host_path(h.sysfs);
      m->set_read_only(false);
      all += (all.empty() ? "" : ",") + h.sysfs;
    }
    if (!held->empty()) (*r->mutable_envs())["RPCIE_DEVICE"] = held->front().sysfs;
    (*r->mutable_envs())["RPCIE_DEVICES"] = all;
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                                    v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

}  // namespace rpcie::k8s
