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
#include "rpcie/protocol_layout.hpp"
#include "rpcie/protocol_rma.hpp"
#include "rpcie/protocol_types.hpp"
#include "rpcie/result.hpp"

namespace rpcie::proto {

struct Header {
  std::uint8_t version = kVersion;
  MsgType type = MsgType::ping;
  std::uint16_t flags = 0;
  std::uint32_t payload_length = 0;
  std::uint64_t request_id = 0;
};

// rpcie's client marks posted writes with bit 63 of the request id (docs/protocol.md,
// section 2); the rest of the id counts, one counter for requests and posted writes, in the
// order the client sends them.
inline constexpr std::uint64_t kRequestPosted = std::uint64_t{1} << 63;
// A request id's place in that order (without the posted bit).
inline constexpr std::uint64_t request_order(std::uint64_t request_id) noexcept { return request_id & ~kRequestPosted; }

// --- The messages -------------------------------------------------------------------------
// One declaration each (protocol_layout.hpp says how): type number, name, fields in wire
// order, and the rules that span fields. The codec derives everything else from these and
// from the Message variant: it has no per-message code.

// A memory region one side offers to the other for one-sided RMA.
struct RegionDescriptor {
  std::uint32_t id = 0;
  std::uint64_t address = 0;  // what the peer passes as fi_write/fi_read addr for offset 0
  std::uint64_t length = 0;
  std::uint64_t key = 0;
  static void fields(auto& m, auto&& f) {
    f("id", m.id);
    f("address", m.address);
    f("length", m.length);
    f("key", m.key);
  }
};

// Bootstrap: the client's introduction (hello) and the server's answer (hello_ack).
struct Hello {
  static constexpr MsgType kType = MsgType::hello;
  static constexpr const char* kName = "hello";
  std::string_view provider;  // fabric_name of the adapter in use
  std::string_view host;      // sender's host name (same-host detection)
  std::span<const std::uint8_t> fabric_address;
  std::vector<RegionDescriptor> regions;  // at most kMaxRegions
  // Reserved (docs/protocol.md 11.3): rpcie sends it empty and never reads it; peers accept
  // and ignore up to kMaxNonce bytes. Authentication uses the auth_* messages.
  std::span<const std::uint8_t> nonce;
  // The data-path mode the sender runs (kDataPathSealed / kDataPathOpen); both sides must
  // agree. Sealed: `regions` are offered by id only (address 0, key = the id in the
  // sender's region table; no memory is registered for remote access).
  std::uint8_t data_path = kDataPathOpen;
  static void fields(auto& m, auto&& f) {
    f("provider", m.provider, wire::Len<std::uint8_t, 1, kMaxProviderName>{});
    f("host", m.host, wire::Len<std::uint8_t, 0, kMaxHostName>{});
    f("fabric_address", m.fabric_address, wire::Len<std::uint16_t, 1, kMaxFabricAddress>{});
    f("regions", m.regions, wire::Len<std::uint8_t, 0, kMaxRegions>{});
    f("nonce", m.nonce, wire::Len<std::uint8_t, 0, kMaxNonce>{});
    f("data_path", m.data_path, wire::Range<kDataPathSealed, kDataPathOpen>{});
  }
};
struct HelloAck : Hello {
  static constexpr MsgType kType = MsgType::hello_ack;
  static constexpr const char* kName = "hello_ack";
};

// hello / hello_ack on an authenticated bootstrap connection (docs/auth.md, "Hello
// envelope"): `envelope` seals the whole encoded hello or hello_ack (auth::envelope_seal,
// with the connection's hello key), so fabric addresses and region keys never travel in
// clear. `aead`: the data-path ciphers the sender offers (bit mask of auth::Aead).
struct SealedHello {
  static constexpr MsgType kType = MsgType::sealed_hello;
  static constexpr const char* kName = "sealed_hello";
  std::uint8_t aead = 0;
  std::span<const std::uint8_t> envelope;
  static void fields(auto& m, auto&& f) {
    f("aead", m.aead, wire::Range<1, kAeadOfferMask>{});
    f("envelope", m.envelope, wire::Len<std::uint16_t, 1, kMaxHelloEnvelope>{});
  }
};

struct ErrorMsg {
  static constexpr MsgType kType = MsgType::error;
  static constexpr const char* kName = "error";
  std::int32_t code = 0;  // positive errno value
  std::string_view text;  // at most kMaxErrorText bytes
  static void fields(auto& m, auto&& f) {
    f("code", m.code, wire::Range<1, INT32_MAX>{});
    f("text", m.text, wire::Len<std::uint16_t, 0, kMaxErrorText>{});
  }
};

struct Ping {
  static constexpr MsgType kType = MsgType::ping;
  static constexpr const char* kName = "ping";
  std::span<const std::uint8_t> data;  // opaque, echoed by Pong
  static void fields(auto& m, auto&& f) { f("data", m.data, wire::Rest<kMaxPayload>{}); }
};
struct Pong : Ping {
  static constexpr MsgType kType = MsgType::pong;
  static constexpr const char* kName = "pong";
};

struct Heartbeat {
  static constexpr MsgType kType = MsgType::heartbeat;
  static constexpr const char* kName = "heartbeat";
  std::uint64_t sequence = 0;
  static void fields(auto& m, auto&& f) { f("sequence", m.sequence); }
};
struct Goodbye {
  static constexpr MsgType kType = MsgType::goodbye;
  static constexpr const char* kName = "goodbye";
  static void fields(auto&, auto&&) {}  // no payload
};

struct ConfigRead {
  static constexpr MsgType kType = MsgType::config_read;
  static constexpr const char* kName = "config_read";
  std::uint16_t offset = 0;  // aligned to width, offset + width <= pci::kConfigSpaceSize
  std::uint8_t width = 4;    // 1, 2, 4
  static void fields(auto& m, auto&& f) {
    f("offset", m.offset);
    f("width", m.width);
  }
  static constexpr bool valid(const ConfigRead& m) noexcept {
    return pci::access_valid(m.offset, m.width, pci::kConfigSpaceSize, pci::kConfigWidthMax);
  }
};
struct ConfigWrite {
  static constexpr MsgType kType = MsgType::config_write;
  static constexpr const char* kName = "config_write";
  std::uint16_t offset = 0;
  std::uint8_t width = 4;
  std::uint32_t value = 0;  // must fit in width
  static void fields(auto& m, auto&& f) {
    f("offset", m.offset);
    f("width", m.width);
    f("value", m.value);
  }
  static constexpr bool valid(const ConfigWrite& m) noexcept {
    return pci::access_valid(m.offset, m.width, pci::kConfigSpaceSize, pci::kConfigWidthMax) &&
           wire::value_fits(m.value, m.width);
  }
};
// The BAR's size is the exporter's to check: the codec checks the BAR number, the width and
// the alignment.
struct MmioRead {
  static constexpr MsgType kType = MsgType::mmio_read;
  static constexpr const char* kName = "mmio_read";
  std::uint8_t bar = 0;      // 0..5
  std::uint8_t width = 4;    // 1, 2, 4, 8
  std::uint64_t offset = 0;  // aligned to width
  static void fields(auto& m, auto&& f) {
    f("bar", m.bar, wire::Range<0, pci::kBarMax>{});
    f("width", m.width);
    f("offset", m.offset);
  }
  static constexpr bool valid(const MmioRead& m) noexcept { return pci::access_aligned(m.offset, m.width); }
};
struct MmioWrite {
  static constexpr MsgType kType = MsgType::mmio_write;
  static constexpr const char* kName = "mmio_write";
  std::uint8_t bar = 0;
  std::uint8_t width = 4;
  std::uint64_t offset = 0;
  std::uint64_t value = 0;  // must fit in width
  static void fields(auto& m, auto&& f) {
    f("bar", m.bar, wire::Range<0, pci::kBarMax>{});
    f("width", m.width);
    f("offset", m.offset);
    f("value", m.value);
  }
  static constexpr bool valid(const MmioWrite& m) noexcept {
    return pci::access_aligned(m.offset, m.width) && wire::value_fits(m.value, m.width);
  }
};
struct ReadReply {
  static constexpr MsgType kType = MsgType::read_reply;
  static constexpr const char* kName = "read_reply";
  std::int32_t status = 0;  // 0 or a positive errno value
  std::uint64_t value = 0;
  static void fields(auto& m, auto&& f) {
    f("status", m.status, wire::Range<0, INT32_MAX>{});
    f("value", m.value);
  }
};
struct WriteAck {
  static constexpr MsgType kType = MsgType::write_ack;
  static constexpr const char* kName = "write_ack";
  std::int32_t status = 0;
  static void fields(auto& m, auto&& f) { f("status", m.status, wire::Range<0, INT32_MAX>{}); }
};
struct Interrupt {
  static constexpr MsgType kType = MsgType::interrupt;
  static constexpr const char* kName = "interrupt";
  std::uint16_t vector = 0;  // < kMaxVector
  std::uint64_t count = 0;   // total interrupts raised on this vector since attach
  static void fields(auto& m, auto&& f) {
    f("vector", m.vector, wire::Range<0, kMaxVector - 1>{});
    f("count", m.count);
  }
};
// "Bytes [offset, offset+length) of region `region` were written by one-sided RMA and are
// complete at the target". checksum: FNV-1a 64 of those bytes, 0 when not computed.
// Only rpcie-selftest sends and answers it (docs/protocol.md 4.23); the exporter refuses it.
struct RmaNotify {
  static constexpr MsgType kType = MsgType::rma_notify;
  static constexpr const char* kName = "rma_notify";
  std::uint32_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t checksum = 0;
  static void fields(auto& m, auto&& f) {
    f("region", m.region);
    f("offset", m.offset);
    f("length", m.length);
    f("checksum", m.checksum);
  }
};

// --- Authentication (bootstrap; docs/auth.md) ---
// Client -> server: who I am and my challenge.
struct AuthHello {
  static constexpr MsgType kType = MsgType::auth_hello;
  static constexpr const char* kName = "auth_hello";
  std::string_view client;              // 1..kMaxNameText bytes
  std::span<const std::uint8_t> nonce;  // exactly kAuthBytes
  static void fields(auto& m, auto&& f) {
    f("client", m.client, wire::Len<std::uint8_t, 1, kMaxNameText>{});
    f("nonce", m.nonce, wire::Fixed<kAuthBytes>{});
  }
};
// Server -> client: the server's challenge and its proof of the key for that client.
struct AuthChallenge {
  static constexpr MsgType kType = MsgType::auth_challenge;
  static constexpr const char* kName = "auth_challenge";
  std::span<const std::uint8_t> nonce;  // exactly kAuthBytes
  std::span<const std::uint8_t> proof;  // exactly kAuthBytes
  static void fields(auto& m, auto&& f) {
    f("nonce", m.nonce, wire::Fixed<kAuthBytes>{});
    f("proof", m.proof, wire::Fixed<kAuthBytes>{});
  }
};
// Client -> server: the client's proof.
struct AuthProof {
  static constexpr MsgType kType = MsgType::auth_proof;
  static constexpr const char* kName = "auth_proof";
  std::span<const std::uint8_t> proof;  // exactly kAuthBytes
  static void fields(auto& m, auto&& f) { f("proof", m.proof, wire::Fixed<kAuthBytes>{}); }
};
// Server -> client: accepted; every later frame in both directions carries a MAC.
struct AuthOk {
  static constexpr MsgType kType = MsgType::auth_ok;
  static constexpr const char* kName = "auth_ok";
  static void fields(auto&, auto&&) {}  // no payload
};

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
  std::uint64_t size = 0;  // > 0
  static void fields(auto& m, auto&& f) {
    f("bar", m.bar, wire::Range<0, pci::kBarMax>{});
    f("kind", m.kind, wire::OneOf<BarKind::registers, BarKind::memory, BarKind::io>{});
    f("flags", m.flags, wire::Flags<kBarFlagsKnown>{});
    f("size", m.size, wire::Range<1, UINT64_MAX>{});
  }
};
enum class ExportState : std::uint8_t { free = 0, attached = 1 };
inline constexpr std::uint8_t kExportShared = 1;  // several clients may attach
inline constexpr std::uint8_t kExportMirror = 2;  // DMA in mirror mode
// The export's data-path policy (docs/security.md 5): sealed only, open only, or neither bit
// (the provider's default: sealed on tcp, open on shm, verbs and efa). Never both.
inline constexpr std::uint8_t kExportSealedOnly = 4;
inline constexpr std::uint8_t kExportOpenOnly = 8;
inline constexpr std::uint8_t kExportFlagsKnown = 15;
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
  static void fields(auto& m, auto&& f) {
    f("name", m.name, wire::Len<std::uint8_t, 1, kMaxNameText>{});
    f("backend", m.backend, wire::Len<std::uint8_t, 1, kMaxBackendName>{});
    f("holder", m.holder, wire::Len<std::uint8_t, 0, kMaxNameText>{});
    f("vendor", m.vendor);
    f("device", m.device);
    f("class_code", m.class_code, wire::Range<0, 0xffffff>{});
    f("subsystem_vendor", m.subsystem_vendor);
    f("subsystem_device", m.subsystem_device);
    f("revision", m.revision);
    f("state", m.state, wire::OneOf<ExportState::free, ExportState::attached>{});
    f("flags", m.flags, wire::Flags<kExportFlagsKnown>{});
    f("vectors", m.vectors, wire::Range<0, kMaxVector>{});
    f("bars", m.bars, wire::Len<std::uint8_t, 0, pci::kBarCount>{});
  }
  static bool valid(const ExportEntry& e) noexcept {
    if ((e.flags & kExportSealedOnly) != 0 && (e.flags & kExportOpenOnly) != 0) return false;
    unsigned seen = 0;
    for (const auto& b : e.bars) {
      if (b.bar > pci::kBarMax || (seen & (1u << b.bar)) != 0) return false;
      seen |= 1u << b.bar;
    }
    return true;
  }
};
struct ListRequest {
  static constexpr MsgType kType = MsgType::list_request;
  static constexpr const char* kName = "list_request";
  static void fields(auto&, auto&&) {}  // no payload
};
struct ListReply {
  static constexpr MsgType kType = MsgType::list_reply;
  static constexpr const char* kName = "list_reply";
  std::vector<ExportEntry> exports;  // <= kMaxExports
  static void fields(auto& m, auto&& f) { f("exports", m.exports, wire::Len<std::uint16_t, 0, kMaxExports>{}); }
};
// Client -> server: attach this export; my DMA window is this large (0: no window). The
// Session hello / hello_ack exchange follows on the same connection when it is accepted.
// flags: kAttachWindowPush — the client pushes what the device is to read from its window
// (streaming DMA, client.hpp Attachment::window_push): in mirror mode the exporter then does
// not pull the window before doorbells and lets the client write into its mirror.
// data_path: the mode the client wants (kDataPathSealed / kDataPathOpen: what it asked
// for, or its provider's default); with kAttachDataPathInsist it takes no other, else the
// exporter's policy wins. The reply's data_path is the mode both sides then run.
inline constexpr std::uint8_t kAttachWindowPush = 1;
inline constexpr std::uint8_t kAttachDataPathInsist = 2;
inline constexpr std::uint8_t kAttachFlagsKnown = 3;
struct AttachRequest {
  static constexpr MsgType kType = MsgType::attach_request;
  static constexpr const char* kName = "attach_request";
  std::string_view export_name;
  std::uint64_t window_size = 0;
  std::uint8_t flags = 0;
  std::uint8_t data_path = kDataPathOpen;
  static void fields(auto& m, auto&& f) {
    f("export_name", m.export_name, wire::Len<std::uint8_t, 1, kMaxNameText>{});
    f("window_size", m.window_size);
    f("flags", m.flags, wire::Flags<kAttachFlagsKnown>{});
    f("data_path", m.data_path, wire::Range<kDataPathSealed, kDataPathOpen>{});
  }
};
struct AttachReply {
  static constexpr MsgType kType = MsgType::attach_reply;
  static constexpr const char* kName = "attach_reply";
  ExportEntry info;
  std::uint32_t lease_ms = 0;  // heartbeat at least every lease_ms / 3
  std::uint64_t attachment_id = 0;
  std::uint8_t data_path = kDataPathOpen;
  static void fields(auto& m, auto&& f) {
    f("info", m.info);
    f("lease_ms", m.lease_ms);
    f("attachment_id", m.attachment_id);
    f("data_path", m.data_path, wire::Range<kDataPathSealed, kDataPathOpen>{});
  }
};

