#include "rpcie/session.hpp"

#include <cerrno>
#include <string>

#include "rpcie/log.hpp"
#include "rpcie/message_seal.hpp"
#include "rpcie/process.hpp"

namespace rpcie {
namespace {

const providers::ProviderAdapter* provider_by_fabric_name(std::string_view name) {
  for (auto* a : providers::provider_registry())
    if (a->fabric_name() == name) return a;
  return nullptr;
}

// A hello or hello_ack as received: on an authenticated connection opened from its
// envelope. `decoded` views into `plain` or into `outer`.
struct HelloReceived {
  OwnedMessage outer;
  std::vector<std::uint8_t> plain;
  proto::Decoded decoded;
  std::uint8_t peer_aead = 0;  // the peer's cipher offer (sealed only)
};

// Sends `hello` (a Hello or HelloAck) sealed when the connection is authenticated, else as
// it is.
Result<void> hello_send(Socket& socket, const proto::Message& hello, std::uint64_t request_id, Deadline deadline) {
  const auth::FrameMac* mac = socket.frame_mac();
  if (mac == nullptr) return socket.message_send(hello, request_id, deadline);
  RPCIE_TRY_ASSIGN(const auto bytes, proto::message_encode(hello, request_id));
  const auto key = mac->hello_key();
  const auto envelope = auth::envelope_seal(key.bytes, bytes);
  return socket.message_send(proto::SealedHello{auth::aead_offer_local(), envelope}, request_id, deadline);
}

// Receives the peer's next message; a sealed_hello is opened and its content decoded. On
// an authenticated connection a hello in clear is refused (it would have shown the keys
// to anyone watching), and on an unauthenticated one a sealed_hello cannot be opened.
Result<HelloReceived> hello_recv(Socket& socket, Deadline deadline) {
  HelloReceived r;
  RPCIE_TRY_ASSIGN(r.outer, socket.message_recv(deadline));
  const auth::FrameMac* mac = socket.frame_mac();
  const auto* sealed = std::get_if<proto::SealedHello>(&r.outer.decoded.message);
  const bool clear_hello = std::holds_alternative<proto::Hello>(r.outer.decoded.message) ||
                           std::holds_alternative<proto::HelloAck>(r.outer.decoded.message);
  if (sealed == nullptr) {
    if (mac != nullptr && clear_hello) return fail(EPROTO, "hello in clear on an authenticated connection");
    r.decoded = r.outer.decoded;
    return r;
  }
  if (mac == nullptr) return fail(EPROTO, "sealed hello on a connection that is not authenticated");
  const auto key = mac->hello_key();
  if (!auth::envelope_open(key.bytes, sealed->envelope, r.plain)) return fail(EPROTO, "sealed hello failed to open");
  RPCIE_TRY_ASSIGN(r.decoded, proto::message_decode(r.plain));
  if (!std::holds_alternative<proto::Hello>(r.decoded.message) &&
      !std::holds_alternative<proto::HelloAck>(r.decoded.message))
    return fail(EPROTO, std::string("sealed hello holds ") + proto::msg_type_name(r.decoded.header.type));
  r.peer_aead = sealed->aead;
  return r;
}

// The data-path mode both sides run must be the same: a mismatch is a configuration error
// (or a downgrade), refused by name.
Result<void> data_path_agree(DataPath mine, std::uint8_t peer) {
  auto theirs = data_path_from_wire(peer);
  if (!theirs) return tl::unexpected(theirs.error());
  if (*theirs != mine)
    return fail(EPROTO, std::string("data path mismatch: this side runs ") + data_path_name(mine) + ", the peer " +
                            data_path_name(*theirs));
  return {};
}

// On an authenticated connection every data-path message is sealed with keys from its
// session key, in the cipher both sides offer.
void channel_seal(Channel& channel, const Socket& socket, std::uint8_t peer_aead) {
  const auth::FrameMac* mac = socket.frame_mac();
  if (mac == nullptr) return;
  const auth::Aead aead = auth::aead_choose(auth::aead_offer_local(), peer_aead);
  channel.seal_set(std::make_unique<auth::MessageSeal>(aead, mac->data_keys()));
  RPCIE_LOG_DEBUG("session", "data-path messages sealed with {}", auth::aead_name(aead));
}

}  // namespace

Result<const providers::ProviderAdapter*> session_provider_pick(const providers::ProviderChoice& choice,
                                                                const std::string& peer_address) {
  if (!choice.automatic) return &providers::provider_get(choice.kind);
  auto* a = providers::provider_auto_select(
      [](const providers::ProviderAdapter& p) { return providers::provider_available(p); },
      address_is_loopback(peer_address));
  if (!a) return fail(ENODEV, "no usable libfabric provider on this host");
  return a;
}

bool address_is_loopback(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1" || address.rfind("::ffff:127.", 0) == 0;
}

Session::~Session() {
  regions_.clear();
  channel_.reset();
  pending_fabric_.reset();
}

Result<void> Session::fabric_setup(const providers::ProviderAdapter& adapter, std::span<const LocalRegion> regions,
                                   const SessionOptions& options) {
  FabricOptions fo;
  fo.adapter = &adapter;
  fo.node = socket_.local_address();
  fo.cq_wait_fd = options.cq_wait_fd;
  fo.source_check = options.source_check;
  if (options.data_path == DataPath::sealed && socket_.frame_mac() == nullptr)
    return fail(EPROTO, "the sealed data path needs an authenticated connection (a pre-shared key)");
  data_path_ = options.data_path;
  fo.rma = data_path_ == DataPath::open;
  auto f = Fabric::open(fo);
  if (!f) return tl::unexpected(f.error());
  pending_fabric_ = std::move(*f);
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const auto& r = regions[i];
    region_ids_.push_back(r.id);
    if (data_path_ == DataPath::sealed) {
      // Never registered: the peer reaches it only through this side's channel, by key.
      regions_.push_back(MemoryRegion::unregistered(r.base, r.length, i + 1));
      sealed_regions_.push_back({i + 1, static_cast<std::uint8_t*>(r.base), r.length, (r.access & FI_REMOTE_READ) != 0,
                                 (r.access & FI_REMOTE_WRITE) != 0});
      continue;
    }
    auto mr = MemoryRegion::create(*pending_fabric_, r.base, r.length, r.access);
    if (!mr) return tl::unexpected(mr.error());
    regions_.push_back(std::move(*mr));
  }
  return {};
}

