// Deadline arithmetic, the Result/Error helpers, and that every socket wait ends at its
// deadline with the right error.
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <rdma/fi_errno.h>

#include "rpcie/bootstrap.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/process.hpp"
#include "rpcie/result.hpp"

using namespace std::chrono_literals;
using rpcie::Deadline;
using rpcie::Error;
using rpcie::ErrorDomain;
using rpcie::Listener;
using rpcie::Socket;

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// A connected loopback TCP pair.
struct TcpPair {
  Socket client;
  Socket server;
};
TcpPair tcp_pair() {
  rpcie::signals_init();
  auto listener = Listener::open("127.0.0.1", 0);
  REQUIRE_MESSAGE(listener.has_value(), listener.error().describe());
  auto client = Socket::connect("127.0.0.1", listener->port(), Deadline::after(2s));
  REQUIRE_MESSAGE(client.has_value(), client.error().describe());
  auto server = listener->accept(Deadline::after(2s));
  REQUIRE_MESSAGE(server.has_value(), server.error().describe());
  return {std::move(*client), std::move(*server)};
}

}  // namespace

// --- Deadline -------------------------------------------------------------------------------

TEST_CASE("Deadline::after(0) is already expired with nothing remaining") {
  Deadline d = Deadline::after(0s);
  CHECK(d.expired());
  CHECK(d.remaining() == Deadline::Clock::duration::zero());
  CHECK(d.remaining_ms() == 0);
}

TEST_CASE("a deadline in the past reports zero remaining, never a negative time") {
  Deadline d = Deadline::at(Deadline::Clock::now() - 5s);
  CHECK(d.expired());
  CHECK(d.remaining() == Deadline::Clock::duration::zero());
  CHECK(d.remaining_ms() == 0);
}

TEST_CASE("remaining_ms rounds up so that poll never wakes before the deadline") {
  // 1500 us left reads as 2 ms (1 ms only if this thread was descheduled for over 500 us,
  // so try a few times; truncation would give 1 every time).
  bool saw_two = false;
  for (int attempt = 0; attempt < 20 && !saw_two; ++attempt) {
    int ms = Deadline::after(1500us).remaining_ms();
    CHECK(ms >= 1);
    CHECK(ms <= 2);
    saw_two = ms == 2;
  }
  CHECK(saw_two);
  // Well under a millisecond left is 1 ms, not 0 (0 would make poll return at once).
  bool saw_one = false;
  for (int attempt = 0; attempt < 20 && !saw_one; ++attempt) {
    Deadline d = Deadline::after(400us);
    int ms = d.remaining_ms();
    saw_one = ms == 1;
  }
  CHECK(saw_one);
}

TEST_CASE("remaining_ms of a long deadline is capped at INT_MAX") {
  Deadline year = Deadline::after(std::chrono::hours(24 * 365));
  CHECK_FALSE(year.expired());
  CHECK(year.remaining_ms() == INT_MAX);
  Deadline month = Deadline::after(std::chrono::hours(24 * 30));  // 2.59e9 ms > INT_MAX
  CHECK(month.remaining_ms() == INT_MAX);
  Deadline day = Deadline::after(std::chrono::hours(24));
  CHECK(day.remaining_ms() <= 24 * 3600 * 1000);
  CHECK(day.remaining_ms() > 24 * 3600 * 1000 - 60 * 1000);
}

TEST_CASE("min() picks the earlier deadline whichever side it is on") {
  auto now = Deadline::Clock::now();
  Deadline early = Deadline::at(now + 1s);
  Deadline late = Deadline::at(now + 5s);
  CHECK(early.min(late).when() == early.when());
  CHECK(late.min(early).when() == early.when());
  CHECK(early.min(early).when() == early.when());
  CHECK(Deadline::at(now - 1s).min(late).expired());
}

// --- Result / Error ---------------------------------------------------------------------------