// --- Resumption (bootstrap; docs/reliability.md, "Resumption") ---
// resume_request: on a new authenticated connection, a client whose link to its attachment
// `attachment_id` was lost asks to go on with it. `answered`: the request id of the last
// answer it received on the data path (0: none); every earlier answer arrived too (the fabric
// delivers in order). Answered with resume_reply, or with error ENOENT when the exporter
// holds no such attachment of this client to resume: the lease lapsed, the exporter
// restarted, or it does not keep attachments beyond their connection (rpcie-exportd today).
struct ResumeRequest {
  static constexpr MsgType kType = MsgType::resume_request;
  static constexpr const char* kName = "resume_request";
  std::uint64_t attachment_id = 0;
  std::uint64_t answered = 0;
  static void fields(auto& m, auto&& f) {
    f("attachment_id", m.attachment_id);
    f("answered", m.answered);
  }
};
// resume_reply: the attachment goes on. `performed`: the order (request id without bit 63)
// of the last request the exporter performed; the client sends again, once and in order,
// what it sent after that one. The Session handshake follows as at attach (new keys, new
// memory keys), then the answers the client has not seen arrive again on the fabric first.
struct ResumeReply {
  static constexpr MsgType kType = MsgType::resume_reply;
  static constexpr const char* kName = "resume_reply";
  std::uint64_t performed = 0;
  static void fields(auto& m, auto&& f) { f("performed", m.performed, wire::Range<0, INT64_MAX>{}); }
};

