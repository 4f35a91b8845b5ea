// The plugin's gRPC server on its socket in the device-plugins directory
// (<dir>/rpcie-<resource>.sock), serving DevicePluginService. start() removes a stale socket
// of that name first; shutdown() ends the streams (Pool::stop is the caller's), waits at
// most `grace` for calls in progress and removes the socket.
// Thread-safety: start/shutdown from one thread; the service runs on gRPC's threads.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "plugin_service.hpp"
#include "rpcie/result.hpp"

namespace rpcie::k8s {

class PluginServer {
 public:
  PluginServer(std::string socket_path, DevicePluginService& service)
      : socket_path_(std::move(socket_path)), service_(service) {}
  ~PluginServer() { shutdown(std::chrono::seconds(1)); }
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  Result<void> start();
  void shutdown(std::chrono::milliseconds grace);
  // Whether our socket is still there: the kubelet removes the plugins' sockets when it
  // restarts, asking them to serve anew and register again.
  bool socket_present() const;
  const std::string& socket_path() const noexcept { return socket_path_; }

 private:
  std::string socket_path_;
  DevicePluginService& service_;
  std::unique_ptr<grpc::Server> server_;
  unsigned long long socket_inode_ = 0;
};

}  // namespace rpcie::k8s
