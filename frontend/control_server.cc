#include "control_server.hpp"

#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpcie/control.hpp"
#include "rpcie/log.hpp"

namespace rpcie::hostd {

Result<std::unique_ptr<ControlServer>> ControlServer::start(const std::string& path, gid_t group, mode_t mode,
                                                            Handler handler) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) return fail(EINVAL, "control socket path '" + path + "'");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // A live hostd answers; a socket file nobody listens on is a leftover.
  {
    auto probe = control::call(path, {{"op", "status"}}, Deadline::after(std::chrono::milliseconds(500)));
    if (probe) return fail(EADDRINUSE, "another rpcie-hostd serves " + path);
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return fail(EEXIST, path + " exists and is not a socket");
      ::unlink(path.c_str());
    }
  }
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->handler_ = std::move(handler);
  s->fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->fd_ < 0) return fail(errno, "control socket");
  if (::bind(s->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return fail(errno, "bind " + path);
  s->path_ = path;  // ours from here: the destructor removes it (not a socket another daemon bound first)
  if (::chown(path.c_str(), 0, group) != 0 || ::chmod(path.c_str(), mode) != 0)
    return fail(errno, "chown/chmod " + path);
  if (::listen(s->fd_, 16) != 0) return fail(errno, "listen on " + path);
  s->acceptor_ = std::thread([raw = s.get()] { raw->accept_run(); });
  return s;
}

ControlServer::~ControlServer() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  // Requests in progress end within their own deadlines (attach: the timeout).
  while (clients_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty()) ::unlink(path_.c_str());
}

void ControlServer::accept_run() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if (errno != EAGAIN && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (clients_.load() >= kMaxClients) {
      (void)control::line_write(c, nlohmann::json{{"error", "rpcie-hostd is busy"}, {"errno", EBUSY}}.dump(),
                                Deadline::after(std::chrono::milliseconds(200)));
      ::close(c);
      continue;
    }
    clients_.fetch_add(1);
    std::thread([this, c] {
      serve(c);
      ::close(c);
      clients_.fetch_sub(1);
    }).detach();
  }
}

void ControlServer::serve(int fd) {
  auto line = control::line_read(fd, Deadline::after(std::chrono::seconds(5)));
  if (!line) return;
  nlohmann::json answer;
  auto request = nlohmann::json::parse(*line, nullptr, false);
  if (request.is_discarded() || !request.is_object() || !request.contains("op") || !request["op"].is_string()) {
    answer = {{"error", "malformed request: expected a JSON object with \"op\""}, {"errno", EINVAL}};
  } else {
    try {
      answer = handler_(request);
    } catch (const std::exception& e) {  // a JSON type error in the request
      answer = {{"error", std::string("malformed request: ") + e.what()}, {"errno", EINVAL}};
    }
  }
  (void)control::line_write(fd, answer.dump(), Deadline::after(std::chrono::seconds(5)));
}

}  // namespace rpcie::hostd