TEST_CASE("fabric_code_to_errno maps each libfabric-specific code to an errno value") {
  struct Case {
    int fi;
    int expected;
  };
  const Case cases[] = {
      {FI_EOTHER, EIO},         {FI_ETOOSMALL, ENOBUFS}, {FI_EOPBADSTATE, EBADFD}, {FI_EAVAIL, EIO},
      {FI_EBADFLAGS, EINVAL},   {FI_ENOEQ, EINVAL},      {FI_EDOMAIN, EINVAL},     {FI_ENOCQ, EINVAL},
      {FI_ECRC, EIO},           {FI_ETRUNC, EMSGSIZE},   {FI_ENOKEY, ENOKEY},      {FI_ENOAV, EINVAL},
      {FI_EOVERRUN, EOVERFLOW}, {FI_ENORX, ENOBUFS},
  };
  for (const Case& c : cases) {
    CAPTURE(c.fi);
    CHECK(c.fi >= FI_ERRNO_OFFSET);
    CHECK(rpcie::fabric_code_to_errno(c.fi) == c.expected);
    CHECK(rpcie::fabric_code_to_errno(-c.fi) == c.expected);  // sign does not matter
  }
}

TEST_CASE("fabric_code_to_errno is total: every code maps to a positive errno below 256") {
  for (int code = -1000; code <= 1000; ++code) {
    CAPTURE(code);
    int e = rpcie::fabric_code_to_errno(code);
    CHECK(e > 0);
    CHECK(e < FI_ERRNO_OFFSET);
  }
  CHECK(rpcie::fabric_code_to_errno(0) == EIO);
  CHECK(rpcie::fabric_code_to_errno(INT_MAX) == EIO);
}

TEST_CASE("fabric_code_to_errno passes codes below 256 through, they are errno values") {
  for (int code : {FI_EAGAIN, FI_ECONNREFUSED, FI_EINVAL, FI_ENOMEM, FI_ETIMEDOUT, FI_ECANCELED, FI_EIO, FI_ENOSYS,
                   FI_EADDRNOTAVAIL, 1, 255}) {
    CAPTURE(code);
    CHECK(rpcie::fabric_code_to_errno(code) == code);
    CHECK(rpcie::fabric_code_to_errno(-code) == code);
  }
}

TEST_CASE("Error::to_errno keeps posix codes, maps fabric codes and never returns 0") {
  CHECK(Error{ErrorDomain::posix, ENOENT, "x"}.to_errno() == ENOENT);
  CHECK(Error{ErrorDomain::posix, 0, "x"}.to_errno() == EIO);
  CHECK(Error{ErrorDomain::fabric, FI_ETRUNC, "x"}.to_errno() == EMSGSIZE);
  CHECK(Error{ErrorDomain::fabric, FI_EAGAIN, "x"}.to_errno() == EAGAIN);
}

TEST_CASE("Error::describe contains the message and the reason for either domain") {
  Error posix{ErrorDomain::posix, ECONNREFUSED, "connect to 10.0.0.1:7385"};
  std::string text = posix.describe();
  CHECK(text.find("connect to 10.0.0.1:7385") != std::string::npos);
  CHECK(text.find(std::strerror(ECONNREFUSED)) != std::string::npos);

  Error fabric{ErrorDomain::fabric, FI_ETRUNC, "fi_cq_read"};
  std::string ftext = fabric.describe();
  CHECK(ftext.find("fi_cq_read") != std::string::npos);
  CHECK(ftext.find(fi_strerror(FI_ETRUNC)) != std::string::npos);

  Error bare{ErrorDomain::posix, EPERM, ""};
  CHECK(bare.describe() == std::strerror(EPERM));
}

TEST_CASE("fail() makes a posix error and fail_fabric keeps the fabric domain with a positive code") {
  rpcie::Result<int> p = rpcie::fail(EPROTO, "bad magic");
  REQUIRE_FALSE(p.has_value());
  CHECK(p.error().domain == ErrorDomain::posix);
  CHECK(p.error().code == EPROTO);
  CHECK(p.error().message == "bad magic");

  rpcie::Result<int> f = rpcie::fail_fabric(-FI_ENOKEY, "fi_mr_reg");
  REQUIRE_FALSE(f.has_value());
  CHECK(f.error().domain == ErrorDomain::fabric);
  CHECK(f.error().code == FI_ENOKEY);
  CHECK(f.error().message == "fi_mr_reg");
  CHECK(f.error().to_errno() == ENOKEY);

  rpcie::Result<int> positive = rpcie::fail_fabric(FI_ETRUNC, "truncated");
  REQUIRE_FALSE(positive.has_value());
  CHECK(positive.error().domain == ErrorDomain::fabric);
  CHECK(positive.error().code == FI_ETRUNC);

  rpcie::Result<int> low = rpcie::fail_fabric(-FI_EAGAIN, "fi_send");
  REQUIRE_FALSE(low.has_value());
  CHECK(low.error().domain == ErrorDomain::fabric);
  CHECK(low.error().code == FI_EAGAIN);
  CHECK(low.error().to_errno() == EAGAIN);
}

