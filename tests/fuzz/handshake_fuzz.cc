// libFuzzer target: both halves of the authentication handshake (rpcie/handshake.hpp), each
// against a fuzzed peer over a socketpair (the peer runs on a thread of its own: it needs
// the other side's nonce to make a genuine proof).
//
// Input: byte 0 picks the half under test (bit 0: 0 server, 1 client) and the peer's key
// (bits 1-2: the right key, a wrong key, the shared key, none). Then one step byte per
// handshake message the peer sends, each followed by what it needs:
//   step & 3 == 0: the genuine message (right nonce, a proof made with the peer's key);
//            == 1: a raw frame: u16 LE length, then that many bytes (the frame's body);
//            == 2: the genuine message with one bit flipped (u16 LE bit index);
//            == 3: the peer closes the connection.
//   A server peer's last step sends auth_ok (genuine), an error (raw/flipped) or closes.
// The peer's name comes from a table indexed by byte 1 (alice with her own key, bob under
// the shared key, a name without a key, an invalid name).
//
// Checks, beyond the sanitizers':
//  - the server half authenticates only a peer that sent a genuine proof made with the
//    key it holds for that name, and then returns that name; the client half succeeds
//    only after a genuine challenge made with its key;
//  - the client never sends its proof to a server whose proof did not verify;
//  - on success both sides hold the same session key: a MACed heartbeat from each opens
//    on the other;
//  - every failure of the server half is one of the documented codes (EACCES, EPROTO,
//    EMSGSIZE, EPROTONOSUPPORT, ECONNRESET, EPIPE; never ETIMEDOUT: the peer always answers
//    or closes); the client half may also fail with the code of a server's error message.
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "fuzz_check.hpp"
#include "rpcie/handshake.hpp"
#include "rpcie/process.hpp"

namespace {

using namespace rpcie;
using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) fuzz::die("handshake_fuzz", what, detail);
}

struct Input {
  std::span<const std::uint8_t> rest;
  std::uint8_t byte() {
    if (rest.empty()) return 3;  // out of input: the peer closes
    const std::uint8_t b = rest[0];
    rest = rest.subspan(1);
    return b;
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(byte() | (byte() << 8)); }
  Bytes take(std::size_t n) {
    n = std::min(n, rest.size());
    Bytes out(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n));
    rest = rest.subspan(n);
    return out;
  }
};

auth::Key key_of(std::uint8_t fill) {
  std::array<std::uint8_t, auth::kKeyMinBytes> bytes{};
  bytes.fill(fill);
  auto k = auth::Key::create(bytes);
  check(k.has_value(), "Key::create failed");
  return std::move(*k);
}

const auth::ServerKeys& server_keys() {
  static const auth::ServerKeys* keys = [] {
    auto* k = new auth::ServerKeys;
    k->clients.emplace("alice", key_of(1));
    k->shared.emplace(key_of(2));
    check(k->decoy_make().has_value(), "decoy_make failed");
    return k;
  }();
  return *keys;
}

const char* const kNames[] = {"alice", "bob", "mallory", "bad name\n"};

// The key the peer uses: byte 0 bits 1-2 (right for its name, wrong, shared, none).
const auth::Key* peer_key(std::uint8_t pick, const std::string& name) {
  static const auth::Key alice = key_of(1), shared = key_of(2), wrong = key_of(3);
  switch ((pick >> 1) & 3) {
    case 0:
      return name == "alice" ? &alice : &shared;
    case 1:
      return &wrong;
    case 2:
      return &shared;
    default:
      return nullptr;
  }
}

Deadline soon() { return Deadline::after(2s); }

// Whether `body` (a frame as sent) carries `m`: it decodes to the same message, whatever
// its request id (the handshake does not look at it).
bool carries(std::span<const std::uint8_t> body, const proto::Message& m) {
  auto d = proto::message_decode(body);
  if (!d) return false;
  auto a = proto::message_encode(d->message, 0);
  auto b = proto::message_encode(m, 0);
  return a && b && *a == *b;
}

enum class Sent { closed, fake, genuine };

// Sends `m`, or its fuzzed variant per `step`; says whether what went carries `m`.
Sent peer_send(Socket& s, std::uint8_t step, const proto::Message& m, Input& in) {
  switch (step & 3) {
    case 0:
      (void)s.message_send(m, 0, soon());
      return Sent::genuine;
    case 1: {
      const std::size_t n = in.u16();
      const Bytes body = in.take(n);
      (void)s.frame_send_raw(body, soon());
      return carries(body, m) ? Sent::genuine : Sent::fake;
    }
    case 2: {
      auto bytes = proto::message_encode(m, 0);
      check(bytes.has_value(), "encoding the peer's message failed");
      const std::size_t bit = in.u16() % (bytes->size() * 8);
      (*bytes)[bit / 8] = static_cast<std::uint8_t>((*bytes)[bit / 8] ^ (1u << (bit % 8)));
      (void)s.frame_send_raw(*bytes, soon());
      return carries(*bytes, m) ? Sent::genuine : Sent::fake;
    }
    default:
      s.close();
      return Sent::closed;
  }
}

bool documented(int code) {
  return code == EACCES || code == EPROTO || code == EMSGSIZE || code == ECONNRESET || code == EPIPE ||
         code == EPROTONOSUPPORT;
}