// --- Memory BARs through the device server's bounce buffer (data path) ---
// bar_commit: bytes [bounce_offset, +length) of the bounce buffer go to the BAR at offset.
// bar_fetch: BAR bytes [offset, +length) go to the bounce buffer at bounce_offset.
// Both are answered with write_ack once done.
struct BarCommit {
  static constexpr MsgType kType = MsgType::bar_commit;
  static constexpr const char* kName = "bar_commit";
  std::uint8_t bar = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;  // > 0; neither range wraps
  std::uint64_t bounce_offset = 0;
  static void fields(auto& m, auto&& f) {
    f("bar", m.bar, wire::Range<0, pci::kBarMax>{});
    f("offset", m.offset);
    f("length", m.length, wire::Range<1, UINT64_MAX>{});
    f("bounce_offset", m.bounce_offset);
  }
  static constexpr bool valid(const BarCommit& c) noexcept {
    return wire::range_fits(c.offset, c.length) && wire::range_fits(c.bounce_offset, c.length);
  }
};
struct BarFetch : BarCommit {
  static constexpr MsgType kType = MsgType::bar_fetch;
  static constexpr const char* kName = "bar_fetch";
};

// Posted MMIO writes, performed in order (the client coalesces writes that follow each other
// closely into one message: pipelining without a message per write). 1..kMaxBatch entries,
// each valid as an MmioWrite.
struct MmioWriteBatch {
  static constexpr MsgType kType = MsgType::mmio_write_batch;
  static constexpr const char* kName = "mmio_write_batch";
  std::vector<MmioWrite> writes;
  static void fields(auto& m, auto&& f) { f("writes", m.writes, wire::Len<std::uint16_t, 1, kMaxBatch>{}); }
};

