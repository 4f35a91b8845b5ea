// The authentication handshake (rpcie/handshake.hpp): both halves against each other over a
// socketpair, and each half against a peer written out by hand that breaks one rule.
#include "rpcie/handshake.hpp"
#include "rpcie/process.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

using namespace std::chrono_literals;
namespace auth = rpcie::auth;
namespace proto = rpcie::proto;
using rpcie::Deadline;
using rpcie::Socket;

namespace {

using Bytes = std::vector<std::uint8_t>;

Deadline soon() { return Deadline::after(5s); }

struct SocketPair {
  Socket client;
  Socket server;
};
SocketPair socket_pair() {
  rpcie::signals_init();  // a write to a closed peer is EPIPE, not a signal
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  return {Socket(fds[0]), Socket(fds[1])};
}

auth::Key key_of(std::uint8_t fill) {
  std::array<std::uint8_t, auth::kKeyMinBytes> bytes{};
  bytes.fill(fill);
  auto k = auth::Key::create(bytes);
  REQUIRE(k.has_value());
  return std::move(*k);
}

// A server that knows alice by her own key (fill 1) and nobody else.
auth::ServerKeys alice_only() {
  auth::ServerKeys keys;
  keys.clients.emplace("alice", key_of(1));
  REQUIRE(keys.decoy_make().has_value());
  return keys;
}

std::future<rpcie::Result<std::string>> server_start(Socket& s, const auth::ServerKeys& keys,
                                                     Deadline deadline = soon()) {
  return std::async(std::launch::async, [&s, &keys, deadline] { return auth::handshake_server(s, keys, deadline); });
}

std::array<std::uint8_t, proto::kAuthBytes> bytes_of(std::span<const std::uint8_t> wire) {
  std::array<std::uint8_t, proto::kAuthBytes> out{};
  REQUIRE(wire.size() == out.size());
  std::copy(wire.begin(), wire.end(), out.begin());
  return out;
}

void send(Socket& s, const proto::Message& m, std::uint64_t rid = 0) {
  auto r = s.message_send(m, rid, soon());
  REQUIRE_MESSAGE(r.has_value(), r.error().describe());
}

rpcie::OwnedMessage recv(Socket& s) {
  auto m = s.message_recv(soon());
  REQUIRE_MESSAGE(m.has_value(), m.error().describe());
  return std::move(*m);
}

void send_raw(Socket& s, const Bytes& bytes) {
  auto r = s.bytes_send(bytes, soon());
  REQUIRE(r.has_value());
}

// One frame's body (after the length prefix) exactly as it is on the wire.
Bytes frame_raw_recv(Socket& s) {
  std::array<std::uint8_t, proto::kFramePrefix> prefix{};
  auto r = s.bytes_recv(prefix, soon());
  REQUIRE(r.has_value());
  std::uint32_t length = 0;
  for (std::size_t i = 0; i < prefix.size(); ++i) length |= std::uint32_t{prefix[i]} << (8 * i);
  REQUIRE(length <= proto::kMaxFrame);
  Bytes body(length);
  r = s.bytes_recv(body, soon());
  REQUIRE(r.has_value());
  return body;
}

bool readable_now(const Socket& s) {
  pollfd p{s.fd(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool has(const rpcie::Error& e, const std::string& text) { return e.message.find(text) != std::string::npos; }

// The client side of a handshake written out, up to (not including) its proof.
struct HandRolledClient {
  std::string name = "alice";
  auth::Nonce client_nonce = auth::nonce_random();
  auth::Nonce server_nonce{};
  auth::Proof server_proof{};

  void hello_challenge(Socket& s) {
    send(s, proto::AuthHello{name, client_nonce});
    auto m = recv(s);
    auto* c = std::get_if<proto::AuthChallenge>(&m.decoded.message);
    REQUIRE(c != nullptr);
    CHECK(m.decoded.header.request_id == 0);
    server_nonce = bytes_of(c->nonce);
    server_proof = bytes_of(c->proof);
  }
  auth::Proof proof(const auth::Key& key) const {
    return auth::proof_compute(key, auth::Role::client, name, client_nonce, server_nonce);
  }
};

}  // namespace

// --- Both halves ----------------------------------------------------------------------------

TEST_CASE("the two halves authenticate each other, and frames carry MACs both ways afterwards") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  const auth::Key alice = key_of(1);
  auto server = server_start(p.server, keys);
  auto client = auth::handshake_client(p.client, alice, "alice", "exporter", soon());
  REQUIRE_MESSAGE(client.has_value(), client.error().describe());
  auto name = server.get();
  REQUIRE_MESSAGE(name.has_value(), name.error().describe());
  CHECK(*name == "alice");
  CHECK(p.client.frame_mac_active());
  CHECK(p.server.frame_mac_active());
  send(p.client, proto::ListRequest{}, 1);
  auto request = recv(p.server);
  CHECK(std::holds_alternative<proto::ListRequest>(request.decoded.message));
  CHECK((request.decoded.header.flags & proto::kFlagMac) != 0);
  send(p.server, proto::Heartbeat{7}, 1);
  auto reply = recv(p.client);
  auto* hb = std::get_if<proto::Heartbeat>(&reply.decoded.message);
  REQUIRE(hb != nullptr);
  CHECK(hb->sequence == 7);
  CHECK(p.client.frames_dropped() == 0);
  CHECK(p.server.frames_dropped() == 0);
}

TEST_CASE("a shared key authenticates any valid name the server has no own key for") {
  SocketPair p = socket_pair();
  auth::ServerKeys keys = alice_only();
  keys.shared.emplace(key_of(2));
  auto server = server_start(p.server, keys);
  auto client = auth::handshake_client(p.client, key_of(2), "bob", "exporter", soon());
  REQUIRE_MESSAGE(client.has_value(), client.error().describe());
  auto name = server.get();
  REQUIRE(name.has_value());
  CHECK(*name == "bob");
}

TEST_CASE("ServerKeys::find: a client's own key first, else the shared key for a valid name") {
  auth::ServerKeys keys = alice_only();
  CHECK(keys.find("alice") == &keys.clients.at("alice"));
  CHECK(keys.find("bob") == nullptr);
  keys.shared.emplace(key_of(2));
  CHECK(keys.find("alice") == &keys.clients.at("alice"));
  CHECK(keys.find("bob") == &*keys.shared);
  CHECK(keys.find("not a name") == nullptr);
  CHECK(keys.find("") == nullptr);
}

TEST_CASE("a client with the wrong key gets EACCES and never sends its proof") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  auto server = server_start(p.server, keys);
  auto client = auth::handshake_client(p.client, key_of(9), "alice", "exporter", soon());
  REQUIRE_FALSE(client.has_value());
  CHECK(client.error().code == EACCES);
  CHECK(has(client.error(), "authentication failed: exporter did not prove the key for client 'alice'"));
  CHECK_FALSE(p.client.frame_mac_active());
  p.client.close();
  // Had a proof arrived, the server would have refused it (EACCES); it saw the close instead.
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == ECONNRESET);
  CHECK_FALSE(p.server.frame_mac_active());
}

