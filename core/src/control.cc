#include "rpcie/control.hpp"

#include "rpcie/fd.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace rpcie::control {

std::string socket_path_resolve(std::string_view flag) {
  if (!flag.empty()) return std::string(flag);
  const char* env = std::getenv("RPCIE_CONTROL");
  if (env && *env) return env;
  return kDefaultSocket;
}

Result<std::string> line_read(int fd, Deadline deadline) {
  std::string line;
  char buf[4096];
  for (;;) {
    auto w = fd_wait(fd, POLLIN, deadline, "reading the control socket");
    if (!w) return tl::unexpected(w.error());
    // Peek first, so that bytes after the newline (none are expected) stay in the socket.
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return fail(errno, "control socket: receive");
    }
    if (n == 0) return fail(ECONNRESET, "control socket: closed before the end of the line");
    auto* nl = static_cast<char*>(std::memchr(buf, '\n', static_cast<std::size_t>(n)));
    const std::size_t take = nl ? static_cast<std::size_t>(nl - buf) + 1 : static_cast<std::size_t>(n);
    ssize_t got = ::recv(fd, buf, take, 0);
    if (got < 0) return fail(errno, "control socket: receive");
    line.append(buf, static_cast<std::size_t>(got));
    if (line.size() > kMaxLine) return fail(EPROTO, "control socket: line longer than " + std::to_string(kMaxLine));
    if (nl) {
      line.pop_back();
      return line;
    }
  }
}

Result<void> line_write(int fd, std::string_view line, Deadline deadline) {
  std::string out(line);
  out.push_back('\n');
  std::size_t done = 0;
  while (done < out.size()) {
    auto w = fd_wait(fd, POLLOUT, deadline, "writing the control socket");
    if (!w) return w;
    ssize_t n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return fail(errno, "control socket: send");
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

std::string json_line(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json error_answer(const Error& e) { return {{"error", e.message}, {"errno", e.to_errno()}}; }

Result<nlohmann::json> call(const std::string& socket_path, const nlohmann::json& request, Deadline deadline) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path)
    return fail(EINVAL, "control socket path '" + socket_path + "' is empty or too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return fail(errno, "control socket");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ECONNREFUSED)
      return fail(e, "no rpcie-hostd listens on " + socket_path + " (is it running? see --control / $RPCIE_CONTROL)");
    if (e == EACCES) return fail(e, "no access to " + socket_path + " (root or the group rpcie-hostd was given)");
    return fail(e, "connect to " + socket_path);
  }
  auto sent = line_write(fd.get(), json_line(request), deadline);
  if (!sent) return tl::unexpected(sent.error());
  auto line = line_read(fd.get(), deadline);
  if (!line) return tl::unexpected(line.error());
  return answer_parse(*line);
}

Result<nlohmann::json> answer_parse(std::string_view line) {
  auto answer = nlohmann::json::parse(line, nullptr, false);
  if (answer.is_discarded() || !answer.is_object())
    return fail(EPROTO, "rpcie-hostd answered something that is not a JSON object");
  if (answer.contains("error")) {
    int code = EIO;
    if (answer.contains("errno") && answer["errno"].is_number_integer()) code = answer["errno"].get<int>();
    if (code <= 0) code = EIO;
    return fail(code, answer["error"].is_string() ? answer["error"].get<std::string>() : "rpcie-hostd refused");
  }
  return answer;
}

}  // namespace rpcie::control
