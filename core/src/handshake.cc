// Both halves of the bootstrap authentication: see rpcie/handshake.hpp for the contract.
#include "rpcie/handshake.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <variant>

#include "client/exporter_reply.hpp"

namespace rpcie::auth {

namespace {

static_assert(kNonceBytes == proto::kAuthBytes && kMacBytes == proto::kAuthBytes);

// A nonce or proof as it came off the wire (the codec has checked its length).
std::array<std::uint8_t, proto::kAuthBytes> auth_bytes(std::span<const std::uint8_t> wire) {
  std::array<std::uint8_t, proto::kAuthBytes> out{};
  std::copy_n(wire.begin(), std::min(wire.size(), out.size()), out.begin());
  return out;
}

}  // namespace

const Key* ServerKeys::find(std::string_view name) const noexcept {
  if (auto it = clients.find(name); it != clients.end()) return &it->second;
  if (shared && client_name_valid(name)) return &*shared;
  return nullptr;
}

Result<void> ServerKeys::decoy_make() {
  const Nonce junk = nonce_random();  // kNonceBytes == kKeyMinBytes random bytes
  static_assert(kNonceBytes >= kKeyMinBytes);
  RPCIE_TRY_ASSIGN(auto k, Key::create(junk));
  decoy.emplace(std::move(k));
  return {};
}

Result<void> handshake_client(Socket& socket, const Key& key, std::string_view name, std::string_view server,
                              Deadline deadline) {
  const std::string who(name);
  if (!client_name_valid(name)) return fail(EINVAL, "client name '" + who + "' is not valid");
  const Nonce client_nonce = nonce_random();
  RPCIE_TRY(socket.message_send(proto::AuthHello{name, client_nonce}, 0, deadline));
  RPCIE_TRY_ASSIGN(const OwnedMessage challenge_msg, client::reply_recv(socket, deadline, "exporter refused"));
  RPCIE_TRY_ASSIGN(const proto::AuthChallenge* challenge,
                   client::reply_as<proto::AuthChallenge>(challenge_msg, "authentication"));
  const Nonce server_nonce = auth_bytes(challenge->nonce);
  if (!proof_verify(key, Role::server, name, client_nonce, server_nonce, auth_bytes(challenge->proof)))
    return fail(EACCES, "authentication failed: " + std::string(server) + " did not prove the key for client '" + who +
                            "' (wrong key, or the exporter does not know this client)");
  const Proof mine = proof_compute(key, Role::client, name, client_nonce, server_nonce);
  RPCIE_TRY(socket.message_send(proto::AuthProof{mine}, 0, deadline));
  RPCIE_TRY_ASSIGN(const OwnedMessage ok, client::reply_recv(socket, deadline, "authentication failed"));
  RPCIE_TRY(client::reply_as<proto::AuthOk>(ok, "authentication"));
  socket.frame_mac_set(FrameMac(session_key_derive(key, name, client_nonce, server_nonce), Role::client));
  return {};
}

Result<std::string> handshake_server(Socket& socket, const ServerKeys& keys, Deadline deadline) {
  RPCIE_TRY_ASSIGN(const OwnedMessage first, socket.message_recv(deadline));
  const auto* hello = std::get_if<proto::AuthHello>(&first.decoded.message);
  if (!hello) {
    (void)socket.message_send(proto::ErrorMsg{EACCES, "authenticate first (auth_hello)"},
                              first.decoded.header.request_id, deadline);
    return fail(EACCES,
                std::string("peer sent ") + proto::msg_type_name(first.decoded.header.type) + " before authenticating");
  }
  const std::string name(hello->client);
  // The name as it may appear in texts: a peer's bytes that fail the name rule are not echoed.
  const std::string who = client_name_valid(name) ? "client '" + name + "'" : std::string("an invalid client name");
  const Nonce client_nonce = auth_bytes(hello->nonce);
  const Key* key = keys.find(name);
  // Unknown: the same answer as for a known name, with the key nobody has (made once at
  // start): the client's check of our proof fails, and the reply does not tell which names
  // exist.
  if (!key && !keys.decoy) return fail(EINVAL, "server keys without a decoy key (ServerKeys::decoy_make)");
  const Key& use = key ? *key : *keys.decoy;
  const Nonce server_nonce = nonce_random();
  const Proof mine = proof_compute(use, Role::server, name, client_nonce, server_nonce);
  RPCIE_TRY(socket.message_send(proto::AuthChallenge{server_nonce, mine}, 0, deadline));
  RPCIE_TRY_ASSIGN(const OwnedMessage answer, socket.message_recv(deadline));
  const auto* proof = std::get_if<proto::AuthProof>(&answer.decoded.message);
  if (!key || !proof || !proof_verify(use, Role::client, name, client_nonce, server_nonce, auth_bytes(proof->proof))) {
    (void)socket.message_send(proto::ErrorMsg{EACCES, "authentication failed for " + who}, 0, deadline);
    return fail(EACCES, "authentication failed for " + who + " from " + socket.peer_address());
  }
  RPCIE_TRY(socket.message_send(proto::AuthOk{}, 0, deadline));
  socket.frame_mac_set(FrameMac(session_key_derive(use, name, client_nonce, server_nonce), Role::server));
  return name;
}

}  // namespace rpcie::auth