TEST_CASE("a client does not send its proof to a server that proved with another key") {
  SocketPair p = socket_pair();
  auto client = std::async(std::launch::async,
                           [&] { return auth::handshake_client(p.client, key_of(1), "alice", "exporter", soon()); });
  auto hello = recv(p.server);
  auto* h = std::get_if<proto::AuthHello>(&hello.decoded.message);
  REQUIRE(h != nullptr);
  CHECK(h->client == "alice");
  const auth::Nonce ns = auth::nonce_random();
  const auth::Proof wrong = auth::proof_compute(key_of(9), auth::Role::server, "alice", bytes_of(h->nonce), ns);
  send(p.server, proto::AuthChallenge{ns, wrong});
  auto r = client.get();
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == EACCES);
  CHECK_FALSE(readable_now(p.server));  // nothing after the hello
}

TEST_CASE("a server refuses a wrong client proof with an EACCES error, request id 0, no MAC") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  auto server = server_start(p.server, keys);
  HandRolledClient c;
  c.hello_challenge(p.client);
  CHECK(auth::proof_verify(key_of(1), auth::Role::server, "alice", c.client_nonce, c.server_nonce, c.server_proof));
  send(p.client, proto::AuthProof{c.proof(key_of(9))});
  auto m = recv(p.client);  // would be EPROTO had it a MAC: this socket has none
  auto* e = std::get_if<proto::ErrorMsg>(&m.decoded.message);
  REQUIRE(e != nullptr);
  CHECK(e->code == EACCES);
  CHECK(e->text == "authentication failed for client 'alice'");
  CHECK(m.decoded.header.request_id == 0);
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == EACCES);
  CHECK(has(name.error(), "authentication failed for client 'alice' from"));
  CHECK_FALSE(p.server.frame_mac_active());
}

