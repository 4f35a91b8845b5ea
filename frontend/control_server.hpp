// The listening end of the control socket (protocol in rpcie/control.hpp). One thread
// accepts; each connection is served on a thread of its own (at most kMaxClients at once,
// further ones are answered "busy"), one request each.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "rpcie/result.hpp"

namespace rpcie::hostd {

class ControlServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  static constexpr int kMaxClients = 16;

  // Binds `path` (a stale socket file is replaced; a live one is EADDRINUSE), owned by
  // root:`group` with `mode`, and starts serving with `handler` (called concurrently).
  static Result<std::unique_ptr<ControlServer>> start(const std::string& path, gid_t group, mode_t mode,
                                                      Handler handler);
  ~ControlServer();  // stops accepting, waits for requests in progress, removes the socket

 private:
  ControlServer() = default;
  void accept_run();
  void serve(int fd);
  std::string path_;
  int fd_ = -1;
  Handler handler_;
  std::atomic<bool> stop_{false};
  std::atomic<int> clients_{0};
  std::thread acceptor_;
};

}  // namespace rpcie::hostd
