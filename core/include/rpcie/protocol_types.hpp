// rpcie wire protocol, version 1 — the numbers every message declaration uses: magic,
// version, caps on variable-length fields, region ids, type numbers and header flags
// (docs/protocol.md sections 3 and 4). The messages themselves are in protocol.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

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
inline constexpr std::size_t kMaxHelloEnvelope = 4096;   // sealed hello / hello_ack
inline constexpr std::uint8_t kAeadOfferMask = 3;        // auth::Aead bits
// Buckets of a latency histogram in telemetry_reply: LatencyHistogram's 22 bounds (1 us to
// 10 s, 1-2-5 per decade) and one above 10 s.
inline constexpr std::size_t kLatencyBuckets = 23;
// Bytes of one rma_put / rma_data: a maximal message less the other fields, rounded down to
// a multiple of 4 KiB so that chunks of a large transfer stay page-aligned.
inline constexpr std::size_t kMaxRmaBytes = 60 * 1024;
// Data-path modes (data_path.hpp, DataPath) as they travel in hello and attach messages.
inline constexpr std::uint8_t kDataPathSealed = 1;
inline constexpr std::uint8_t kDataPathOpen = 2;

// Region ids that one side looks up in the other's hello (docs/protocol.md 8.6).
inline constexpr std::uint32_t kRegionWindow = 0;   // client: the DMA window
inline constexpr std::uint32_t kRegionBounce = 16;  // exporter: bounce buffer of BARs that are not plain memory
// exporter: mirror of the window (remote write with kAttachWindowPush)
inline constexpr std::uint32_t kRegionMirror = 18;

// Type numbers on the wire. Each message below names its own (kType); a number that no
// message of the Message variant names is unknown to the decoder.
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
  sealed_hello = 26,
  interrupt = 32,
  rma_notify = 33,
  rma_put = 34,
  rma_get = 35,
  rma_data = 36,
  rma_done = 37,
  resume_request = 38,
  resume_reply = 39,
  telemetry_request = 40,
  telemetry_reply = 41,
};

// Header flags. Bit 0: a kMacTrailer-byte MAC follows the message in its bootstrap frame
// (set on every frame after authentication; the frame layer checks and strips it — the
// codec only accepts the bit). No other bit is defined.
inline constexpr std::uint16_t kFlagMac = 1;
inline constexpr std::uint16_t kFlagsKnown = kFlagMac;

}  // namespace rpcie::proto
