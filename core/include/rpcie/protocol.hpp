// rpcie wire protocol, version 1 — the codec.
//
// Every rpcie message, on the bootstrap TCP connection and on the fabric alike, is a
// 24-byte header followed by a typed payload (docs/protocol.md is the normative spec).
// All integers are little-endian.
//
// Contract:
//  - message_decode() is strict: it rejects truncated input, a bad magic or version, unknown
//    types or flags, non-zero reserved fields, a payload length that disagrees with the
//    buffer or with the type, out-of-range fields (widths, BAR numbers, vectors, counts), and
//    trailing bytes. It never reads outside `bytes`, never crashes, and never allocates more
//    than the caps below allow, whatever the peer sends.
//  - Decoded messages hold views (std::span / std::string_view) into the input buffer: they
//    are valid only while that buffer is. Copy what must outlive it.
//  - Thread-safe: the codec has no state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "rpcie/pci.hpp"
#include "rpcie/result.hpp"

namespace rpcie::proto {

inline constexpr std::uint32_t kMagic = 0x49435052;  // bytes "RPCI"
inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 24;
inline constexpr std::size_t kMaxPayload = 64 * 1024;
inline constexpr std::size_t kMaxMessage = kHeaderSize + kMaxPayload;

// Caps on variable-length fields.
inline constexpr std::size_t kMaxProviderName = 64;
inline constexpr std::size_t kMaxHostName = 255;
inline constexpr std::size_t kMaxFabricAddress = 256;
inline constexpr std::size_t kMaxRegions = 16;
inline constexpr std::size_t kMaxNonce = 64;
inline constexpr std::size_t kMaxErrorText = 1024;
inline constexpr std::uint16_t kMaxVector = 2048;  // MSI-X allows 2048 vectors
inline constexpr std::size_t kMaxNameText = 64;    // export names, client names, holders
inline constexpr std::size_t kMaxBackendName = 32;
inline constexpr std::size_t kMaxExports = 128;          // entries in one list_reply
inline constexpr std::size_t kAuthBytes = 32;            // nonces and proofs: exactly this long
inline constexpr std::size_t kMacTrailer = 32;           // per-frame MAC after the message
inline constexpr std::size_t kMaxBatch = 256;            // writes in one mmio_write_batch
inline constexpr std::size_t kMaxPushBytes = 32 * 1024;  // window bytes in one window_push

// Region ids that one side looks up in the other's hello (docs/protocol.md 8.6).
inline constexpr std::uint32_t kRegionWindow = 0;   // client: the DMA window
inline constexpr std::uint32_t kRegionBounce = 16;  // exporter: bounce buffer of BARs that are not plain memory
// exporter: mirror of the window (remote write with kAttachWindowPush)
inline constexpr std::uint32_t kRegionMirror = 18;

enum class MsgType : std::uint8_t {
  hello = 1,
  hello_ack = 2,
  error = 3,
  ping = 4,
  pong = 5,
  heartbeat = 6,
  goodbye = 7,
  auth_hello = 8,
  auth_challenge = 9,
  auth_proof = 10,
  auth_ok = 11,
  list_request = 12,
  list_reply = 13,
  attach_request = 14,
  attach_reply = 15,
  config_read = 16,
  config_write = 17,
  mmio_read = 18,
  mmio_write = 19,
  read_reply = 20,
  write_ack = 21,
  bar_commit = 22,
  bar_fetch = 23,
  mmio_write_batch = 24,
  window_push = 25,
  interrupt = 32,
  rma_notify = 33,
};

// Header flags. Bit 0: a kMacTrailer-byte MAC follows the message in its bootstrap frame
// (set on every frame after authentication; the frame layer checks and strips it — the
// codec only accepts the bit). No other bit is defined.
inline constexpr std::uint16_t kFlagMac = 1;
inline constexpr std::uint16_t kFlagsKnown = kFlagMac;

struct Header {
  std::uint8_t version = kVersion;
  MsgType type = MsgType::ping;
  std::uint16_t flags = 0;
  std::uint32_t payload_length = 0;
  std::uint64_t request_id = 0;
};

// A memory region one side offers to the other for one-sided RMA.
struct RegionDescriptor {
  std::uint32_t id = 0;
  std::uint64_t address = 0;  // what the peer passes as fi_write/fi_read addr for offset 0
  std::uint64_t length = 0;
  std::uint64_t key = 0;
};

// Bootstrap: the client's introduction (hello) and the server's answer (hello_ack).
struct Hello {
  std::string_view provider;  // fabric_name of the adapter in use
  std::string_view host;      // sender's host name (same-host detection)
  std::span<const std::uint8_t> fabric_address;
  std::vector<RegionDescriptor> regions;  // at most kMaxRegions
  std::span<const std::uint8_t> nonce;    // sender's challenge for mutual authentication
                                          // (at most kMaxNonce; ignored by peers without it)
};
struct HelloAck : Hello {};

struct ErrorMsg {
  std::int32_t code = 0;  // positive errno value
  std::string_view text;  // at most kMaxErrorText bytes
};

struct Ping {
  std::span<const std::uint8_t> data;  // opaque, echoed by Pong
};
struct Pong : Ping {};

struct Heartbeat {
  std::uint64_t sequence = 0;
};
struct Goodbye {};

struct ConfigRead {
  std::uint16_t offset = 0;  // aligned to width, offset + width <= pci::kConfigSpaceSize
  std::uint8_t width = 4;    // 1, 2, 4
};
struct ConfigWrite {
  std::uint16_t offset = 0;
  std::uint8_t width = 4;
  std::uint32_t value = 0;  // must fit in width
};
struct MmioRead {
  std::uint8_t bar = 0;      // 0..5
  std::uint8_t width = 4;    // 1, 2, 4, 8
  std::uint64_t offset = 0;  // aligned to width
};
struct MmioWrite {
  std::uint8_t bar = 0;
  std::uint8_t width = 4;
  std::uint64_t offset = 0;
  std::uint64_t value = 0;  // must fit in width
};
struct ReadReply {
  std::int32_t status = 0;  // 0 or a positive errno value
  std::uint64_t value = 0;
};
struct WriteAck {
  std::int32_t status = 0;
};
struct Interrupt {
  std::uint16_t vector = 0;  // < kMaxVector
  std::uint64_t count = 0;   // total interrupts raised on this vector since attach
};
// "Bytes [offset, offset+length) of region `region` were written by one-sided RMA and are
// complete at the target". checksum: FNV-1a 64 of those bytes, 0 when not computed.
struct RmaNotify {
  std::uint32_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t checksum = 0;
};

// --- Authentication (bootstrap; docs/auth.md) ---
// Client -> server: who I am and my challenge.
struct AuthHello {
  std::string_view client;              // 1..kMaxNameText bytes
  std::span<const std::uint8_t> nonce;  // exactly kAuthBytes
};
// Server -> client: the server's challenge and its proof of the key for that client.
struct AuthChallenge {
  std::span<const std::uint8_t> nonce;  // exactly kAuthBytes
  std::span<const std::uint8_t> proof;  // exactly kAuthBytes
};
// Client -> server: the client's proof.
struct AuthProof {
  std::span<const std::uint8_t> proof;  // exactly kAuthBytes
};
// Server -> client: accepted; every later frame in both directions carries a MAC.
struct AuthOk {};

// --- Exports (bootstrap) ---
using BarKind = pci::BarKind;
inline constexpr std::uint8_t kBarFlag64 = 1;        // 64-bit BAR
inline constexpr std::uint8_t kBarFlagReadonly = 2;  // writes and side-effecting reads refused
inline constexpr std::uint8_t kBarFlagDirect = 4;    // plain memory: one-sided RMA to the BAR
inline constexpr std::uint8_t kBarFlagsKnown = 7;
struct BarInfo {
  std::uint8_t bar = 0;  // 0..pci::kBarMax
  BarKind kind = BarKind::registers;
  std::uint8_t flags = 0;
  std::uint64_t size = 0;
};
enum class ExportState : std::uint8_t { free = 0, attached = 1 };
inline constexpr std::uint8_t kExportShared = 1;  // several clients may attach
inline constexpr std::uint8_t kExportMirror = 2;  // DMA in mirror mode
inline constexpr std::uint8_t kExportFlagsKnown = 3;
struct ExportEntry {
  std::string_view name;     // 1..kMaxNameText
  std::string_view backend;  // 1..kMaxBackendName
  std::string_view holder;   // client name(s) attached, "" when free; <= kMaxNameText
  std::uint16_t vendor = 0;
  std::uint16_t device = 0;
  std::uint32_t class_code = 0;  // 24 bits
  std::uint16_t subsystem_vendor = 0;
  std::uint16_t subsystem_device = 0;
  std::uint8_t revision = 0;
  ExportState state = ExportState::free;
  std::uint8_t flags = 0;
  std::uint16_t vectors = 0;  // <= kMaxVector
  std::vector<BarInfo> bars;  // <= pci::kBarCount, distinct BAR numbers
};
struct ListRequest {};
struct ListReply {
  std::vector<ExportEntry> exports;  // <= kMaxExports
};
// Client -> server: attach this export; my DMA window is this large (0: no window). The
// Session hello / hello_ack exchange follows on the same connection when it is accepted.
// flags: kAttachWindowPush — the client pushes what the device is to read from its window
// (streaming DMA, client.hpp Attachment::window_push): in mirror mode the exporter then does
// not pull the window before doorbells and lets the client write into its mirror.
inline constexpr std::uint8_t kAttachWindowPush = 1;
inline constexpr std::uint8_t kAttachFlagsKnown = 1;
struct AttachRequest {
  std::string_view export_name;
  std::uint64_t window_size = 0;
  std::uint8_t flags = 0;
};
struct AttachReply {
  ExportEntry info;
  std::uint32_t lease_ms = 0;  // heartbeat at least every lease_ms / 3
  std::uint64_t attachment_id = 0;
};

// --- Memory BARs through the device server's bounce buffer (data path) ---
// bar_commit: bytes [bounce_offset, +length) of the bounce buffer go to the BAR at offset.
// bar_fetch: BAR bytes [offset, +length) go to the bounce buffer at bounce_offset.
// Both are answered with write_ack once done.
struct BarCommit {
  std::uint8_t bar = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t bounce_offset = 0;
};
struct BarFetch : BarCommit {};

// Posted MMIO writes, performed in order (the client coalesces writes that follow each other
// closely into one message: pipelining without a message per write). 1..kMaxBatch entries,
// each valid as an MmioWrite.
struct MmioWriteBatch {
  std::vector<MmioWrite> writes;
};

// Streaming DMA in mirror mode (client.hpp, Attachment::window_push): 1..kMaxPushBytes bytes
// for the exporter's mirror of the client's window at window_offset, then 0..kMaxBatch posted
// writes, performed in order once the bytes are in place (typically the doorbell that makes
// the device read them: one message where a one-sided write and a send would be two).
// Answered only when it fails, like posted writes.
struct WindowPush {
  std::uint64_t window_offset = 0;
  std::span<const std::uint8_t> data;
  std::vector<MmioWrite> writes;
};

using Message =
    std::variant<Hello, HelloAck, ErrorMsg, Ping, Pong, Heartbeat, Goodbye, ConfigRead, ConfigWrite, MmioRead,
                 MmioWrite, ReadReply, WriteAck, Interrupt, RmaNotify, AuthHello, AuthChallenge, AuthProof, AuthOk,
                 ListRequest, ListReply, AttachRequest, AttachReply, BarCommit, BarFetch, MmioWriteBatch, WindowPush>;

struct Decoded {
  Header header;
  Message message;
};

MsgType message_type(const Message& m) noexcept;
const char* msg_type_name(MsgType t) noexcept;

// Exact encoded size (header included) of `m`.
std::size_t message_encoded_size(const Message& m) noexcept;

// Encodes into `out`; returns the number of bytes written. Fails with EMSGSIZE if `out` is
// too small and with EINVAL if `m` itself violates the caps or ranges above (the encoder
// never produces what the decoder would reject).
Result<std::size_t> message_encode(const Message& m, std::uint64_t request_id, std::span<std::uint8_t> out);
Result<std::vector<std::uint8_t>> message_encode(const Message& m, std::uint64_t request_id);

// Strict decode of exactly one message occupying all of `bytes`. Errors: EPROTO (malformed,
// unknown or inconsistent), EMSGSIZE (length over the caps), EPROTONOSUPPORT (version).
Result<Decoded> message_decode(std::span<const std::uint8_t> bytes);

// FNV-1a 64-bit, used by RmaNotify and the self-check.
std::uint64_t checksum_fnv1a(std::span<const std::uint8_t> bytes, std::uint64_t seed = 0xcbf29ce484222325ULL) noexcept;

// --- Stream framing (bootstrap TCP) -------------------------------------------------
// A frame is a u32 little-endian length followed by that many bytes holding one message.
inline constexpr std::size_t kFramePrefix = 4;

// Reassembles frames from a byte stream. Fixed capacity (one maximal frame): a peer cannot
// make it allocate more. Not thread-safe.
// A frame holds at most one maximal message and its MAC trailer.
inline constexpr std::size_t kMaxFrame = kMaxMessage + kMacTrailer;

class FrameReader {
 public:
  FrameReader();
  // Takes bytes from `data`; returns how many it consumed (it stops after a whole frame, so
  // call next() and feed the rest again).
  std::size_t feed(std::span<const std::uint8_t> data) noexcept;
  // A whole frame if one is ready (valid until the next feed()/next()), nullopt-like empty
  // span if more bytes are needed, or an error (EMSGSIZE / EPROTO) for a bad length prefix;
  // after an error the stream is unusable.
  Result<std::span<const std::uint8_t>> next();
  // Bytes wanted before the current frame is complete (for exact reads).
  std::size_t wanted() const noexcept;

 private:
  std::uint32_t prefix_length() const noexcept;  // valid once kFramePrefix bytes are in
  std::vector<std::uint8_t> buffer_;
  std::size_t filled_ = 0;
  bool failed_ = false;
  bool delivered_ = false;
};

}  // namespace rpcie::proto