Result<void> Session::data_path_start(std::uint8_t peer_aead) {
  channel_seal(*channel_, socket_, peer_aead);
  if (data_path_ == DataPath::sealed) return channel_->rma_seal(std::move(sealed_regions_));
  return {};
}

PeerHello Session::hello_local() const {
  PeerHello h;
  const Fabric& f = channel_ ? channel_->fabric() : *pending_fabric_;
  h.provider = std::string(f.adapter().fabric_name());
  h.host = host_name();
  h.fabric_address = f.address();
  h.data_path = static_cast<std::uint8_t>(data_path_);
  for (std::size_t i = 0; i < regions_.size(); ++i) h.regions.push_back(regions_[i].descriptor(region_ids_[i]));
  return h;
}

Result<std::unique_ptr<Session>> Session::socket_adopt(Socket socket, std::span<const LocalRegion> regions) {
  if (regions.size() > proto::kMaxRegions) return fail(EINVAL, "too many regions for one session");
  std::unique_ptr<Session> s(new Session());
  s->socket_ = std::move(socket);
  return s;
}

Result<std::unique_ptr<Session>> Session::connect(const std::string& host, std::uint16_t port,
                                                  const SessionOptions& options, std::span<const LocalRegion> regions,
                                                  Deadline deadline) {
  if (regions.size() > proto::kMaxRegions) return fail(EINVAL, "too many regions for one session");
  RPCIE_TRY_ASSIGN(Socket socket, Socket::connect(host, port, deadline));
  auto s = connect_over(std::move(socket), options, regions, deadline);
  if (s) RPCIE_LOG_INFO("session", "connected to {}:{} over {}", host, port, (*s)->peer_.provider);
  return s;
}

Result<std::unique_ptr<Session>> Session::connect_over(Socket socket, const SessionOptions& options,
                                                       std::span<const LocalRegion> regions, Deadline deadline) {
  RPCIE_TRY_ASSIGN(std::unique_ptr<Session> s, socket_adopt(std::move(socket), regions));
  RPCIE_TRY_ASSIGN(const auto* adapter, session_provider_pick(options.provider, s->socket_.peer_address()));
  RPCIE_TRY(s->fabric_setup(*adapter, regions, options));

  PeerHello local = s->hello_local();
  RPCIE_TRY(hello_send(s->socket_, hello_view(local), 0, deadline));
  RPCIE_TRY_ASSIGN(const auto reply, hello_recv(s->socket_, deadline));
  if (auto* e = std::get_if<proto::ErrorMsg>(&reply.decoded.message))
    return fail(e->code > 0 ? e->code : EPROTO, "peer refused: " + std::string(e->text));
  auto* ack = std::get_if<proto::HelloAck>(&reply.decoded.message);
  if (!ack)
    return fail(EPROTO, std::string("expected hello_ack, got ") + proto::msg_type_name(reply.decoded.header.type));
  if (ack->provider != local.provider)
    return fail(EPROTO,
                "provider mismatch: this side uses " + local.provider + ", peer uses " + std::string(ack->provider));
  s->peer_ = hello_copy(*ack);
  RPCIE_TRY(data_path_agree(s->data_path_, ack->data_path));

  RPCIE_TRY_ASSIGN(const auto peer, s->pending_fabric_->peer_insert(s->peer_.fabric_address));
  RPCIE_TRY_ASSIGN(s->channel_, Channel::create(std::move(s->pending_fabric_), peer, options.channel));
  RPCIE_TRY(s->data_path_start(reply.peer_aead));
  return s;
}

