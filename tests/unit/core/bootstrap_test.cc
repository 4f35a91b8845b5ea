// The TCP bootstrap: address parsing, framed messages over a real loopback connection
// (and every way a hostile or broken peer can get them wrong), and the Session handshake:
// garbage and stalled peers fail only their own handshake, and a provider mismatch is
// explained to the client by name.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include "rpcie/bootstrap.hpp"
#include "rpcie/process.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/providers/provider.hpp"
#include "rpcie/session.hpp"

using namespace std::chrono_literals;
namespace proto = rpcie::proto;
using rpcie::Deadline;
using rpcie::Listener;
using rpcie::Session;
using rpcie::SessionOptions;
using rpcie::Socket;
namespace providers = rpcie::providers;

namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::uint8_t>;

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

Listener listen_loopback() {
  rpcie::signals_init();
  auto l = Listener::open("127.0.0.1", 0);
  REQUIRE_MESSAGE(l.has_value(), l.error().describe());
  return std::move(*l);
}

struct TcpPair {
  Socket client;
  Socket server;
};
TcpPair tcp_pair() {
  Listener listener = listen_loopback();
  auto client = Socket::connect("127.0.0.1", listener.port(), Deadline::after(2s));
  REQUIRE_MESSAGE(client.has_value(), client.error().describe());
  auto server = listener.accept(Deadline::after(2s));
  REQUIRE_MESSAGE(server.has_value(), server.error().describe());
  return {std::move(*client), std::move(*server)};
}

Bytes le32(std::uint32_t v) {
  return {static_cast<std::uint8_t>(v), static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v >> 16),
          static_cast<std::uint8_t>(v >> 24)};
}

void send_raw(Socket& s, const Bytes& bytes) {
  auto r = s.bytes_send(bytes, Deadline::after(2s));
  REQUIRE_MESSAGE(r.has_value(), r.error().describe());
}

// A valid frame (prefix + encoded message).
Bytes frame_of(const proto::Message& m, std::uint64_t request_id = 1) {
  auto enc = proto::message_encode(m, request_id);
  REQUIRE(enc.has_value());
  // Sized up front: g++ 12 -O3 misreads insert() after a 4-byte vector (-Warray-bounds).
  Bytes f(proto::kFramePrefix + enc->size());
  Bytes prefix = le32(static_cast<std::uint32_t>(enc->size()));
  std::copy(prefix.begin(), prefix.end(), f.begin());
  std::copy(enc->begin(), enc->end(), f.begin() + proto::kFramePrefix);
  return f;
}

SessionOptions tcp_options() {
  SessionOptions o;
  o.provider = providers::ProviderChoice{false, providers::ProviderKind::tcp};
  return o;
}

using SessionResult = rpcie::Result<std::unique_ptr<Session>>;

}  // namespace

// --- address_parse --------------------------------------------------------------------------

TEST_CASE("address_parse accepts host, host:port and IPv6 with or without brackets") {
  struct Case {
    const char* text;
    const char* host;
    std::uint16_t port;
  };
  const Case cases[] = {
      {"host", "host", 7385},
      {"host:1234", "host", 1234},
      {"10.0.0.1:0", "10.0.0.1", 0},
      {"10.0.0.1:65535", "10.0.0.1", 65535},
      {"[::1]:99", "::1", 99},
      {"::1", "::1", 7385},
      {"[::1]", "::1", 7385},
      {"fe80::1:2", "fe80::1:2", 7385},
      {"[fe80::1%eth0]:8000", "fe80::1%eth0", 8000},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    auto r = rpcie::address_parse(c.text, 7385);
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    CHECK(r->first == c.host);
    CHECK(r->second == c.port);
  }
}

TEST_CASE("address_parse uses the default port it is given") {
  auto r = rpcie::address_parse("server", 1);
  REQUIRE(r.has_value());
  CHECK(r->second == 1);
  CHECK(rpcie::kDefaultPort == 7385);
}