// Streaming DMA in mirror mode (client.hpp, Attachment::window_push): 1..kMaxPushBytes bytes
// for the exporter's mirror of the client's window at window_offset, then 0..kMaxBatch posted
// writes, performed in order once the bytes are in place (typically the doorbell that makes
// the device read them: one message where a one-sided write and a send would be two).
// Answered only when it fails, like posted writes.
struct WindowPush {
  static constexpr MsgType kType = MsgType::window_push;
  static constexpr const char* kName = "window_push";
  std::uint64_t window_offset = 0;
  std::span<const std::uint8_t> data;
  std::vector<MmioWrite> writes;
  static void fields(auto& m, auto&& f) {
    f("window_offset", m.window_offset);
    f("data", m.data, wire::Len<std::uint32_t, 1, kMaxPushBytes>{});
    f("writes", m.writes, wire::Len<std::uint16_t, 0, kMaxBatch>{});
  }
  static constexpr bool valid(const WindowPush& p) noexcept { return wire::range_fits(p.window_offset, p.data.size()); }
};

// --- Device telemetry (data path) ---
// What the exporter timed of one kind of device operation for this attachment: per bucket
// (kLatencyBuckets, LatencyHistogram's bounds, not cumulative), the operations whose
// latency fell in it, and all their latencies added up.
struct BucketCount {
  std::uint64_t count = 0;
  static void fields(auto& m, auto&& f) { f("count", m.count); }
};
struct LatencyCounts {
  std::uint64_t sum_ns = 0;
  std::vector<BucketCount> buckets;  // exactly kLatencyBuckets
  static void fields(auto& m, auto&& f) {
    f("sum_ns", m.sum_ns);
    f("buckets", m.buckets, wire::Len<std::uint8_t, kLatencyBuckets, kLatencyBuckets>{});
  }
};
// telemetry_request: what the exporter measured of this attachment's device since the
// attachment began (docs/protocol.md 8.4.3). No payload; answered with telemetry_reply.
struct TelemetryRequest {
  static constexpr MsgType kType = MsgType::telemetry_request;
  static constexpr const char* kName = "telemetry_request";
  static void fields(auto&, auto&&) {}
};
// telemetry_reply: the device's DMA through the fabric and its interrupts, each interval on
// the exporter's clock alone: dma_read / dma_write, one device transfer from its request to
// its completion (bytes: what they moved); window_pull, a mirror export's pull of the window
// before a doorbell; interrupt, from the device raising one to its message handed to the
// fabric. Successful operations only.
struct TelemetryReply {
  static constexpr MsgType kType = MsgType::telemetry_reply;
  static constexpr const char* kName = "telemetry_reply";
  std::uint64_t dma_read_bytes = 0;
  std::uint64_t dma_written_bytes = 0;
  LatencyCounts dma_read, dma_write, window_pull, interrupt;
  static void fields(auto& m, auto&& f) {
    f("dma_read_bytes", m.dma_read_bytes);
    f("dma_written_bytes", m.dma_written_bytes);
    f("dma_read", m.dma_read);
    f("dma_write", m.dma_write);
    f("window_pull", m.window_pull);
    f("interrupt", m.interrupt);
  }
};

// Every message, in no particular order: the codec derives its type table (number -> name,
// decoder) and message_type() from this list.
using Message = std::variant<Hello, HelloAck, ErrorMsg, Ping, Pong, Heartbeat, Goodbye, ConfigRead, ConfigWrite,
                             MmioRead, MmioWrite, ReadReply, WriteAck, Interrupt, RmaNotify, AuthHello, AuthChallenge,
                             AuthProof, AuthOk, ListRequest, ListReply, AttachRequest, AttachReply, BarCommit, BarFetch,
                             MmioWriteBatch, WindowPush, SealedHello, RmaPut, RmaGet, RmaData, RmaDone, ResumeRequest,
                             ResumeReply, TelemetryRequest, TelemetryReply>;

// A type number or a name given twice would make the table ambiguous.
static_assert(wire::kMessagesUnique<Message>, "two messages share a type number or a name");

struct Decoded {
  Header header;
  Message message;
};

// The type number of `m` (its kType), and the name of a type number (the message's kName;
// "unknown" for a number no message has).
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