// Each side's heartbeat opens on the other: the two session keys are the same.
void keys_agree(Socket& a, Socket& b) {
  check(a.message_send(proto::Heartbeat{7}, 0, soon()).has_value(), "heartbeat send after the handshake failed");
  auto got = b.message_recv(soon());
  check(got.has_value() && std::holds_alternative<proto::Heartbeat>(got->decoded.message),
        "a MACed heartbeat did not open on the other side (session keys differ)");
  check(b.message_send(proto::Heartbeat{8}, 0, soon()).has_value(), "heartbeat send after the handshake failed");
  got = a.message_recv(soon());
  check(got.has_value() && std::holds_alternative<proto::Heartbeat>(got->decoded.message),
        "a MACed heartbeat did not open on the other side (session keys differ)");
}

void server_under_test(Socket& server, Socket& peer, std::uint8_t pick, Input& in) {
  const std::string name = kNames[in.byte() % 4];
  const auth::Key* key = peer_key(pick, name);
  const auth::Nonce nc = auth::nonce_random();
  bool genuine_proof = false;
  std::optional<auth::Nonce> ns;
  std::thread t([&] {
    if (peer_send(peer, in.byte(), proto::AuthHello{name, nc}, in) == Sent::closed) return;
    auto challenge = peer.message_recv(soon());
    if (!challenge) return;
    const auto* c = std::get_if<proto::AuthChallenge>(&challenge->decoded.message);
    if (!c) return;
    auth::Nonce server_nonce{};
    std::memcpy(server_nonce.data(), c->nonce.data(), server_nonce.size());
    ns = server_nonce;
    auth::Proof proof{};
    if (key) proof = auth::proof_compute(*key, auth::Role::client, name, nc, server_nonce);
    const Sent sent = peer_send(peer, in.byte(), proto::AuthProof{proof}, in);
    genuine_proof = sent == Sent::genuine && key != nullptr;
    if (sent == Sent::closed) return;
    (void)peer.message_recv(soon());  // auth_ok or the refusal
  });
  auto r = auth::handshake_server(server, server_keys(), soon());
  if (!r) {
    check(documented(r.error().code), "the server half failed with an undocumented code", r.error().describe());
    server.close();
    t.join();
    return;
  }
  t.join();
  check(*r == name, "the server authenticated another name than the peer's", *r);
  // A genuine proof with the key the server holds for this name, and nothing else, passes.
  const auth::Key* held = server_keys().find(name);
  check(genuine_proof && held != nullptr && key != nullptr &&
            std::equal(held->bytes().begin(), held->bytes().end(), key->bytes().begin(), key->bytes().end()),
        "the server authenticated a peer without a genuine proof of the key it holds for the name", name);
  check(ns.has_value(), "success without a challenge");
  peer.frame_mac_set(auth::FrameMac(auth::session_key_derive(*key, name, nc, *ns), auth::Role::client));
  keys_agree(server, peer);
}

void client_under_test(Socket& client, Socket& peer, std::uint8_t pick, Input& in) {
  const std::string name = kNames[in.byte() % 2];  // a valid name: the client refuses others before sending
  static const auth::Key client_key = key_of(1);
  const auth::Key* key = peer_key(pick, "alice");  // the server's key for the client
  bool genuine_challenge = false;
  bool proof_sent = false;
  std::optional<auth::Nonce> nc;
  auth::Nonce ns = auth::nonce_random();
  std::thread t([&] {
    auto hello = peer.message_recv(soon());
    if (!hello) return;
    const auto* h = std::get_if<proto::AuthHello>(&hello->decoded.message);
    check(h != nullptr, "the client's first message is not auth_hello");
    auth::Nonce client_nonce{};
    std::memcpy(client_nonce.data(), h->nonce.data(), client_nonce.size());
    nc = client_nonce;
    auth::Proof proof{};
    if (key) proof = auth::proof_compute(*key, auth::Role::server, name, client_nonce, ns);
    const Sent sent = peer_send(peer, in.byte(), proto::AuthChallenge{ns, proof}, in);
    genuine_challenge = sent == Sent::genuine && key != nullptr;
    if (sent == Sent::closed) return;
    auto answer = peer.message_recv(soon());
    if (!answer) return;
    if (std::holds_alternative<proto::AuthProof>(answer->decoded.message)) proof_sent = true;
    const std::uint8_t last = in.byte();
    if ((last & 3) == 0)
      (void)peer.message_send(proto::AuthOk{}, 0, soon());
    else if ((last & 3) == 3)
      peer.close();
    else
      (void)peer_send(peer, last, proto::ErrorMsg{EACCES, "refused"}, in);
  });
  auto r = auth::handshake_client(client, client_key, name, "peer", soon());
  const bool right_key = key != nullptr && std::equal(key->bytes().begin(), key->bytes().end(),
                                                      client_key.bytes().begin(), client_key.bytes().end());
  if (!r) {
    // An error message from the server reaches the client as its code, whatever it is.
    check(r.error().code > 0, "the client half failed with a code <= 0", r.error().describe());
    client.close();
    t.join();
    check(!proof_sent || (genuine_challenge && right_key), "the client sent its proof to a server that did not prove");
    return;
  }
  t.join();
  check(genuine_challenge && right_key, "the client authenticated a server without a genuine proof of its key");
  check(nc.has_value(), "success without a hello");
  peer.frame_mac_set(auth::FrameMac(auth::session_key_derive(client_key, name, *nc, ns), auth::Role::server));
  keys_agree(client, peer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool once = [] {
    signals_init();  // a write to a closed peer is EPIPE, not a signal
    return true;
  }();
  (void)once;
  if (size == 0) return 0;
  int fds[2];
  check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "socketpair failed");
  Socket under(fds[0]), peer(fds[1]);
  Input in{std::span(data + 1, size - 1)};
  if (data[0] & 1)
    client_under_test(under, peer, data[0], in);
  else
    server_under_test(under, peer, data[0], in);
  return 0;
}