TEST_CASE("a server refuses another message in place of the proof with EACCES") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  auto server = server_start(p.server, keys);
  HandRolledClient c;
  c.hello_challenge(p.client);
  send(p.client, proto::ListRequest{}, 3);
  auto m = recv(p.client);
  auto* e = std::get_if<proto::ErrorMsg>(&m.decoded.message);
  REQUIRE(e != nullptr);
  CHECK(e->code == EACCES);
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == EACCES);
}

TEST_CASE("an unknown name gets a challenge like a known one, and even a right-looking proof is refused") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  auto server = server_start(p.server, keys);
  HandRolledClient c;
  c.name = "mallory";
  c.hello_challenge(p.client);  // a 32-byte nonce and a 32-byte proof, as for alice
  // The decoy key is nobody's: the proof verifies with no key a client could hold.
  CHECK_FALSE(
      auth::proof_verify(key_of(1), auth::Role::server, "mallory", c.client_nonce, c.server_nonce, c.server_proof));
  send(p.client, proto::AuthProof{c.proof(key_of(1))});
  auto m = recv(p.client);
  auto* e = std::get_if<proto::ErrorMsg>(&m.decoded.message);
  REQUIRE(e != nullptr);
  CHECK(e->code == EACCES);
  CHECK(e->text == "authentication failed for client 'mallory'");  // the same words as a wrong proof
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == EACCES);
}

TEST_CASE("an unknown name fails on the client like a wrong key") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  auto server = server_start(p.server, keys);
  auto client = auth::handshake_client(p.client, key_of(1), "mallory", "exporter", soon());
  REQUIRE_FALSE(client.has_value());
  CHECK(client.error().code == EACCES);
  CHECK(has(client.error(), "did not prove the key for client 'mallory'"));
  p.client.close();
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == ECONNRESET);
}

TEST_CASE("a name that is not valid gets a decoy even where a shared key exists") {
  SocketPair p = socket_pair();
  auth::ServerKeys keys;
  keys.shared.emplace(key_of(2));
  REQUIRE(keys.decoy_make().has_value());
  auto server = server_start(p.server, keys);
  HandRolledClient c;
  c.name = "no spaces";
  c.hello_challenge(p.client);
  CHECK_FALSE(
      auth::proof_verify(key_of(2), auth::Role::server, c.name, c.client_nonce, c.server_nonce, c.server_proof));
  send(p.client, proto::AuthProof{c.proof(key_of(2))});
  auto m = recv(p.client);
  CHECK(std::holds_alternative<proto::ErrorMsg>(m.decoded.message));
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == EACCES);
}

TEST_CASE("every unknown name is answered with the one decoy key made before the server ran") {
  const auth::ServerKeys keys = alice_only();
  for (const char* who : {"mallory", "no spaces", "line\nbreak"}) {
    SocketPair p = socket_pair();
    auto server = server_start(p.server, keys);
    HandRolledClient c;
    c.name = who;
    c.hello_challenge(p.client);
    CHECK(auth::proof_verify(*keys.decoy, auth::Role::server, c.name, c.client_nonce, c.server_nonce, c.server_proof));
    p.client.close();
    CHECK_FALSE(server.get().has_value());
  }
}

TEST_CASE("a name that is not valid is not echoed in the refusal or the error") {
  const auth::ServerKeys keys = alice_only();
  SocketPair p = socket_pair();
  auto server = server_start(p.server, keys);
  HandRolledClient c;
  c.name = "alice\nrpcie[1] exportd: info: forged";
  c.hello_challenge(p.client);
  send(p.client, proto::AuthProof{c.proof(key_of(1))});
  auto m = recv(p.client);
  const auto* e = std::get_if<proto::ErrorMsg>(&m.decoded.message);
  REQUIRE(e);
  CHECK(e->text == "authentication failed for an invalid client name");
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().message.find("forged") == std::string::npos);
  CHECK(has(name.error(), "authentication failed for an invalid client name from"));
}

TEST_CASE("server keys without a decoy refuse an unknown name before answering") {
  auth::ServerKeys keys;
  keys.clients.emplace("alice", key_of(1));
  SocketPair p = socket_pair();
  auto server = server_start(p.server, keys);
  send(p.client, proto::AuthHello{"mallory", auth::nonce_random()});
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == EINVAL);
  CHECK_FALSE(readable_now(p.client));
}

TEST_CASE("the client half refuses a name that is not valid with EINVAL before sending anything") {
  SocketPair p = socket_pair();
  auto client = auth::handshake_client(p.client, key_of(1), "no spaces", "exporter", soon());
  REQUIRE_FALSE(client.has_value());
  CHECK(client.error().code == EINVAL);
  CHECK_FALSE(readable_now(p.server));
}

// --- Malformed peers ------------------------------------------------------------------------

