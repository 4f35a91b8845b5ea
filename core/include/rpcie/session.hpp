// rpcie::Session — a bootstrapped connection to one peer: the TCP bootstrap socket, a
// Channel over a Fabric opened for this peer, the local memory regions offered to the peer,
// and the peer's regions.
//
// Handshake (client side, Session::connect):
//   1. TCP connect; choose the provider (explicit, or auto: efa > verbs > shm if the peer
//      is this host > tcp).
//   2. Open a Fabric bound to the bootstrap socket's local address, register the regions.
//   3. Send hello {provider, host, fabric address, regions}; receive hello_ack or error.
// Server side (Session::accept) receives the hello first, checks the provider (an explicit
// server provider must equal the client's; auto adopts the client's if usable here) and
// answers hello_ack, or an error message naming both providers.
//
// Ownership: the Session owns everything above; destruction releases the regions (keys
// revoked), then the channel and fabric, then the socket. Thread-safety: as Channel;
// bootstrap() is for one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rpcie/bootstrap.hpp"
#include "rpcie/channel.hpp"
#include "rpcie/data_path.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/providers/provider.hpp"

namespace rpcie {

struct LocalRegion {
  std::uint32_t id = 0;
  void* base = nullptr;
  std::size_t length = 0;
  std::uint64_t access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
};

struct SessionOptions {
  providers::ProviderChoice provider;  // auto unless set
  ChannelOptions channel;
  bool cq_wait_fd = false;    // see FabricOptions::cq_wait_fd
  bool source_check = false;  // see FabricOptions::source_check
  // The mode this side runs; both sides must agree (hello carries it; a mismatch is refused
  // with a message naming both). Decided beforehand: by the exporter at attach
  // (data_path_decide), or by the caller for a bare session (selftest, bench). Sealed needs
  // an authenticated socket (EPROTO otherwise): regions are then offered by id from the
  // channel's region table and never registered for remote access.
  DataPath data_path = DataPath::open;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> connect(const std::string& host, std::uint16_t port,
                                                  const SessionOptions& options, std::span<const LocalRegion> regions,
                                                  Deadline deadline);
  // The same handshake over a bootstrap connection that is already open (and possibly
  // authenticated: the socket keeps its frame MAC state).
  static Result<std::unique_ptr<Session>> connect_over(Socket socket, const SessionOptions& options,
                                                       std::span<const LocalRegion> regions, Deadline deadline);
  static Result<std::unique_ptr<Session>> accept(Socket socket, const SessionOptions& options,
                                                 std::span<const LocalRegion> regions, Deadline deadline);
  ~Session();

  Channel& channel() noexcept { return *channel_; }
  Socket& bootstrap() noexcept { return socket_; }
  const PeerHello& peer() const noexcept { return peer_; }
  DataPath data_path() const noexcept { return data_path_; }
  // Local region i (in the order given at creation).
  const MemoryRegion& region(std::size_t i) const noexcept { return regions_[i]; }
  // The peer's region with this id, or ENOENT.
  Result<RemoteRegion> peer_region(std::uint32_t id) const;

 private:
  Session() = default;
  // A session on `socket`, before any message: EINVAL for more than kMaxRegions regions.
  static Result<std::unique_ptr<Session>> socket_adopt(Socket socket, std::span<const LocalRegion> regions);
  Result<void> fabric_setup(const providers::ProviderAdapter& adapter, std::span<const LocalRegion> regions,
                            const SessionOptions& options);
  PeerHello hello_local() const;
  // Seals the channel's messages (authenticated socket) and, sealed, its RMA.
  Result<void> data_path_start(std::uint8_t peer_aead);

  Socket socket_;
  std::unique_ptr<Fabric> pending_fabric_;  // between fabric_setup and channel creation
  std::unique_ptr<Channel> channel_;
  std::vector<MemoryRegion> regions_;  // after channel_: destroyed first
  std::vector<std::uint32_t> region_ids_;
  std::vector<SealedRegion> sealed_regions_;  // sealed: the table the channel takes
  DataPath data_path_ = DataPath::open;
  PeerHello peer_;
};

// The provider a client uses toward the peer at `peer_address` (numeric): the explicit
// choice, or auto (efa > verbs > shm if the peer is this host > tcp). ENODEV if none is usable.
Result<const providers::ProviderAdapter*> session_provider_pick(const providers::ProviderChoice& choice,
                                                                const std::string& peer_address);

// Whether `address` (numeric) is a loopback address: the peer is this host.
bool address_is_loopback(const std::string& address);

}  // namespace rpcie
