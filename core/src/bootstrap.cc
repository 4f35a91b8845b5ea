#include "rpcie/bootstrap.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include "rpcie/fd.hpp"
#include "rpcie/log.hpp"

namespace rpcie {
namespace {

std::string sockaddr_text(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, &ss, sizeof in);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
  } else if (ss.ss_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, &ss, sizeof in6);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
  }
  return text;
}

}  // namespace

// --- Socket ---

Socket::Socket(Socket&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), mac_(std::move(o.mac_)), frames_dropped_(o.frames_dropped_) {}
Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = std::exchange(o.fd_, -1);
    mac_ = std::move(o.mac_);
    frames_dropped_ = o.frames_dropped_;
  }
  return *this;
}

void Socket::frame_mac_set(auth::FrameMac mac) { mac_ = std::make_unique<auth::FrameMac>(std::move(mac)); }
Socket::~Socket() { close(); }
int Socket::release() noexcept { return std::exchange(fd_, -1); }

void Socket::close() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Socket> Socket::connect(const std::string& host, std::uint16_t port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc) return fail(EHOSTUNREACH, "cannot resolve '" + host + "': " + gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(list, ::freeaddrinfo);
  Error last{ErrorDomain::posix, EHOSTUNREACH, "no address for " + host};
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!s.valid()) {
      last = Error{ErrorDomain::posix, errno, "socket"};
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Error{ErrorDomain::posix, errno, "connect to " + host + ":" + service};
        continue;
      }
      auto w = fd_wait(s.fd(), POLLOUT, deadline, "connecting");
      if (!w) return tl::unexpected(Error{w.error().domain, w.error().code, "connect to " + host + ":" + service});
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err) {
        last = Error{ErrorDomain::posix, err, "connect to " + host + ":" + service};
        continue;
      }
    }
    return s;
  }
  return tl::unexpected(last);
}

std::string Socket::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return sockaddr_text(ss);
}

std::string Socket::peer_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return sockaddr_text(ss);
}

Result<void> Socket::bytes_send(std::span<const std::uint8_t> bytes, Deadline deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto w = fd_wait(fd_, POLLOUT, deadline, "sending on the bootstrap connection");
      if (!w) return w;
      continue;
    }
    return fail(n < 0 ? errno : EPIPE, "send on the bootstrap connection");
  }
  return {};
}

Result<void> Socket::bytes_recv(std::span<std::uint8_t> bytes, Deadline deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::recv(fd_, bytes.data() + done, bytes.size() - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return fail(ECONNRESET, "peer closed the bootstrap connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      auto w = fd_wait(fd_, POLLIN, deadline, "receiving on the bootstrap connection");
      if (!w) return w;
      continue;
    }
    return fail(errno, "recv on the bootstrap connection");
  }
  return {};
}

namespace {
constexpr std::size_t kHeaderFlagsAt = 6;  // docs/protocol.md: flags u16 at byte 6
}

Result<void> Socket::message_send(const proto::Message& message, std::uint64_t request_id, Deadline deadline) {
  const std::size_t size = proto::message_encoded_size(message);
  const std::size_t body = size + (mac_ ? proto::kMacTrailer : 0);
  std::vector<std::uint8_t> frame(proto::kFramePrefix + body);
  for (std::size_t i = 0; i < proto::kFramePrefix; ++i) frame[i] = static_cast<std::uint8_t>(body >> (8 * i));
  auto msg = std::span(frame).subspan(proto::kFramePrefix, size);
  auto n = proto::message_encode(message, request_id, msg);
  if (!n) return tl::unexpected(n.error());
  if (mac_) {
    msg[kHeaderFlagsAt] |= static_cast<std::uint8_t>(proto::kFlagMac);
    mac_->seal(msg, std::span(frame).subspan(proto::kFramePrefix + size).first<proto::kMacTrailer>());
  }
  return bytes_send(frame, deadline);
}

Result<void> Socket::frame_send_raw(std::span<const std::uint8_t> frame_body, Deadline deadline) {
  if (frame_body.size() > proto::kMaxFrame) return fail(EMSGSIZE, "frame over the cap");
  std::vector<std::uint8_t> frame(proto::kFramePrefix + frame_body.size());
  for (std::size_t i = 0; i < proto::kFramePrefix; ++i)
    frame[i] = static_cast<std::uint8_t>(frame_body.size() >> (8 * i));
  std::copy(frame_body.begin(), frame_body.end(), frame.begin() + proto::kFramePrefix);
  return bytes_send(frame, deadline);
}

