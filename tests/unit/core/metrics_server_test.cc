// MetricsServer over real sockets: good, bad, slow, idle and oversized requests, exact
// status lines; addresses; shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "rpcie/fd.hpp"
#include "rpcie/metrics_server.hpp"

using rpcie::Fd;
using rpcie::metrics::MetricsServer;
using namespace std::chrono_literals;

namespace {

Fd connect_to(std::uint16_t port, bool v6 = false) {
  Fd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  REQUIRE(rc == 0);
  return fd;
}

void send_all(const Fd& fd, const std::string& text) {
  REQUIRE(::send(fd.get(), text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
}

// Everything until the server closes, or what came by `within` (then "TIMEOUT" appended).
std::string read_all(const Fd& fd, std::chrono::milliseconds within = 3000ms) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + within;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    pollfd p{fd.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out + "TIMEOUT";
    char buf[4096];
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

std::string exchange(std::uint16_t port, const std::string& request, bool v6 = false) {
  Fd fd = connect_to(port, v6);
  send_all(fd, request);
  return read_all(fd);
}

std::string status_line(const std::string& response) { return response.substr(0, response.find("\r\n")); }

std::unique_ptr<MetricsServer> server_start(MetricsServer::Options o = {}) {
  auto s = MetricsServer::start(
      "127.0.0.1", 0, [] { return std::string("rpcie_up 1\n"); }, o);
  REQUIRE(s);
  return std::move(*s);
}

}  // namespace

TEST_CASE("GET /metrics is answered 200 with the source's text, then closed") {
  auto s = server_start();
  const auto r = exchange(s->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n");
  CHECK(r ==
        "HTTP/1.1 200 OK\r\n"
        "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        "Content-Length: 11\r\n"
        "Connection: close\r\n\r\n"
        "rpcie_up 1\n");
  // A query string and bare newlines are fine too.
  CHECK(status_line(exchange(s->port(), "GET /metrics?x=1 HTTP/1.0\n\n")) == "HTTP/1.1 200 OK");
}

TEST_CASE("another path is 404, another method 405, garbage 400") {
  auto s = server_start();
  CHECK(status_line(exchange(s->port(), "GET / HTTP/1.1\r\n\r\n")) == "HTTP/1.1 404 Not Found");
  CHECK(status_line(exchange(s->port(), "GET /metricsx HTTP/1.1\r\n\r\n")) == "HTTP/1.1 404 Not Found");
  const auto post = exchange(s->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  CHECK(status_line(post) == "HTTP/1.1 405 Method Not Allowed");
  CHECK(post.find("\r\nAllow: GET\r\n") != std::string::npos);
  CHECK(status_line(exchange(s->port(), "hello\r\n\r\n")) == "HTTP/1.1 400 Bad Request");
  CHECK(status_line(exchange(s->port(), "GET /metrics\r\n\r\n")) == "HTTP/1.1 400 Bad Request");
  CHECK(status_line(exchange(s->port(), "GET /metrics HTTP/2.0\r\n\r\n")) == "HTTP/1.1 400 Bad Request");
  CHECK(status_line(exchange(s->port(), "GET metrics HTTP/1.1\r\n\r\n")) == "HTTP/1.1 400 Bad Request");
  CHECK(status_line(exchange(s->port(), std::string("G\0T /metrics HTTP/1.1\r\n\r\n", 26))) ==
        "HTTP/1.1 400 Bad Request");
}

TEST_CASE("a request over the size bound is answered 431") {
  auto s = server_start();
  const auto r = exchange(s->port(), "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a'));
  CHECK(status_line(r) == "HTTP/1.1 431 Request Header Fields Too Large");
}

TEST_CASE("a slow client is closed at its deadline and delays no other scrape") {
  MetricsServer::Options o;
  o.connection_timeout = 400ms;
  auto s = server_start(o);
  Fd slow = connect_to(s->port());
  send_all(slow, "GET /met");  // and nothing more
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(status_line(exchange(s->port(), "GET /metrics HTTP/1.1\r\n\r\n")) == "HTTP/1.1 200 OK");
  CHECK(std::chrono::steady_clock::now() - t0 < 300ms);
  CHECK(read_all(slow, 2000ms).empty());  // closed without an answer, not left open
  CHECK(std::chrono::steady_clock::now() - t0 < 1500ms);
}

TEST_CASE("more idle connections than the cap do not keep a scrape out") {
  MetricsServer::Options o;
  o.connections_max = 3;
  auto s = server_start(o);
  std::vector<Fd> idle;
  for (int i = 0; i < 10; ++i) idle.push_back(connect_to(s->port()));
  CHECK(status_line(exchange(s->port(), "GET /metrics HTTP/1.1\r\n\r\n")) == "HTTP/1.1 200 OK");
  // The ones it replaced were closed at once.
  CHECK(read_all(idle.front(), 1000ms).empty());
}

TEST_CASE("an IPv6 literal is served") {
  auto s = MetricsServer::start("::1", 0, [] { return std::string("x 1\n"); });
  if (!s && (s.error().code == EADDRNOTAVAIL || s.error().code == EAFNOSUPPORT)) return;  // no IPv6 here
  REQUIRE(s);
  CHECK(status_line(exchange((*s)->port(), "GET /metrics HTTP/1.1\r\n\r\n", true)) == "HTTP/1.1 200 OK");
}

TEST_CASE("a port in use is EADDRINUSE naming the address") {
  auto a = server_start();
  auto b = MetricsServer::start("127.0.0.1", a->port(), [] { return std::string(); });
  REQUIRE_FALSE(b);
  CHECK(b.error().code == EADDRINUSE);
  CHECK(b.error().message.find("127.0.0.1:" + std::to_string(a->port())) != std::string::npos);
}

TEST_CASE("listen addresses are numeric with a port") {
  using rpcie::metrics::listen_address_parse;
  CHECK(*listen_address_parse("127.0.0.1:9100") == std::pair<std::string, std::uint16_t>{"127.0.0.1", 9100});
  CHECK(*listen_address_parse("[::1]:0") == std::pair<std::string, std::uint16_t>{"::1", 0});
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x", "localhost:9100", "::1:9100",
                          "[::1]", "[::1]9100", "[127.0.0.1]:1", "1.2.3:4", ":9100"}) {
    auto r = listen_address_parse(bad);
    CHECK_MESSAGE(!r, bad);
    if (!r) CHECK(r.error().code == EINVAL);
  }
}

TEST_CASE("the server stops promptly with connections open") {
  auto s = server_start();
  Fd idle = connect_to(s->port());
  const auto t0 = std::chrono::steady_clock::now();
  s.reset();
  CHECK(std::chrono::steady_clock::now() - t0 < 200ms);
  CHECK(read_all(idle, 1000ms).empty());
}
