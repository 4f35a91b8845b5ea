// Reading the exporter's answers on the bootstrap connection: an error message becomes an
// Error, anything but the expected message EPROTO. Internal to the client API.
#pragma once

#include <string>
#include <variant>

#include "rpcie/bootstrap.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie::client {

inline Error error_from(const proto::ErrorMsg& e, const std::string& context) {
  return Error{ErrorDomain::posix, e.code > 0 ? e.code : EPROTO, context + ": " + std::string(e.text)};
}

// Receives one bootstrap message and turns an error message into an Error.
inline Result<OwnedMessage> reply_recv(Socket& socket, Deadline deadline, const std::string& context) {
  RPCIE_TRY_ASSIGN(auto m, socket.message_recv(deadline));
  if (auto* e = std::get_if<proto::ErrorMsg>(&m.decoded.message)) return tl::unexpected(error_from(*e, context));
  return m;
}

// The message as a T (a pointer into `m`), else EPROTO naming what came instead.
template <class T>
Result<const T*> reply_as(const OwnedMessage& m, const char* context) {
  auto* p = std::get_if<T>(&m.decoded.message);
  if (!p) return fail(EPROTO, std::string(context) + ": unexpected " + proto::msg_type_name(m.decoded.header.type));
  return p;
}

}  // namespace rpcie::client