// --- Waits end at their deadline --------------------------------------------------------------

TEST_CASE("bytes_recv with nothing sent fails with ETIMEDOUT at the deadline") {
  TcpPair p = tcp_pair();
  std::uint8_t byte = 0;
  auto start = Clock::now();
  auto r = p.server.bytes_recv(std::span(&byte, 1), Deadline::after(50ms));
  auto elapsed = since(start);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ETIMEDOUT);
  CHECK(elapsed >= 50ms);
  CHECK(elapsed < 2s);
}

TEST_CASE("bytes_recv with an expired deadline and nothing to read fails at once") {
  TcpPair p = tcp_pair();
  std::uint8_t byte = 0;
  auto start = Clock::now();
  auto r = p.client.bytes_recv(std::span(&byte, 1), Deadline::after(0s));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ETIMEDOUT);
  CHECK(since(start) < 500ms);
}

TEST_CASE("bytes_recv returns data that is already there even when the deadline has passed") {
  TcpPair p = tcp_pair();
  const std::uint8_t out[] = {1, 2, 3};
  REQUIRE(p.client.bytes_send(out, Deadline::after(1s)).has_value());
  std::this_thread::sleep_for(50ms);  // loopback delivers well within this
  std::uint8_t in[3] = {};
  auto r = p.server.bytes_recv(in, Deadline::after(0s));
  REQUIRE_MESSAGE(r.has_value(), r.error().describe());
  CHECK(in[0] == 1);
  CHECK(in[2] == 3);
}

TEST_CASE("bytes_recv reports ECONNRESET when the peer hangs up") {
  TcpPair p = tcp_pair();
  p.client.close();
  std::uint8_t byte = 0;
  auto r = p.server.bytes_recv(std::span(&byte, 1), Deadline::after(2s));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ECONNRESET);
}

TEST_CASE("bytes_send to a peer that never reads fails with ETIMEDOUT once the buffers fill") {
  TcpPair p = tcp_pair();
  std::vector<std::uint8_t> big(64 << 20, 0x5a);
  auto start = Clock::now();
  auto r = p.client.bytes_send(big, Deadline::after(200ms));
  auto elapsed = since(start);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == ETIMEDOUT);
  CHECK(elapsed >= 200ms);
  CHECK(elapsed < 3s);
}

TEST_CASE("Listener::accept with no client fails with ETIMEDOUT at the deadline") {
  auto listener = Listener::open("127.0.0.1", 0);
  REQUIRE(listener.has_value());
  CHECK(listener->port() != 0);
  auto start = Clock::now();
  auto s = listener->accept(Deadline::after(50ms));
  auto elapsed = since(start);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == ETIMEDOUT);
  CHECK(elapsed >= 50ms);
  CHECK(elapsed < 2s);
}

TEST_CASE("Socket::connect to a closed port on 127.0.0.1 fails with ECONNREFUSED") {
  std::uint16_t port = 0;
  {
    auto listener = Listener::open("127.0.0.1", 0);
    REQUIRE(listener.has_value());
    port = listener->port();
  }  // closed again: nobody listens on `port` now
  auto start = Clock::now();
  auto s = Socket::connect("127.0.0.1", port, Deadline::after(2s));
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == ECONNREFUSED);
  CHECK(s.error().message.find(std::to_string(port)) != std::string::npos);
  CHECK(since(start) < 1s);
}

TEST_CASE("Socket::connect to an unresolvable host fails with an error") {
  auto s = Socket::connect("no-such-host.invalid", 7385, Deadline::after(2s));
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == EHOSTUNREACH);
}

TEST_CASE("a connected pair reports loopback addresses on both ends") {
  TcpPair p = tcp_pair();
  CHECK(p.client.local_address() == "127.0.0.1");
  CHECK(p.client.peer_address() == "127.0.0.1");
  CHECK(p.server.peer_address() == "127.0.0.1");
}

TEST_CASE("Socket move and release hand the descriptor over without closing it") {
  TcpPair p = tcp_pair();
  int fd = p.client.fd();
  Socket moved(std::move(p.client));
  CHECK(moved.fd() == fd);
  CHECK_FALSE(p.client.valid());
  int released = moved.release();
  CHECK(released == fd);
  CHECK_FALSE(moved.valid());
  Socket again(released);  // owns it again and closes it at scope end
  CHECK(again.valid());
}
