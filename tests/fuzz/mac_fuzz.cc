// libFuzzer target: the frame MAC of an authenticated bootstrap socket (auth::FrameMac in
// Socket::message_recv): a fuzzed stream of genuine frames mixed with forged, replayed,
// corrupted and reflected ones, over a socketpair.
//
// Input: one op byte each, then what it needs:
//   op % 4 == 0: a genuine MACed heartbeat (sequence = its index among genuine frames);
//           == 1: a raw frame: u16 LE length, then that many bytes;
//           == 2: a replay of an earlier genuine frame (u8 index);
//           == 3: a genuine frame sent first with one bit flipped (u16 LE bit), then
//                 whole; or (op & 4) the receiver's own frame reflected back to it.
// The receiver reads after every genuine frame.
//
// Checks, beyond the sanitizers':
//  - message_recv returns the genuine frames, each once, in order, and nothing else;
//  - every frame that does not verify is dropped and counted (frames_dropped), and the
//    next genuine frame still opens; a frame too short for a MAC ends the stream (EPROTO),
//    as a frame the reader refuses does (EPROTO, EMSGSIZE).
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "fuzz_check.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/process.hpp"

namespace {

using namespace rpcie;
using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) fuzz::die("mac_fuzz", what, detail);
}

auth::FrameMac mac_of(auth::Role role) {
  static const auth::Key key = [] {
    std::array<std::uint8_t, auth::kKeyMinBytes> b{};
    b.fill(9);
    auto k = auth::Key::create(b);
    check(k.has_value(), "Key::create failed");
    return std::move(*k);
  }();
  const auth::Nonce nc{1}, ns{2};
  return auth::FrameMac(auth::session_key_derive(key, "alice", nc, ns), role);
}

Deadline soon() { return Deadline::after(1s); }

// The whole frame (length prefix, MACed body) of a heartbeat sealed by `mac`.
Bytes frame_seal(auth::FrameMac& mac, std::uint64_t sequence) {
  auto msg = proto::message_encode(proto::Heartbeat{sequence}, 0);
  check(msg.has_value(), "encoding a heartbeat failed");
  (*msg)[6] = static_cast<std::uint8_t>((*msg)[6] | proto::kFlagMac);
  std::array<std::uint8_t, proto::kMacTrailer> tag{};
  mac.seal(*msg, tag);
  const std::size_t body = msg->size() + tag.size();
  Bytes f;
  for (std::size_t i = 0; i < proto::kFramePrefix; ++i) f.push_back(static_cast<std::uint8_t>(body >> (8 * i)));
  f.insert(f.end(), msg->begin(), msg->end());
  f.insert(f.end(), tag.begin(), tag.end());
  return f;
}

void raw_write(int fd, const Bytes& b) {
  std::size_t done = 0;
  while (done < b.size()) {
    const ssize_t n = ::write(fd, b.data() + done, b.size() - done);
    check(n > 0, "write to the socketpair failed");
    done += static_cast<std::size_t>(n);
  }
}

struct Input {
  std::span<const std::uint8_t> rest;
  std::uint8_t byte() {
    if (rest.empty()) return 0;
    const std::uint8_t b = rest[0];
    rest = rest.subspan(1);
    return b;
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(byte() | (byte() << 8)); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool once = [] {
    signals_init();
    return true;
  }();
  (void)once;
  int fds[2];
  check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "socketpair failed");
  const int wire = fds[0];  // the sending side's descriptor: frames are written to it raw
  Socket receiver(fds[1]);
  receiver.frame_mac_set(mac_of(auth::Role::server));
  auth::FrameMac sender = mac_of(auth::Role::client);
  std::vector<Bytes> sent;    // genuine frames, in order
  std::uint64_t forged = 0;   // frames that must be dropped, since the last read
  std::uint64_t dropped = 0;  // frames dropped so far, as they should be counted
  bool ended = false;         // the stream failed (too short for a MAC, refused frame)
  Input in{std::span(data, size)};

  const auto genuine_send_and_read = [&] {
    sent.push_back(frame_seal(sender, sent.size()));
    raw_write(wire, sent.back());
    auto m = receiver.message_recv(soon());
    if (!m) {
      const int code = m.error().code;
      check(code == EPROTO || code == EMSGSIZE, "the stream failed with an undocumented code", m.error().describe());
      check(code != ETIMEDOUT, "a genuine frame was not delivered");
      ended = true;
      return;
    }
    const auto* h = std::get_if<proto::Heartbeat>(&m->decoded.message);
    check(h != nullptr, "message_recv returned a forged frame");
    check(h->sequence == sent.size() - 1, "message_recv returned a frame out of order, twice or forged");
    dropped += forged;
    forged = 0;
    check(receiver.frames_dropped() == dropped, "frames_dropped does not count the dropped frames");
  };

  while (!in.rest.empty() && !ended) {
    // A read now and then, so that what waits in the socketpair stays far below its buffer.
    if (forged >= 256) genuine_send_and_read();
    if (ended) break;
    const std::uint8_t op = in.byte();
    switch (op % 4) {
      case 0:
        genuine_send_and_read();
        break;
      case 1: {
        const std::size_t n = in.u16();
        const auto body = in.rest.first(std::min(n, in.rest.size()));
        in.rest = in.rest.subspan(body.size());
        Bytes f;
        for (std::size_t i = 0; i < proto::kFramePrefix; ++i)
          f.push_back(static_cast<std::uint8_t>(body.size() >> (8 * i)));
        f.insert(f.end(), body.begin(), body.end());
        raw_write(wire, f);
        // Long enough to be checked: dropped; shorter frames end the stream at the next read.
        if (body.size() >= proto::kHeaderSize + proto::kMacTrailer) ++forged;
        genuine_send_and_read();
        if (body.size() < proto::kHeaderSize + proto::kMacTrailer) check(ended, "a frame too short was accepted");
        break;
      }
      case 2:
        if (!sent.empty()) {
          raw_write(wire, sent[in.byte() % sent.size()]);
          ++forged;
        }
        break;
      default:
        if (op & 4) {
          // The receiver's own frame, sealed by its own MAC state, comes back to it.
          auto reflected = mac_of(auth::Role::server);
          for (std::uint64_t i = 0; i <= sent.size() % 3; ++i) {
            raw_write(wire, frame_seal(reflected, i));
            ++forged;
          }
        } else {
          Bytes f = frame_seal(sender, sent.size());
          Bytes bad = f;
          const std::size_t bit = proto::kFramePrefix * 8 + in.u16() % ((f.size() - proto::kFramePrefix) * 8);
          bad[bit / 8] = static_cast<std::uint8_t>(bad[bit / 8] ^ (1u << (bit % 8)));
          raw_write(wire, bad);
          ++forged;
          sent.push_back(f);
          raw_write(wire, f);
          auto m = receiver.message_recv(soon());
          check(m.has_value(), "a genuine frame after a corrupted copy did not open");
          const auto* h = std::get_if<proto::Heartbeat>(&m->decoded.message);
          check(h && h->sequence == sent.size() - 1, "the corrupted copy opened instead of the genuine frame");
          dropped += forged;
          forged = 0;
          check(receiver.frames_dropped() == dropped, "frames_dropped does not count the dropped frames");
        }
        break;
    }
  }
  if (!ended && forged > 0) genuine_send_and_read();
  ::close(wire);
  return 0;
}