TEST_CASE("a server answers a first message that is not auth_hello with EACCES and that request id") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  auto server = server_start(p.server, keys);
  send(p.client, proto::ListRequest{}, 7);
  auto m = recv(p.client);
  auto* e = std::get_if<proto::ErrorMsg>(&m.decoded.message);
  REQUIRE(e != nullptr);
  CHECK(e->code == EACCES);
  CHECK(e->text == "authenticate first (auth_hello)");
  CHECK(m.decoded.header.request_id == 7);
  auto name = server.get();
  REQUIRE_FALSE(name.has_value());
  CHECK(name.error().code == EACCES);
  CHECK(has(name.error(), "peer sent list_request before authenticating"));
}

TEST_CASE("a server ends the handshake on a malformed or oversized frame with the socket's error") {
  const auth::ServerKeys keys = alice_only();
  SUBCASE("garbage where auth_hello should be") {
    SocketPair p = socket_pair();
    auto server = server_start(p.server, keys);
    Bytes garbage{40, 0, 0, 0};
    for (int i = 0; i < 40; ++i) garbage.push_back(static_cast<std::uint8_t>(0x41 + i));
    send_raw(p.client, garbage);
    auto name = server.get();
    REQUIRE_FALSE(name.has_value());
    CHECK(name.error().code == EPROTO);
  }
  SUBCASE("a length prefix over kMaxFrame") {
    SocketPair p = socket_pair();
    auto server = server_start(p.server, keys);
    send_raw(p.client, {0xff, 0xff, 0xff, 0xff});
    auto name = server.get();
    REQUIRE_FALSE(name.has_value());
    CHECK(name.error().code == EMSGSIZE);
  }
  SUBCASE("an auth_hello carrying the MAC flag before any key exists") {
    SocketPair p = socket_pair();
    auto server = server_start(p.server, keys);
    const auth::Nonce nc = auth::nonce_random();
    auto body = proto::message_encode(proto::AuthHello{"alice", nc}, 0);
    REQUIRE(body.has_value());
    (*body)[6] |= static_cast<std::uint8_t>(proto::kFlagMac);
    body->resize(body->size() + proto::kMacTrailer, 0);
    REQUIRE(p.client.frame_send_raw(*body, soon()).has_value());
    auto name = server.get();
    REQUIRE_FALSE(name.has_value());
    CHECK(name.error().code == EPROTO);
  }
  SUBCASE("a client that stalls: ETIMEDOUT at the deadline") {
    SocketPair p = socket_pair();
    auto server = server_start(p.server, keys, Deadline::after(100ms));
    auto name = server.get();
    REQUIRE_FALSE(name.has_value());
    CHECK(name.error().code == ETIMEDOUT);
  }
}

TEST_CASE("a client ends the handshake on a wrong, refused or malformed answer") {
  const auth::Key key = key_of(1);
  SocketPair p = socket_pair();
  auto client = std::async(std::launch::async,
                           [&] { return auth::handshake_client(p.client, key, "alice", "exporter", soon()); });
  const auto hello = recv(p.server);
  const auto* h = std::get_if<proto::AuthHello>(&hello.decoded.message);
  REQUIRE(h != nullptr);
  // A genuine challenge for alice's key: the client answers it with its proof.
  const auto genuine_challenge = [&] {
    const auth::Nonce ns = auth::nonce_random();
    send(p.server,
         proto::AuthChallenge{ns, auth::proof_compute(key, auth::Role::server, "alice", bytes_of(h->nonce), ns)});
    auto proof = recv(p.server);
    REQUIRE(std::holds_alternative<proto::AuthProof>(proof.decoded.message));
  };
  SUBCASE("an error message instead of the challenge: its code and text") {
    send(p.server, proto::ErrorMsg{EBUSY, "too many connections"});
    auto r = client.get();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EBUSY);
    CHECK(r.error().message == "exporter refused: too many connections");
  }
  SUBCASE("another message instead of the challenge: EPROTO naming it") {
    send(p.server, proto::AuthOk{});
    auto r = client.get();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EPROTO);
    CHECK(r.error().message == "authentication: unexpected auth_ok");
  }
  SUBCASE("garbage instead of the challenge: EPROTO") {
    Bytes garbage{24, 0, 0, 0};
    garbage.resize(4 + 24, 0x5a);
    send_raw(p.server, garbage);
    auto r = client.get();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EPROTO);
  }
  SUBCASE("a length prefix over kMaxFrame: EMSGSIZE") {
    send_raw(p.server, {0xff, 0xff, 0xff, 0x7f});
    auto r = client.get();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EMSGSIZE);
  }
  SUBCASE("the server's refusal of the proof: its code, 'authentication failed: ' and its text") {
    genuine_challenge();
    send(p.server, proto::ErrorMsg{EACCES, "authentication failed for client 'alice'"});
    auto r = client.get();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EACCES);
    CHECK(r.error().message == "authentication failed: authentication failed for client 'alice'");
    CHECK_FALSE(p.client.frame_mac_active());
  }
  SUBCASE("another message instead of auth_ok: EPROTO naming it") {
    genuine_challenge();
    send(p.server, proto::Heartbeat{1});
    auto r = client.get();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EPROTO);
    CHECK(r.error().message == "authentication: unexpected heartbeat");
  }
}