TEST_CASE("address_parse rejects empty hosts, bad ports and broken brackets with EINVAL") {
  for (const char* text :
       {"", ":5", "host:", "host:abc", "host:70000", "host:65536", "host:-1", "host:+80", "host:12ab", "host: 80",
        "[::1", "[::1]x", "[::1]:", "[]:80", "[]", "[::1]:abc", "host:99999999999999999999"}) {
    CAPTURE(text);
    auto r = rpcie::address_parse(text, 7385);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().message.find(std::string("'") + text + "'") != std::string::npos);
  }
}

// --- Framed messages over a real loopback connection ----------------------------------------

TEST_CASE("message_send and message_recv carry messages of every size both ways in order") {
  TcpPair p = tcp_pair();
  Bytes big(proto::kMaxPayload, 0);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 13);
  // The sender runs in a thread: a maximal frame is larger than what loopback buffers
  // might hold while nobody reads.
  std::thread sender([&] {
    CHECK(p.client.message_send(proto::Heartbeat{5}, 100, Deadline::after(5s)).has_value());
    CHECK(p.client.message_send(proto::Ping{big}, 101, Deadline::after(5s)).has_value());
    CHECK(p.client.message_send(proto::Goodbye{}, 102, Deadline::after(5s)).has_value());
    CHECK(p.client.message_send(proto::Ping{std::span(big).first(4095)}, 103, Deadline::after(5s)).has_value());
  });
  auto m1 = p.server.message_recv(Deadline::after(5s));
  auto m2 = p.server.message_recv(Deadline::after(5s));
  auto m3 = p.server.message_recv(Deadline::after(5s));
  auto m4 = p.server.message_recv(Deadline::after(5s));
  sender.join();
  REQUIRE(m1.has_value());
  REQUIRE(m2.has_value());
  REQUIRE(m3.has_value());
  REQUIRE(m4.has_value());
  CHECK(m1->decoded.header.request_id == 100);
  CHECK(std::get<proto::Heartbeat>(m1->decoded.message).sequence == 5);
  CHECK(m2->decoded.header.request_id == 101);
  auto data = std::get<proto::Ping>(m2->decoded.message).data;
  CHECK(data.size() == big.size());
  CHECK(std::equal(data.begin(), data.end(), big.begin()));
  CHECK(m3->decoded.header.type == proto::MsgType::goodbye);
  CHECK(m4->decoded.header.request_id == 103);
  CHECK(std::get<proto::Ping>(m4->decoded.message).data.size() == 4095);

  // And back.
  REQUIRE(p.server.message_send(proto::ErrorMsg{ENODEV, "nope"}, 7, Deadline::after(2s)).has_value());
  auto back = p.client.message_recv(Deadline::after(2s));
  REQUIRE(back.has_value());
  CHECK(std::get<proto::ErrorMsg>(back->decoded.message).text == "nope");
}

TEST_CASE("a received message stays valid after it is moved") {
  TcpPair p = tcp_pair();
  REQUIRE(p.client.message_send(proto::ErrorMsg{EIO, "some text"}, 3, Deadline::after(2s)).has_value());
  auto m = p.server.message_recv(Deadline::after(2s));
  REQUIRE(m.has_value());
  rpcie::OwnedMessage moved = std::move(*m);
  CHECK(std::get<proto::ErrorMsg>(moved.decoded.message).text == "some text");
}

TEST_CASE("message_send refuses an invalid message with EINVAL and sends nothing") {
  TcpPair p = tcp_pair();
  auto r = p.client.message_send(proto::ConfigRead{0, 3}, 1, Deadline::after(1s));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == EINVAL);
  // The stream is still in sync: a valid message after it arrives intact.
  REQUIRE(p.client.message_send(proto::Heartbeat{9}, 2, Deadline::after(1s)).has_value());
  auto m = p.server.message_recv(Deadline::after(2s));
  REQUIRE(m.has_value());
  CHECK(m->decoded.header.request_id == 2);
}

TEST_CASE("message_recv rejects a length prefix over kMaxFrame with EMSGSIZE without waiting for the body") {
  for (std::uint32_t length : {static_cast<std::uint32_t>(proto::kMaxFrame + 1), 0xffffffffU}) {
    CAPTURE(length);
    TcpPair p = tcp_pair();
    send_raw(p.client, le32(length));  // and nothing more: the connection stays open
    auto start = Clock::now();
    auto m = p.server.message_recv(Deadline::after(5s));
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == EMSGSIZE);
    CHECK(since(start) < 1s);
  }
}

