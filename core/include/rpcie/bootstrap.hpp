// Bootstrap over TCP: how two rpcie peers find each other before the fabric is up.
//
// The bootstrap connection carries length-prefixed protocol messages (proto::FrameReader
// framing). It exchanges fabric addresses and memory-region descriptors (hello / hello_ack)
// so that RDM endpoints of any provider can talk, and later carries control traffic
// (listing, attach, leases, heartbeats). Authentication runs first, before hello (auth_hello,
// auth_challenge, auth_proof, auth_ok; docs/auth.md); from then on every frame carries a MAC
// (header flag bit 0).
//
// Every call takes a Deadline; nothing blocks past it. Sends use MSG_NOSIGNAL, and
// programs call signals_init() (process.hpp) so a peer that hangs up can never kill a daemon
// with SIGPIPE.
// Sockets are owned (RAII) and move-only; a Socket is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rpcie/auth.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

// A received message that owns its bytes (the decoded views point into them). Move-only.
struct OwnedMessage {
  std::vector<std::uint8_t> bytes;
  proto::Decoded decoded;
  OwnedMessage() = default;
  OwnedMessage(OwnedMessage&&) = default;
  OwnedMessage& operator=(OwnedMessage&&) = default;
  OwnedMessage(const OwnedMessage&) = delete;
  OwnedMessage& operator=(const OwnedMessage&) = delete;
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) noexcept : fd_(fd) {}
  // (The MAC state moves with the socket.)
  Socket(Socket&& o) noexcept;
  Socket& operator=(Socket&& o) noexcept;
  ~Socket();

  // TCP connect with TCP_NODELAY, bounded by the deadline.
  static Result<Socket> connect(const std::string& host, std::uint16_t port, Deadline deadline);

  int fd() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  void close() noexcept;
  // Gives up ownership of the descriptor without closing it.
  int release() noexcept;

  // Numeric local / peer IP address of the connection ("127.0.0.1", "169.254.0.1", ...).
  std::string local_address() const;
  std::string peer_address() const;

  // Whole-buffer I/O, bounded by the deadline. recv: ECONNRESET when the peer hung up.
  Result<void> bytes_send(std::span<const std::uint8_t> bytes, Deadline deadline);
  Result<void> bytes_recv(std::span<std::uint8_t> bytes, Deadline deadline);

  // One framed protocol message. With a frame MAC set, every frame carries the MAC
  // trailer (header flag kFlagMac); message_recv() drops a frame whose MAC does not verify
  // (counted in frames_dropped(), logged) and goes on reading, and refuses a frame without
  // the flag (EPROTO). Without a MAC, a frame with the flag is refused (EPROTO).
  Result<void> message_send(const proto::Message& message, std::uint64_t request_id, Deadline deadline);
  Result<OwnedMessage> message_recv(Deadline deadline);
  // Sends bytes as one frame exactly as given (tests that must put a bad frame on the wire).
  Result<void> frame_send_raw(std::span<const std::uint8_t> frame_body, Deadline deadline);

  // From now on, every frame in both directions is MACed (after authentication).
  void frame_mac_set(auth::FrameMac mac);
  bool frame_mac_active() const noexcept { return mac_ != nullptr; }
  // The frame MAC state (its session key derives the data-path keys), or null.
  const auth::FrameMac* frame_mac() const noexcept { return mac_.get(); }
  std::uint64_t frames_dropped() const noexcept { return frames_dropped_; }

 private:
  int fd_ = -1;
  std::unique_ptr<auth::FrameMac> mac_;
  std::uint64_t frames_dropped_ = 0;
};

class Listener {
 public:
  // Listens on address:port (SO_REUSEADDR; port 0 picks one). address "" means any.
  static Result<Listener> open(const std::string& address, std::uint16_t port);
  Listener(Listener&& o) noexcept;
  Listener& operator=(Listener&& o) noexcept;
  ~Listener();
  std::uint16_t port() const noexcept { return port_; }
  int fd() const noexcept { return fd_; }
  // Next connection, or ETIMEDOUT at the deadline.
  Result<Socket> accept(Deadline deadline);

 private:
  Listener() = default;
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// What one side tells the other in hello / hello_ack, owning its bytes.
struct PeerHello {
  std::string provider;
  std::string host;
  std::vector<std::uint8_t> fabric_address;
  std::vector<proto::RegionDescriptor> regions;
  std::uint8_t data_path = proto::kDataPathOpen;
};

// Builds the wire message from a PeerHello (views into `h`).
proto::Hello hello_view(const PeerHello& h);
PeerHello hello_copy(const proto::Hello& h);

}  // namespace rpcie
