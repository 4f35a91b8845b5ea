// A stub kubelet for tests/integration/k8s_plugin.sh, built from rpcie-k8s-plugin's own
// .proto files (tools/k8s-plugin/): what a kubelet does with a device plugin, recorded in
// files the test reads.
//   k8s-kubelet-stub serve DIR
//     serves Registration on DIR/kubelet.sock and the pod resources API on
//     DIR/pod-resources.sock; a Register request is written to DIR/register.json, then the
//     stub opens the plugin's ListAndWatch (DIR/<endpoint>) and appends each list to
//     DIR/devices.jsonl as {"devices":[{"id":..,"health":..}]}. Pod resources lists one pod
//     whose container holds the device IDs in DIR/in-use (one a line) of the registered
//     resource. Runs until SIGTERM / SIGINT.
//   k8s-kubelet-stub allocate DIR ENDPOINT ID...
//     one Allocate of the IDs for one container; prints the response as JSON
//     ({"envs":{..},"mounts":[{"container_path","host_path","read_only"}]}), exit 0; a
//     failed call: "CODE: MESSAGE" on stderr, exit 1.
// Every call has a deadline.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "deviceplugin.grpc.pb.h"
#include "podresources.grpc.pb.h"

namespace {

using nlohmann::json;

std::string dir;

void line_append(const std::string& file, const json& j) {
  std::ofstream out(dir + "/" + file, std::ios::app);
  out << j.dump() << "\n";
}

// Opens the plugin's ListAndWatch and records every list until the stream ends.
void watch(std::string endpoint) {
  auto channel = grpc::CreateChannel("unix://" + dir + "/" + endpoint, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1beta1::DevicePluginOptions options;
    const auto s = stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &options);
    line_append("options.jsonl",
                {{"ok", s.ok()},
                 {"pre_start_required", options.pre_start_required()},
                 {"get_preferred_allocation_available", options.get_preferred_allocation_available()}});
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));  // the test's life at most
  auto reader = stub->ListAndWatch(&ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  while (reader->Read(&list)) {
    json devices = json::array();
    for (const auto& d : list.devices()) devices.push_back({{"id", d.id()}, {"health", d.health()}});
    line_append("devices.jsonl", {{"devices", devices}});
  }
  const auto s = reader->Finish();
  line_append("devices.jsonl", {{"end", s.error_message()}});
}

class Registration final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* r, v1beta1::Empty*) override {
    std::lock_guard g(lock);
    resource = r->resource_name();
    line_append("register.jsonl",
                {{"version", r->version()},
                 {"endpoint", r->endpoint()},
                 {"resource_name", r->resource_name()},
                 {"get_preferred_allocation_available", r->options().get_preferred_allocation_available()}});
    std::thread(watch, r->endpoint()).detach();
    return grpc::Status::OK;
  }
  std::mutex lock;
  std::string resource;
};

class PodResources final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResources(Registration& r) : registration_(r) {}
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    auto* pod = response->add_pod_resources();
    pod->set_name("test-pod");
    pod->set_namespace_("default");
    auto* devices = pod->add_containers()->add_devices();
    {
      std::lock_guard g(registration_.lock);
      devices->set_resource_name(registration_.resource);
    }
    std::ifstream in(dir + "/in-use");
    for (std::string id; std::getline(in, id);)
      if (!id.empty()) devices->add_device_ids(id);
    return grpc::Status::OK;
  }

 private:
  Registration& registration_;
};

int serve() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  Registration registration;
  PodResources pod_resources(registration);
  grpc::ServerBuilder kubelet, pods;
  kubelet.AddListeningPort("unix://" + dir + "/kubelet.sock", grpc::InsecureServerCredentials());
  kubelet.RegisterService(&registration);
  pods.AddListeningPort("unix://" + dir + "/pod-resources.sock", grpc::InsecureServerCredentials());
  pods.RegisterService(&pod_resources);
  auto a = kubelet.BuildAndStart();
  auto b = pods.BuildAndStart();
  if (!a || !b) {
    std::fprintf(stderr, "k8s-kubelet-stub: cannot serve in %s\n", dir.c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&set, &sig);
  a->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  b->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}

int allocate(const std::string& endpoint, int n, char** ids) {
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix://" + dir + "/" + endpoint, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
  v1beta1::AllocateRequest request;
  auto* c = request.add_container_requests();
  for (int i = 0; i < n; ++i) c->add_devicesids(ids[i]);
  v1beta1::AllocateResponse response;
  const auto s = stub->Allocate(&ctx, request, &response);
  if (!s.ok()) {
    std::fprintf(stderr, "%d: %s\n", static_cast<int>(s.error_code()), s.error_message().c_str());
    return 1;
  }
  json out = json::array();
  for (const auto& r : response.container_responses()) {
    json mounts = json::array();
    for (const auto& m : r.mounts())
      mounts.push_back(
          {{"container_path", m.container_path()}, {"host_path", m.host_path()}, {"read_only", m.read_only()}});
    json envs = json::object();
    for (const auto& [k, v] : r.envs()) envs[k] = v;
    out.push_back({{"envs", envs}, {"mounts", mounts}, {"devices", r.devices_size()}});
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  if (argc >= 3 && std::string(argv[1]) == "serve") {
    dir = argv[2];
    return serve();
  }
  if (argc >= 5 && std::string(argv[1]) == "allocate") {
    dir = argv[2];
    return allocate(argv[3], argc - 4, argv + 4);
  }
  std::fprintf(stderr, "usage: k8s-kubelet-stub serve DIR | allocate DIR ENDPOINT ID...\n");
  return 2;
}