Result<std::unique_ptr<Session>> Session::accept(Socket socket, const SessionOptions& options,
                                                 std::span<const LocalRegion> regions, Deadline deadline) {
  RPCIE_TRY_ASSIGN(std::unique_ptr<Session> s, socket_adopt(std::move(socket), regions));
  auto first = hello_recv(s->socket_, deadline);
  if (!first) {
    // Tell a peer that speaks another version or sends garbage why, if it still listens.
    int code = first.error().code;
    if (code == EPROTO || code == EPROTONOSUPPORT || code == EMSGSIZE)
      (void)s->socket_.message_send(proto::ErrorMsg{code, first.error().message.substr(0, proto::kMaxErrorText)}, 0,
                                    Deadline::after(std::chrono::milliseconds(200)).min(deadline));
    return tl::unexpected(first.error());
  }
  auto* hello = std::get_if<proto::Hello>(&first->decoded.message);
  if (!hello) {
    (void)s->socket_.message_send(proto::ErrorMsg{EPROTO, "expected hello"}, first->decoded.header.request_id,
                                  deadline);
    return fail(EPROTO, std::string("expected hello, got ") + proto::msg_type_name(first->decoded.header.type));
  }
  s->peer_ = hello_copy(*hello);

  // Provider agreement: both sides must speak the same one, and say so by name if not.
  const providers::ProviderAdapter* adapter = provider_by_fabric_name(s->peer_.provider);
  std::string refusal;
  if (!options.provider.automatic) {
    const auto& mine = providers::provider_get(options.provider.kind);
    if (!adapter || adapter != &mine)
      refusal =
          "provider mismatch: peer uses " + s->peer_.provider + ", this side uses " + std::string(mine.fabric_name());
  } else if (!adapter) {
    refusal = "provider mismatch: peer uses " + s->peer_.provider + ", which this side does not know";
  } else if (!providers::provider_available(*adapter)) {
    refusal = "provider mismatch: peer uses " + s->peer_.provider + ", which is not usable on this side";
  }
  if (auto agreed = data_path_agree(options.data_path, hello->data_path); refusal.empty() && !agreed)
    refusal = agreed.error().message;
  if (!refusal.empty()) {
    (void)s->socket_.message_send(proto::ErrorMsg{EPROTO, refusal}, first->decoded.header.request_id, deadline);
    return fail(EPROTO, refusal);
  }

  auto setup = s->fabric_setup(*adapter, regions, options);
  if (!setup) {
    (void)s->socket_.message_send(proto::ErrorMsg{setup.error().to_errno(), "server fabric setup failed"},
                                  first->decoded.header.request_id, deadline);
    return tl::unexpected(setup.error());
  }
  auto peer = s->pending_fabric_->peer_insert(s->peer_.fabric_address);
  if (!peer) {
    (void)s->socket_.message_send(proto::ErrorMsg{EINVAL, "bad fabric address"}, first->decoded.header.request_id,
                                  deadline);
    return tl::unexpected(peer.error());
  }
  PeerHello local = s->hello_local();
  proto::HelloAck ack;
  static_cast<proto::Hello&>(ack) = hello_view(local);
  auto ch = Channel::create(std::move(s->pending_fabric_), *peer, options.channel);
  if (!ch) return tl::unexpected(ch.error());
  s->channel_ = std::move(*ch);
  RPCIE_TRY(s->data_path_start(first->peer_aead));
  auto sent = hello_send(s->socket_, ack, first->decoded.header.request_id, deadline);
  if (!sent) return tl::unexpected(sent.error());
  RPCIE_LOG_INFO("session", "accepted {} over {}", s->socket_.peer_address(), local.provider);
  return s;
}

Result<RemoteRegion> Session::peer_region(std::uint32_t id) const {
  for (const auto& r : peer_.regions)
    if (r.id == id) return RemoteRegion::from(r);
  return fail(ENOENT, "peer offers no region " + std::to_string(id));
}

}  // namespace rpcie
