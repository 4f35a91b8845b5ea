// MetricsServer: one thread, poll() over the listening socket, a wake-up eventfd and the
// connections. Contract in rpcie/metrics_server.hpp.
#include "rpcie/metrics_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <list>
#include <thread>
#include <vector>

#include "rpcie/event_fd.hpp"
#include "rpcie/fd.hpp"

namespace rpcie::metrics {

namespace {

using Clock = std::chrono::steady_clock;

std::string response(int code, std::string_view reason, std::string_view content_type, std::string_view body,
                     std::string_view extra_header = {}) {
  std::string out = "HTTP/1.1 " + std::to_string(code) + " " + std::string(reason) + "\r\n";
  out += "Content-Type: " + std::string(content_type) + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += extra_header;
  out += "Connection: close\r\n\r\n";
  out += body;
  return out;
}

std::string error_response(int code, std::string_view reason, std::string_view extra_header = {}) {
  return response(code, reason, "text/plain; charset=utf-8", std::string(reason) + "\n", extra_header);
}

// Where the head ends (past its empty line), or npos while incomplete.
std::size_t head_end(std::string_view in) {
  const auto crlf = in.find("\r\n\r\n");
  const auto lf = in.find("\n\n");
  if (crlf == std::string_view::npos && lf == std::string_view::npos) return std::string_view::npos;
  return crlf < lf ? crlf + 4 : lf + 2;
}

bool token_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-' || c == '_'; }

}  // namespace

Result<std::pair<std::string, std::uint16_t>> listen_address_parse(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return fail(EINVAL,
                "expected ADDR:PORT or [IPV6]:PORT with a numeric address, got '" + std::string(text) + "': " + why);
  };
  std::string_view host, port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return bad("no ']:PORT'");
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("an IPv6 address goes in brackets");
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    return bad("bad port");
  const std::string h(host);
  in6_addr any{};
  const bool v6 = !text.empty() && text.front() == '[';
  if (::inet_pton(v6 ? AF_INET6 : AF_INET, h.c_str(), &any) != 1)
    return bad(v6 ? "not an IPv6 address" : "not an IPv4 address");
  return std::pair{h, static_cast<std::uint16_t>(port)};
}

std::string MetricsServer::answer(std::string_view head, const Source& source) {
  const auto line_end = head.find('\n');
  std::string_view line = head.substr(0, line_end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return error_response(400, "Bad Request");
  const auto method = line.substr(0, sp1);
  const auto target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const auto version = line.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), token_char) || target.empty() ||
      target.front() != '/' || (version != "HTTP/1.0" && version != "HTTP/1.1"))
    return error_response(400, "Bad Request");
  if (method != "GET") return error_response(405, "Method Not Allowed", "Allow: GET\r\n");
  if (target.substr(0, target.find('?')) != "/metrics") return error_response(404, "Not Found");
  return response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", source());
}

struct MetricsServer::Impl {
  struct Connection {
    Fd fd;
    Clock::time_point deadline;
    std::string in, out;
    std::size_t sent = 0;
    bool answering = false;
  };
  Options options;
  Source source;
  Fd listener;
  EventFd wake;
  std::uint16_t port = 0;
  std::atomic<bool> stop{false};
  std::list<Connection> connections;  // oldest first
  std::thread thread;

  void run();
  void accept_one();
  // Reads what there is; false when the connection is done (closed, or answered in full).
  bool readable(Connection& c);
  bool writable(Connection& c);
};

void MetricsServer::Impl::accept_one() {
  const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  if (connections.size() >= options.connections_max) {
    auto waiting = std::find_if(connections.begin(), connections.end(), [](const auto& c) { return !c.answering; });
    if (waiting == connections.end()) {
      ::close(fd);
      return;
    }
    connections.erase(waiting);
  }
  connections.push_back(Connection{Fd(fd), Clock::now() + options.connection_timeout, {}, {}, 0, false});
}

bool MetricsServer::Impl::readable(Connection& c) {
  char buf[2048];
  for (;;) {
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.in.append(buf, static_cast<std::size_t>(n));
    const auto end = head_end(c.in);
    if (end != std::string::npos && end <= options.request_max) {
      c.out = answer(std::string_view(c.in).substr(0, end), source);
    } else if (c.in.size() > options.request_max) {
      c.out = error_response(431, "Request Header Fields Too Large");
    } else {
      continue;
    }
    c.answering = true;
    c.in.clear();
    return writable(c);
  }
}

bool MetricsServer::Impl::writable(Connection& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.sent += static_cast<std::size_t>(n);
  }
  // Whatever else the client sent is dropped before the close: unread bytes would make the
  // close a reset, which may destroy the answer in flight.
  char drain[512];
  while (::recv(c.fd.get(), drain, sizeof drain, 0) > 0) {
  }
  ::shutdown(c.fd.get(), SHUT_WR);
  return false;
}

void MetricsServer::Impl::run() {
  std::vector<pollfd> fds;
  while (!stop.load()) {
    const auto now = Clock::now();
    std::erase_if(connections, [&](const Connection& c) { return c.deadline <= now; });
    auto next = now + std::chrono::seconds(1);
    fds.assign({{wake.fd(), POLLIN, 0}, {listener.get(), POLLIN, 0}});
    for (const auto& c : connections) {
      fds.push_back({c.fd.get(), static_cast<short>(c.answering ? POLLOUT : POLLIN), 0});
      next = std::min(next, c.deadline);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    const int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait, 0)));
    if (rc <= 0) continue;  // timeout (deadlines next round) or EINTR
    if (fds[0].revents) break;
    std::size_t i = 2;
    for (auto it = connections.begin(); it != connections.end(); ++i) {
      const short ev = fds[i].revents;
      bool keep = true;
      if (ev & (POLLERR | POLLNVAL))
        keep = false;
      else if (ev & (POLLIN | POLLHUP))
        keep = it->answering ? writable(*it) : readable(*it);
      else if (ev & POLLOUT)
        keep = writable(*it);
      it = keep ? std::next(it) : connections.erase(it);
    }
    if (fds[1].revents & POLLIN) accept_one();
  }
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address, std::uint16_t port,
                                                            Source source, Options options) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const bool v6 = address.find(':') != std::string::npos;
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    if (::inet_pton(AF_INET6, address.c_str(), &a->sin6_addr) != 1)
      return fail(EINVAL, "'" + address + "' is not an IPv6 address");
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    if (::inet_pton(AF_INET, address.c_str(), &a->sin_addr) != 1)
      return fail(EINVAL, "'" + address + "' is not an IPv4 address");
    len = sizeof *a;
  }
  const std::string where = (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  auto impl = std::make_unique<Impl>();
  // errno is eventfd()'s only here, before the socket calls below.
  if (!impl->wake) return fail(errno, "metrics: eventfd");
  impl->options = options;
  impl->source = std::move(source);
  impl->listener = Fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!impl->listener) return fail(errno, "metrics socket");
  const int one = 1;
  (void)::setsockopt(impl->listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (v6) (void)::setsockopt(impl->listener.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(impl->listener.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
    return fail(errno, "metrics: cannot bind " + where);
  if (::listen(impl->listener.get(), 16) != 0) return fail(errno, "metrics: cannot listen on " + where);
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  if (::getsockname(impl->listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
    return fail(errno, "metrics: getsockname");
  impl->port =
      ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl->thread = std::thread([raw = impl.get()] { raw->run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  impl_->stop.store(true);
  impl_->wake.post();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t MetricsServer::port() const noexcept { return impl_->port; }

}  // namespace rpcie::metrics
