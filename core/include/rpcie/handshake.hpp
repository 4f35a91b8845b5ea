// The authentication handshake of a bootstrap connection, both halves: the client's (the
// client API's exporter_connect) and the server's (rpcie-exportd). docs/auth.md section 2
// and docs/protocol.md section 7.1 give it on the wire; auth.hpp gives the primitives.
//
//   client                                                 server
//     auth_hello {name, Nc}                      rid 0  -->    key for name (or a decoy), Ns
//                      <--  auth_challenge {Ns, proof(server)}  rid 0
//     verifies proof(server), else stops (EACCES)
//     auth_proof {proof(client)}                 rid 0  -->    verifies proof(client)
//                      <--  auth_ok (empty, no MAC)  rid 0     or error EACCES, rid 0
//     frame MAC set on both sockets: every later frame, both ways, carries one; each
//     side's first MACed frame has its send sequence 0.
//
// Contract common to both halves:
//  - The server proves first: the client sends its proof only once the server's proof has
//    verified, so a client never hands a proof to a server that has not shown it holds the
//    key.
//  - Every frame of the handshake, auth_ok included, travels without a MAC. The frame MAC
//    (auth::FrameMac, keyed with session_key_derive) is set on the socket only on success,
//    after auth_ok has been sent (server) or received (client).
//  - One deadline bounds the whole handshake. On failure the socket is left as it is (no
//    MAC set, possibly mid-stream): the caller closes it.
//  - Errors: EACCES for a proof that fails on either side, and on the server for a first
//    message that is not auth_hello; EPROTO for another unexpected message; an error message
//    from the server reaches the client as its code (EPROTO if it has none) and text;
//    transport errors as the socket reports them (ECONNRESET when the peer closed,
//    ETIMEDOUT at the deadline, EPROTO or EMSGSIZE for a malformed or oversized frame).
//    Error texts name the client and the peer, never key material.
//  - Nothing is logged here: the caller decides (rpcie-exportd logs a failed handshake at
//    warn with the peer's address; the client API hands the error to its caller).
//  - A socket is used by one thread during its handshake. Different sockets may run their
//    handshakes at once, sharing one const ServerKeys.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie::auth {

// The keys a server accepts. Filled before the server runs, then only read.
struct ServerKeys {
  std::map<std::string, Key, std::less<>> clients;  // each client's own key, by name
  std::optional<Key> shared;                        // for any valid name not in `clients`
  // The key nobody has, with which the server answers every name it has no key for (made
  // once, by decoy_make(), before the server runs; handshake_server needs it).
  std::optional<Key> decoy;
  // The key for `name`: its own, else the shared key if `name` passes client_name_valid,
  // else null.
  const Key* find(std::string_view name) const noexcept;
  // Draws `decoy` from random bytes (kKeyMinBytes). ENOMEM when no secure memory can be had.
  Result<void> decoy_make();
};

// The client half, on a freshly connected `socket`: proves that this client, `name`, holds
// `key`, after the server has proved it too. `server` names the server in error messages
// (the host the caller connected to). EINVAL, before anything is sent, when `name` fails
// client_name_valid. EACCES when the server's proof fails (wrong key, or a name the server
// does not know): the client's proof is then never sent. An error message from the server
// is returned as its error, the text prefixed "exporter refused: " before the challenge and
// "authentication failed: " after the proof.
Result<void> handshake_client(Socket& socket, const Key& key, std::string_view name, std::string_view server,
                              Deadline deadline);

// The server half, on a freshly accepted `socket`. Returns the authenticated client's name.
//  - First message not auth_hello: answered with error (EACCES, "authenticate first
//    (auth_hello)", that message's request id); returns EACCES.
//  - Client proof wrong, missing (any other message instead) or made against a decoy:
//    answered with error (EACCES, "authentication failed for client 'NAME'", request id 0);
//    returns EACCES naming the client and the peer address. A name that fails
//    client_name_valid is never echoed (it came from the peer and may hold any byte): the
//    text then says "an invalid client name" instead of 'NAME'.
//  - A name `keys` has no key for gets the same answer as a known one: an auth_challenge of
//    the same size, its proof made with `keys.decoy` (made once at start, never per
//    connection), then the wait for the client's proof and the refusal above. So the
//    messages do not tell which names exist, and the work is the same: one lookup, one
//    proof. The client's check of the decoy proof fails as for a wrong key. EINVAL (nothing
//    sent) for such a name when `keys.decoy` was never made: a server bug.
Result<std::string> handshake_server(Socket& socket, const ServerKeys& keys, Deadline deadline);

}  // namespace rpcie::auth