TEST_CASE("message_recv rejects a length prefix too small for a header with EPROTO") {
  TcpPair p = tcp_pair();
  send_raw(p.client, le32(3));
  auto start = Clock::now();
  auto m = p.server.message_recv(Deadline::after(5s));
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == EPROTO);
  CHECK(since(start) < 1s);
}

TEST_CASE("message_recv rejects a well-framed message of garbage bytes with EPROTO") {
  TcpPair p = tcp_pair();
  Bytes garbage = le32(40);
  for (int i = 0; i < 40; ++i) garbage.push_back(static_cast<std::uint8_t>(0x41 + i));
  send_raw(p.client, garbage);
  auto m = p.server.message_recv(Deadline::after(2s));
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == EPROTO);
}

TEST_CASE("message_recv rejects a frame whose message is malformed inside (bad field) with EPROTO") {
  TcpPair p = tcp_pair();
  Bytes f = frame_of(proto::ConfigRead{0, 4});
  f[proto::kFramePrefix + proto::kHeaderSize + 2] = 3;  // width 3
  send_raw(p.client, f);
  auto m = p.server.message_recv(Deadline::after(2s));
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == EPROTO);
}

TEST_CASE("message_recv reports ECONNRESET when the peer closes mid-frame") {
  for (std::size_t cut : {std::size_t{2}, proto::kFramePrefix, proto::kFramePrefix + 10}) {
    CAPTURE(cut);
    TcpPair p = tcp_pair();
    Bytes f = frame_of(proto::Ping{Bytes(100, 1)});
    f.resize(cut);
    send_raw(p.client, f);
    p.client.close();
    auto m = p.server.message_recv(Deadline::after(2s));
    REQUIRE_FALSE(m.has_value());
    CHECK(m.error().code == ECONNRESET);
  }
}

TEST_CASE("message_recv on a connection the peer closed cleanly reports ECONNRESET") {
  TcpPair p = tcp_pair();
  p.client.close();
  auto m = p.server.message_recv(Deadline::after(2s));
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == ECONNRESET);
}

TEST_CASE("message_recv fails with ETIMEDOUT at the deadline when the peer sends half a frame and stalls") {
  TcpPair p = tcp_pair();
  Bytes f = frame_of(proto::Ping{Bytes(1000, 2)});
  f.resize(f.size() / 2);
  send_raw(p.client, f);
  auto start = Clock::now();
  auto m = p.server.message_recv(Deadline::after(200ms));
  auto elapsed = since(start);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error().code == ETIMEDOUT);
  CHECK(elapsed >= 200ms);
  CHECK(elapsed < 3s);
}

TEST_CASE("message_recv reads exactly one frame and leaves the next one on the socket") {
  TcpPair p = tcp_pair();
  Bytes both = frame_of(proto::Heartbeat{1}, 1);
  Bytes second = frame_of(proto::Heartbeat{2}, 2);
  both.insert(both.end(), second.begin(), second.end());
  send_raw(p.client, both);
  auto m1 = p.server.message_recv(Deadline::after(2s));
  REQUIRE(m1.has_value());
  CHECK(m1->decoded.header.request_id == 1);
  auto m2 = p.server.message_recv(Deadline::after(2s));
  REQUIRE(m2.has_value());
  CHECK(m2->decoded.header.request_id == 2);
}

// --- Session handshake against broken peers ---------------------------------------------------

TEST_CASE("Session::accept fails promptly, not at the deadline, when the peer sends garbage") {
  SUBCASE("garbage that reads as a huge length") {
    TcpPair p = tcp_pair();
    send_raw(p.client, Bytes(64, 0x41));
    auto start = Clock::now();
    auto s = Session::accept(std::move(p.server), tcp_options(), {}, Deadline::after(5s));
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().code == EMSGSIZE);
    CHECK(since(start) < 2s);
  }
  SUBCASE("a well-framed message of garbage") {
    TcpPair p = tcp_pair();
    Bytes garbage(4 + 32, 0x42);
    Bytes prefix = le32(32);
    std::copy(prefix.begin(), prefix.end(), garbage.begin());
    send_raw(p.client, garbage);
    auto start = Clock::now();
    auto s = Session::accept(std::move(p.server), tcp_options(), {}, Deadline::after(5s));
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().code == EPROTO);
    CHECK(since(start) < 2s);
  }
}

