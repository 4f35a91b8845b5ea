// The client API one level down, for tools and tests that speak the protocol themselves
// (rpcie-devcheck, benchmarks): the authenticated bootstrap connection that every client.hpp
// call starts with, and the conversion of the wire's export entries. Applications use
// client.hpp alone.
#pragma once

#include <cstdint>
#include <string>

#include "rpcie/bootstrap.hpp"
#include "rpcie/client.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie::client {

// Opens an authenticated bootstrap connection to the exporter (docs/auth.md): the exporter
// proves the key first, then the client; every later frame carries a MAC. EACCES when
// either side's proof fails, EINVAL without a key or with an invalid client name.
Result<Socket> exporter_connect(const std::string& host, std::uint16_t port, const ClientOptions& options,
                                Deadline deadline);

// An export as the client API describes it, from its list_reply / attach_reply entry
// (ExportDesc::data_path left empty: the entry does not say which mode a client gets).
ExportDesc export_desc_from(const proto::ExportEntry& e);

// The mode a client whose choice is `choice` asks for in its attach_request over provider
// `kind`: its choice, else the provider's default, open when the bootstrap connection is not
// authenticated.
DataPath data_path_wanted(DataPathChoice choice, providers::ProviderKind kind, bool authenticated) noexcept;

}  // namespace rpcie::client
