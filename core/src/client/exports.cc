// Listing exports and the authenticated bootstrap connection every client call starts with.
// Contracts in client.hpp and client_protocol.hpp.
#include <algorithm>
#include <string>
#include <vector>

#include "exporter_reply.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/client.hpp"
#include "rpcie/client_protocol.hpp"
#include "rpcie/handshake.hpp"
#include "rpcie/process.hpp"
#include "rpcie/session.hpp"

namespace rpcie::client {

ExportDesc export_desc_from(const proto::ExportEntry& e) {
  ExportDesc d;
  d.name = std::string(e.name);
  d.backend = std::string(e.backend);
  d.holder = std::string(e.holder);
  d.vendor = e.vendor;
  d.device = e.device;
  d.class_code = e.class_code;
  d.subsystem_vendor = e.subsystem_vendor;
  d.subsystem_device = e.subsystem_device;
  d.revision = e.revision;
  d.attached = e.state == proto::ExportState::attached;
  d.shared = (e.flags & proto::kExportShared) != 0;
  d.mirror = (e.flags & proto::kExportMirror) != 0;
  d.data_path_policy = (e.flags & proto::kExportSealedOnly) != 0 ? DataPathChoice::sealed
                       : (e.flags & proto::kExportOpenOnly) != 0 ? DataPathChoice::open
                                                                 : DataPathChoice::automatic;
  d.vectors = e.vectors;
  for (const auto& b : e.bars)
    d.bars.push_back({b.bar, b.kind, b.size, (b.flags & proto::kBarFlag64) != 0,
                      (b.flags & proto::kBarFlagReadonly) != 0, (b.flags & proto::kBarFlagDirect) != 0});
  return d;
}

DataPath data_path_wanted(DataPathChoice choice, providers::ProviderKind kind, bool authenticated) noexcept {
  if (choice == DataPathChoice::automatic && !authenticated) return DataPath::open;
  return data_path_resolve(choice, kind);
}

DataPath export_data_path(const ExportDesc& e, providers::ProviderKind kind, bool authenticated,
                          DataPathChoice choice) noexcept {
  if (e.data_path_policy != DataPathChoice::automatic) return static_cast<DataPath>(e.data_path_policy);
  return data_path_wanted(choice, kind, authenticated);
}

const BarDesc* ExportDesc::bar_find(std::uint8_t bar) const noexcept {
  for (const auto& b : bars)
    if (b.bar == bar) return &b;
  return nullptr;
}

Result<Socket> exporter_connect(const std::string& host, std::uint16_t port, const ClientOptions& options,
                                Deadline deadline) {
  if (!options.key) return fail(EINVAL, "no key given");
  const std::string name = options.name.empty() ? host_name() : options.name;
  // Checked before connecting, so that a bad name costs no connection.
  if (!auth::client_name_valid(name)) return fail(EINVAL, "client name '" + name + "' is not valid");
  RPCIE_TRY_ASSIGN(Socket sock, Socket::connect(host, port, deadline));
  RPCIE_TRY(auth::handshake_client(sock, *options.key, name, host, deadline));
  return sock;
}

Result<std::vector<ExportDesc>> exports_list(const std::string& host, std::uint16_t port, const ClientOptions& options,
                                             Deadline deadline) {
  auto sock = exporter_connect(host, port, options, deadline);
  if (!sock) return tl::unexpected(sock.error());
  auto sent = sock->message_send(proto::ListRequest{}, 1, deadline);
  if (!sent) return tl::unexpected(sent.error());
  auto m = reply_recv(*sock, deadline, "list refused");
  if (!m) return tl::unexpected(m.error());
  auto list = reply_as<proto::ListReply>(*m, "list");
  if (!list) return tl::unexpected(list.error());
  // The provider an attach would use from here, for the mode each export would run.
  auto provider = session_provider_pick(options.provider, sock->peer_address());
  const bool authenticated = sock->frame_mac() != nullptr;
  std::vector<ExportDesc> out;
  for (const auto& e : (*list)->exports) {
    out.push_back(export_desc_from(e));
    if (provider)
      out.back().data_path = export_data_path(out.back(), (*provider)->kind(), authenticated, options.data_path);
  }
  (void)sock->message_send(proto::Goodbye{}, 2, Deadline::after(std::chrono::milliseconds(200)).min(deadline));
  return out;
}

}  // namespace rpcie::client