TEST_CASE("Session::accept answers a first message that is not hello with an error message") {
  TcpPair p = tcp_pair();
  send_raw(p.client, frame_of(proto::Heartbeat{1}, 5));
  auto s = Session::accept(std::move(p.server), tcp_options(), {}, Deadline::after(5s));
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == EPROTO);
  auto reply = p.client.message_recv(Deadline::after(2s));
  REQUIRE(reply.has_value());
  auto* e = std::get_if<proto::ErrorMsg>(&reply->decoded.message);
  REQUIRE(e != nullptr);
  CHECK(e->code == EPROTO);
}

TEST_CASE("Session::accept gives up at its deadline when the peer stalls mid-hello") {
  TcpPair p = tcp_pair();
  Bytes f = frame_of(proto::Heartbeat{1});
  f.resize(10);
  send_raw(p.client, f);
  auto start = Clock::now();
  auto s = Session::accept(std::move(p.server), tcp_options(), {}, Deadline::after(300ms));
  auto elapsed = since(start);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == ETIMEDOUT);
  CHECK(elapsed >= 300ms);
  CHECK(elapsed < 3s);
}

TEST_CASE("one peer stalling its handshake does not block another peer's full connect and accept") {
  Listener listener = listen_loopback();
  const std::uint16_t port = listener.port();

  // Peer 1 connects, sends half a frame and stalls; its server side waits up to 3 s.
  auto stalled_client = Socket::connect("127.0.0.1", port, Deadline::after(2s));
  REQUIRE(stalled_client.has_value());
  Bytes half = frame_of(proto::Heartbeat{1});
  half.resize(12);
  send_raw(*stalled_client, half);
  auto stalled_server = listener.accept(Deadline::after(2s));
  REQUIRE(stalled_server.has_value());

  std::atomic<bool> stalled_done{false};
  std::optional<SessionResult> stalled_result;
  std::thread stalled([&, sock = std::move(*stalled_server)]() mutable {
    stalled_result.emplace(Session::accept(std::move(sock), tcp_options(), {}, Deadline::after(3s)));
    stalled_done = true;
  });

  // Peer 2 does a whole handshake meanwhile.
  std::optional<SessionResult> good_server;
  std::thread server([&] {
    auto sock = listener.accept(Deadline::after(5s));
    if (!sock) {
      good_server.emplace(tl::unexpected(sock.error()));
      return;
    }
    good_server.emplace(Session::accept(std::move(*sock), tcp_options(), {}, Deadline::after(5s)));
  });
  auto start = Clock::now();
  auto client = Session::connect("127.0.0.1", port, tcp_options(), {}, Deadline::after(5s));
  server.join();
  auto handshake = since(start);
  const bool stalled_still_waiting = !stalled_done.load();
  stalled.join();  // before any REQUIRE can leave the test

  REQUIRE_MESSAGE(client.has_value(), client.error().describe());
  REQUIRE(good_server.has_value());
  REQUIRE_MESSAGE(good_server->has_value(), good_server->error().describe());
  CHECK(stalled_still_waiting);
  CHECK(handshake < 2500ms);
  CHECK((*client)->peer().provider == "tcp;ofi_rxm");
  CHECK((**good_server)->peer().provider == "tcp;ofi_rxm");

  REQUIRE(stalled_result.has_value());
  REQUIRE_FALSE(stalled_result->has_value());
  CHECK(stalled_result->error().code == ETIMEDOUT);
}

