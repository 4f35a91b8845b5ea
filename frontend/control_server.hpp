// The listening end of the control socket (protocol in rpcie/control.hpp). One thread
// accepts; each connection is served on a thread of its own (at most kMaxClients at once,
// further ones are answered "busy"), one request each. A request may also pass file
// descriptors with its answer and keep its connection open after it (the MMIO ring: the
// program's connection stays open as long as it uses the ring).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "rpcie/event_fd.hpp"
#include "rpcie/fd.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

class ControlServer {
 public:
  // An answer, with what a request may do beyond it.
  struct Reply {
    nlohmann::json answer{};
    std::vector<int> fds{};  // sent with the answer (SCM_RIGHTS); still owned by the handler's side
    // Called once the answer was sent whole, with the connection, which it then owns; or,
    // when sending failed, with an empty Fd (the handler lets go of what it set aside for
    // the connection). Empty: the connection is closed.
    std::function<void(Fd connection)> keep{};
  };
  // `peer`: the connecting process's credentials (SO_PEERCRED).
  using Handler = std::function<Reply(const nlohmann::json& request, const ucred& peer)>;
  using AnswerHandler = std::function<nlohmann::json(const nlohmann::json& request)>;
  static constexpr int kMaxClients = 16;

  // Binds `path` (a stale socket file is replaced; a live one is EADDRINUSE), owned by
  // root:`group` with `mode`, and starts serving with `handler` (called concurrently).
  static Result<std::unique_ptr<ControlServer>> start(const std::string& path, gid_t group, mode_t mode,
                                                      Handler handler);
  // The same for a handler that only answers.
  static Result<std::unique_ptr<ControlServer>> start(const std::string& path, gid_t group, mode_t mode,
                                                      AnswerHandler handler);
  ~ControlServer();  // stops accepting, waits for requests in progress, removes the socket

  // What serve() answers to one request `line` (without its newline): a malformed request
  // (not a JSON object with a string "op") is answered EINVAL without calling `handler`, as
  // is a request whose handler throws (a JSON type error). No I/O (the fuzz target's way in).
  static Reply request_answer(std::string_view line, const ucred& peer, const Handler& handler);

 private:
  ControlServer() = default;
  void accept_run();
  // Serves the one request on `connection`; returns it unless a Reply::keep took it.
  Fd serve(Fd connection);
  std::string path_;
  int fd_ = -1;
  Handler handler_;
  std::atomic<bool> stop_{false};
  EventFd stop_posted_;  // ends the acceptor's sleep; it sleeps in slices without one
  std::atomic<int> clients_{0};
  std::thread acceptor_;
};

}  // namespace rpcie::hostd
