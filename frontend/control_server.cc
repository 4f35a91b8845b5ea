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

Result<std::unique_ptr<ControlServer>> ControlServer::start(const std::string& path, gid_t group, mode_t mode,
                                                            AnswerHandler handler) {
  return start(path, group, mode, [handler = std::move(handler)](const nlohmann::json& request, const ucred&) {
    return Reply{.answer = handler(request)};
  });
}

ControlServer::~ControlServer() {
  stop_ = true;
  stop_posted_.post();
  if (acceptor_.joinable()) acceptor_.join();
  // Requests in progress end within their own deadlines (attach: the timeout).
  while (clients_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (fd_ >= 0) ::close(fd_);
  if (!path_.empty()) ::unlink(path_.c_str());
}

void ControlServer::accept_run() {
  // Asleep until a client connects or the destructor posts stop_posted_ (an idle daemon
  // is not woken for nothing); in 200 ms slices if the eventfd could not be made.
  const int slice_ms = stop_posted_ ? 60'000 : 200;
  while (!stop_) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {stop_posted_.fd(), POLLIN, 0}};
    if (::poll(p, 2, slice_ms) <= 0 || p[0].revents == 0) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if (errno != EAGAIN && errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (clients_.load() >= kMaxClients) {
      (void)control::line_write(c,
                                control::json_line(nlohmann::json{{"error", "rpcie-hostd is busy"}, {"errno", EBUSY}}),
                                Deadline::after(std::chrono::milliseconds(200)));
      ::close(c);
      continue;
    }
    clients_.fetch_add(1);
    std::thread([this, c] {
      (void)serve(Fd(c));
      clients_.fetch_sub(1);
    }).detach();
  }
}

namespace {

// The answer line with `fds` attached to its first byte (SCM_RIGHTS), then the rest of it.
Result<void> answer_send(int fd, const std::string& line, const std::vector<int>& fds, Deadline deadline) {
  if (fds.empty()) return control::line_write(fd, line, deadline);
  const std::string framed = line + "\n";
  iovec iov{const_cast<char*>(framed.data()), 1};
  std::vector<char> control_bytes(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control_bytes.data();
  msg.msg_controllen = control_bytes.size();
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  RPCIE_TRY(fd_wait(fd, POLLOUT, deadline, "sending a control answer"));
  ssize_t n;
  do n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1) return fail(n < 0 ? errno : EIO, "send control answer");
  return control::line_write(fd, std::string_view(line).substr(1), deadline);
}

}  // namespace

ControlServer::Reply ControlServer::request_answer(std::string_view line, const ucred& peer, const Handler& handler) {
  auto request = nlohmann::json::parse(line, nullptr, false);
  if (request.is_discarded() || !request.is_object() || !request.contains("op") || !request["op"].is_string())
    return Reply{.answer = {{"error", "malformed request: expected a JSON object with \"op\""}, {"errno", EINVAL}}};
  try {
    return handler(request, peer);
  } catch (const std::exception& e) {  // a JSON type error in the request
    return Reply{.answer = {{"error", std::string("malformed request: ") + e.what()}, {"errno", EINVAL}}};
  }
}

Fd ControlServer::serve(Fd connection) {
  const int fd = connection.get();
  auto line = control::line_read(fd, Deadline::after(std::chrono::seconds(5)));
  if (!line) return connection;
  ucred peer{};
  socklen_t peer_size = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_size) != 0) return connection;
  Reply reply = request_answer(*line, peer, handler_);
  // json_line: an answer may quote a request's text cut inside a UTF-8 character (names
  // are cut at 64 or 300 bytes), where dump() would throw and end hostd.
  auto sent = answer_send(fd, control::json_line(reply.answer), reply.fds, Deadline::after(std::chrono::seconds(5)));
  if (!reply.keep) return connection;
  reply.keep(sent ? std::move(connection) : Fd());
  return Fd();
}

}  // namespace rpcie::hostd