TEST_CASE("a provider mismatch reaches the client as an error naming both providers") {
  Listener listener = listen_loopback();
  SessionOptions server_options;
  server_options.provider = providers::ProviderChoice{false, providers::ProviderKind::shm};
  std::optional<SessionResult> server_result;
  std::thread server([&] {
    auto sock = listener.accept(Deadline::after(5s));
    if (!sock) {
      server_result.emplace(tl::unexpected(sock.error()));
      return;
    }
    server_result.emplace(Session::accept(std::move(*sock), server_options, {}, Deadline::after(5s)));
  });
  auto client = Session::connect("127.0.0.1", listener.port(), tcp_options(), {}, Deadline::after(5s));
  server.join();

  REQUIRE_FALSE(client.has_value());
  const std::string& text = client.error().message;
  CAPTURE(text);
  CHECK(text.find("tcp;ofi_rxm") != std::string::npos);
  CHECK(text.find("shm") != std::string::npos);
  CHECK(client.error().code == EPROTO);

  REQUIRE(server_result.has_value());
  REQUIRE_FALSE(server_result->has_value());
  CHECK(server_result->error().message.find("tcp;ofi_rxm") != std::string::npos);
  CHECK(server_result->error().message.find("shm") != std::string::npos);
}

TEST_CASE("a session exchanges region descriptors and peer_region finds them by id") {
  Listener listener = listen_loopback();
  auto server_mem = rpcie::HostBuffer::create(8192);
  auto client_mem = rpcie::HostBuffer::create(4096);
  REQUIRE(server_mem.has_value());
  REQUIRE(client_mem.has_value());
  const rpcie::LocalRegion server_regions[] = {{11, server_mem->data(), server_mem->size()}};
  const rpcie::LocalRegion client_regions[] = {{22, client_mem->data(), client_mem->size()}};
  std::optional<SessionResult> server_result;
  std::thread server([&] {
    auto sock = listener.accept(Deadline::after(5s));
    if (!sock) {
      server_result.emplace(tl::unexpected(sock.error()));
      return;
    }
    server_result.emplace(Session::accept(std::move(*sock), tcp_options(), server_regions, Deadline::after(5s)));
  });
  auto client = Session::connect("127.0.0.1", listener.port(), tcp_options(), client_regions, Deadline::after(5s));
  server.join();
  REQUIRE_MESSAGE(client.has_value(), client.error().describe());
  REQUIRE(server_result.has_value());
  REQUIRE_MESSAGE(server_result->has_value(), server_result->error().describe());
  Session& c = **client;
  Session& s = ***server_result;

  auto remote = c.peer_region(11);
  REQUIRE(remote.has_value());
  CHECK(remote->length == 8192);
  CHECK(remote->key == s.region(0).key());
  CHECK(remote->address == s.region(0).descriptor(11).address);
  auto back = s.peer_region(22);
  REQUIRE(back.has_value());
  CHECK(back->length == 4096);
  CHECK(back->key == c.region(0).key());
  auto missing = c.peer_region(12);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ENOENT);
  CHECK(c.peer().host == rpcie::host_name());
  CHECK_FALSE(c.peer().fabric_address.empty());
}

TEST_CASE("Session::connect and accept refuse more than kMaxRegions regions with EINVAL") {
  std::vector<rpcie::LocalRegion> many(proto::kMaxRegions + 1);
  auto c = Session::connect("127.0.0.1", 1, tcp_options(), many, Deadline::after(1s));
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == EINVAL);
  TcpPair p = tcp_pair();
  auto a = Session::accept(std::move(p.server), tcp_options(), many, Deadline::after(1s));
  REQUIRE_FALSE(a.has_value());
  CHECK(a.error().code == EINVAL);
}

TEST_CASE("address_is_loopback recognises IPv4, IPv6 and mapped loopback addresses") {
  CHECK(rpcie::address_is_loopback("127.0.0.1"));
  CHECK(rpcie::address_is_loopback("127.1.2.3"));
  CHECK(rpcie::address_is_loopback("::1"));
  CHECK(rpcie::address_is_loopback("::ffff:127.0.0.1"));
  CHECK_FALSE(rpcie::address_is_loopback("10.0.0.1"));
  CHECK_FALSE(rpcie::address_is_loopback("1127.0.0.1"));
  CHECK_FALSE(rpcie::address_is_loopback("::2"));
  CHECK_FALSE(rpcie::address_is_loopback(""));
}