// --- auth_ok on the wire ------------------------------------------------------------------

TEST_CASE("auth_ok travels bare: 24 header bytes, flags 0, request id 0, no MAC trailer") {
  SocketPair p = socket_pair();
  const auth::ServerKeys keys = alice_only();
  auto server = server_start(p.server, keys);
  HandRolledClient c;
  c.hello_challenge(p.client);
  send(p.client, proto::AuthProof{c.proof(key_of(1))});
  const Bytes auth_ok = frame_raw_recv(p.client);
  const Bytes expected{0x52, 0x50, 0x43, 0x49, 0x01, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                       0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  CHECK(auth_ok == expected);
  auto name = server.get();
  REQUIRE(name.has_value());
  REQUIRE(p.server.frame_mac_active());

  // The server's first frame after it is its MAC sequence 0.
  send(p.server, proto::Heartbeat{9});
  const Bytes heartbeat = frame_raw_recv(p.client);
  REQUIRE(heartbeat.size() == proto::kHeaderSize + 8 + proto::kMacTrailer);
  const auto message = std::span(heartbeat).first(heartbeat.size() - proto::kMacTrailer);
  CHECK((message[6] & proto::kFlagMac) != 0);
  const auth::Key key = key_of(1);
  auth::FrameMac server_mac(auth::session_key_derive(key, "alice", c.client_nonce, c.server_nonce), auth::Role::server);
  std::array<std::uint8_t, auth::kMacBytes> mac{};
  server_mac.seal(message, mac);  // sequence 0
  CHECK(std::equal(mac.begin(), mac.end(), heartbeat.end() - proto::kMacTrailer));

  // And the client's first frame is its sequence 0 too.
  p.client.frame_mac_set(
      auth::FrameMac(auth::session_key_derive(key, "alice", c.client_nonce, c.server_nonce), auth::Role::client));
  send(p.client, proto::ListRequest{}, 1);
  auto request = recv(p.server);
  CHECK(std::holds_alternative<proto::ListRequest>(request.decoded.message));
  CHECK(p.server.frames_dropped() == 0);
}

TEST_CASE("the worked example of docs/protocol.md 13.9: auth_ok bare, then a heartbeat with MAC sequence 0") {
  std::array<std::uint8_t, auth::kKeyMinBytes> psk{};
  for (std::size_t i = 0; i < psk.size(); ++i) psk[i] = static_cast<std::uint8_t>(i);
  auto key = auth::Key::create(psk);
  REQUIRE(key.has_value());
  auth::Nonce nc{}, ns{};
  nc.fill(0xaa);
  ns.fill(0xbb);
  auto auth_ok = proto::message_encode(proto::AuthOk{}, 0);
  REQUIRE(auth_ok.has_value());
  CHECK(auth_ok->size() == 24);
  CHECK((*auth_ok)[6] == 0);
  auto heartbeat = proto::message_encode(proto::Heartbeat{1}, 0);
  REQUIRE(heartbeat.has_value());
  (*heartbeat)[6] |= static_cast<std::uint8_t>(proto::kFlagMac);
  auth::FrameMac mac_state(auth::session_key_derive(*key, "alice", nc, ns), auth::Role::server);
  std::array<std::uint8_t, auth::kMacBytes> mac{};
  mac_state.seal(*heartbeat, mac);
  const std::array<std::uint8_t, auth::kMacBytes> expected{
      0x64, 0xe5, 0x6c, 0x0a, 0xb4, 0x87, 0x21, 0xc9, 0x31, 0x45, 0xb4, 0xc7, 0x00, 0x11, 0x0f, 0x80,
      0xd9, 0x8b, 0x62, 0xf7, 0xa3, 0xa7, 0xb2, 0xd8, 0x83, 0x51, 0x32, 0xe9, 0x82, 0x3e, 0x21, 0x50};
  CHECK(mac == expected);
}