Result<OwnedMessage> Socket::message_recv(Deadline deadline) {
  // Read exactly what the frame reader asks for: never past this frame, never more than one
  // maximal frame in memory.
  proto::FrameReader reader;
  std::uint8_t chunk[4096];
  for (;;) {
    auto frame = reader.next();
    if (!frame) return tl::unexpected(frame.error());
    if (!frame->empty()) {
      std::span<const std::uint8_t> msg = *frame;
      if (mac_) {
        if (msg.size() < proto::kHeaderSize + proto::kMacTrailer) return fail(EPROTO, "frame too short for its MAC");
        auto body = msg.first(msg.size() - proto::kMacTrailer);
        if (!mac_->open(body, msg.last(proto::kMacTrailer))) {
          // A forged or corrupted frame: drop it and keep the stream (the MAC's sequence
          // number did not advance, so the next genuine frame still verifies).
          // Logged at a bounded rate for the whole process: an injector can send frames
          // far faster than anyone reads a log.
          ++frames_dropped_;
          static LogLimiter limiter;
          RPCIE_LOG_LIMITED(limiter, LogLevel::warn, "bootstrap", "dropped a frame from {} whose MAC does not verify",
                            peer_address());
          continue;
        }
        msg = body;
      }
      OwnedMessage m;
      m.bytes.assign(msg.begin(), msg.end());
      auto d = proto::message_decode(m.bytes);
      if (!d) return tl::unexpected(d.error());
      if (((d->header.flags & proto::kFlagMac) != 0) != (mac_ != nullptr))
        return fail(EPROTO,
                    mac_ ? "frame without a MAC on an authenticated connection" : "MAC flag before authentication");
      m.decoded = std::move(*d);
      return m;
    }
    std::size_t want = std::min(reader.wanted(), sizeof chunk);
    auto r = bytes_recv(std::span(chunk, want), deadline);
    if (!r) return tl::unexpected(r.error());
    reader.feed(std::span<const std::uint8_t>(chunk, want));
  }
}

// --- Listener ---

Result<Listener> Listener::open(const std::string& address, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(address.empty() ? nullptr : address.c_str(), service.c_str(), &hints, &list);
  if (rc) return fail(EADDRNOTAVAIL, "cannot resolve listen address '" + address + "': " + gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(list, ::freeaddrinfo);
  Error last{ErrorDomain::posix, EADDRNOTAVAIL, "no listen address"};
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last = Error{ErrorDomain::posix, errno, "socket"};
      continue;
    }
    Socket guard(fd);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // The longest backlog the kernel allows (net.core.somaxconn): a burst of connections
    // then waits in the queue for the accept loop instead of having its handshakes dropped
    // and retried a second later.
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last = Error{ErrorDomain::posix, errno,
                   "listen on " + (address.empty() ? std::string("*") : address) + ":" + service};
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    Listener l;
    l.port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    l.fd_ = fd;
    guard.release();  // ownership moves to the listener
    return l;
  }
  return tl::unexpected(last);
}

Listener::Listener(Listener&& o) noexcept : fd_(std::exchange(o.fd_, -1)), port_(o.port_) {}
Listener& Listener::operator=(Listener&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    port_ = o.port_;
  }
  return *this;
}
Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Socket> Listener::accept(Deadline deadline) {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return fail(errno, "accept");
    auto w = fd_wait(fd_, POLLIN, deadline, "waiting for a connection");
    if (!w) return tl::unexpected(w.error());
  }
}

// --- hello ---

proto::Hello hello_view(const PeerHello& h) {
  proto::Hello v;
  v.provider = h.provider;
  v.host = h.host;
  v.fabric_address = h.fabric_address;
  v.regions = h.regions;
  v.data_path = h.data_path;
  return v;
}

PeerHello hello_copy(const proto::Hello& h) {
  return PeerHello{std::string(h.provider), std::string(h.host),
                   std::vector<std::uint8_t>(h.fabric_address.begin(), h.fabric_address.end()), h.regions, h.data_path};
}

}  // namespace rpcie
