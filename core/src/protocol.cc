// Codec for the rpcie wire protocol. See protocol.hpp for the contract and
// docs/protocol.md for the format. The messages' own layouts are their declarations in
// protocol.hpp; this file derives the type table from the Message variant and frames the
// walkers of wire_codec.hpp with the header.
#include "rpcie/protocol.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "wire_codec.hpp"

namespace rpcie::proto {
namespace {

using wire::Reader;

std::string fault_text(const char* message, const wire::Fault& f) {
  std::string s = std::string(message) + " fields out of range";
  if (f.field == nullptr) return s;
  s += std::string(" (") + f.field;
  if (f.index != wire::Fault::kWhole) s += "[" + std::to_string(f.index) + "]";
  return s + ")";
}

std::string count_text(const char* message, const wire::CountFault& f) {
  const std::string bounds = " (" + std::to_string(f.min) + ".." + std::to_string(f.max) + ")";
  if (f.entries) return std::string(message) + " of " + std::to_string(f.count) + " " + f.field + bounds;
  return std::string(message) + " " + f.field + " of " + std::to_string(f.count) + " bytes" + bounds;
}

// Reads the payload of an M (the header said its type) and checks it against M's
// declaration. Trailing bytes are the caller's to refuse.
template <class M>
Result<Message> payload_decode(Reader& r) {
  M m;
  wire::Get get{r, {}};
  M::fields(m, get);
  if (get.fault.field != nullptr) return fail(EPROTO, count_text(M::kName, get.fault));
  if (!r.ok()) return fail(EPROTO, std::string(M::kName) + " truncated");
  if (auto f = wire::check(m)) return fail(EPROTO, fault_text(M::kName, *f));
  return Message(std::in_place_type<M>, std::move(m));
}

// The type table, derived from the Message variant (its order does not matter): for each
// type number, the message's name and payload decoder, or nulls for an unknown number.
struct TypeEntry {
  const char* name = nullptr;
  Result<Message> (*decode)(Reader&) = nullptr;
};
template <class... M>
constexpr std::array<TypeEntry, 256> type_table(const std::variant<M...>*) {
  std::array<TypeEntry, 256> t{};
  ((t[static_cast<std::uint8_t>(M::kType)] = TypeEntry{M::kName, &payload_decode<M>}), ...);
  return t;
}
constexpr auto kTypeTable = type_table(static_cast<const Message*>(nullptr));

// The type number of each alternative, by variant index.
template <class... M>
constexpr std::array<MsgType, sizeof...(M)> types_by_index(const std::variant<M...>*) {
  return {M::kType...};
}
constexpr auto kTypeOfIndex = types_by_index(static_cast<const Message*>(nullptr));

template <class M>
Result<std::size_t> encode_as(const M& m, std::uint64_t request_id, std::span<std::uint8_t> out) {
  if (auto f = wire::check(m)) return fail(EINVAL, "refusing to encode an invalid " + fault_text(M::kName, *f));
  const std::size_t payload = wire::record_size(m);
  if (payload > kMaxPayload) return fail(EINVAL, "payload over the protocol's cap");
  if (out.size() < kHeaderSize + payload) return fail(EMSGSIZE, "encode buffer too small");
  wire::Writer w(out.data());
  w.uint(kMagic);
  w.uint(kVersion);
  w.uint(static_cast<std::uint8_t>(M::kType));
  w.uint<std::uint16_t>(0);
  w.uint(static_cast<std::uint32_t>(payload));
  w.uint<std::uint32_t>(0);
  w.uint(request_id);
  M::fields(m, wire::Put{w});
  return kHeaderSize + payload;
}

}  // namespace

MsgType message_type(const Message& m) noexcept { return kTypeOfIndex[m.index()]; }

const char* msg_type_name(MsgType t) noexcept {
  const char* name = kTypeTable[static_cast<std::uint8_t>(t)].name;
  return name != nullptr ? name : "unknown";
}

std::size_t message_encoded_size(const Message& m) noexcept {
  return kHeaderSize + std::visit([](const auto& x) { return wire::record_size(x); }, m);
}

Result<std::size_t> message_encode(const Message& m, std::uint64_t request_id, std::span<std::uint8_t> out) {
  return std::visit([&](const auto& x) { return encode_as(x, request_id, out); }, m);
}

Result<std::vector<std::uint8_t>> message_encode(const Message& m, std::uint64_t request_id) {
  std::vector<std::uint8_t> out(message_encoded_size(m));
  RPCIE_TRY(message_encode(m, request_id, out));
  return out;
}

Result<Decoded> message_decode(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < kHeaderSize)
    return fail(EPROTO, "message shorter than its header (" + std::to_string(bytes.size()) + " bytes)");
  if (bytes.size() > kMaxMessage)
    return fail(EMSGSIZE, "message of " + std::to_string(bytes.size()) + " bytes exceeds the cap");
  Reader r(bytes);
  Decoded d;
  std::uint32_t magic = r.uint<std::uint32_t>();
  d.header.version = r.uint<std::uint8_t>();
  std::uint8_t type = r.uint<std::uint8_t>();
  d.header.flags = r.uint<std::uint16_t>();
  d.header.payload_length = r.uint<std::uint32_t>();
  std::uint32_t reserved = r.uint<std::uint32_t>();
  d.header.request_id = r.uint<std::uint64_t>();
  if (magic != kMagic) return fail(EPROTO, "bad magic");
  if (d.header.version != kVersion)
    return fail(EPROTONOSUPPORT, "protocol version " + std::to_string(d.header.version) + " (this side speaks " +
                                     std::to_string(kVersion) + ")");
  const TypeEntry& entry = kTypeTable[type];
  if (entry.decode == nullptr) return fail(EPROTO, "unknown message type " + std::to_string(type));
  d.header.type = static_cast<MsgType>(type);
  if ((d.header.flags & ~kFlagsKnown) != 0) return fail(EPROTO, "unknown header flags");
  if (reserved != 0) return fail(EPROTO, "reserved header field is not zero");
  if (d.header.payload_length > kMaxPayload) return fail(EMSGSIZE, "payload length over the cap");
  if (d.header.payload_length != bytes.size() - kHeaderSize)
    return fail(EPROTO, "payload length disagrees with the message size");

  Reader p(bytes.subspan(kHeaderSize));
  RPCIE_TRY_ASSIGN(d.message, entry.decode(p));
  if (!p.at_end()) return fail(EPROTO, std::string(entry.name) + " has trailing bytes");
  return d;
}

std::uint64_t checksum_fnv1a(std::span<const std::uint8_t> bytes, std::uint64_t seed) noexcept {
  std::uint64_t h = seed;
  for (auto b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// --- FrameReader ---

std::uint32_t FrameReader::prefix_length() const noexcept {
  Reader r(std::span<const std::uint8_t>(buffer_.data(), kFramePrefix));
  return r.uint<std::uint32_t>();
}

FrameReader::FrameReader() : buffer_(kFramePrefix + kMaxFrame) {}

std::size_t FrameReader::wanted() const noexcept {
  if (failed_) return 0;
  if (delivered_) return kFramePrefix;  // the next feed() starts a new frame
  if (filled_ < kFramePrefix) return kFramePrefix - filled_;
  std::uint32_t len = prefix_length();
  if (len > kMaxFrame) return 0;
  return kFramePrefix + len - filled_;
}

std::size_t FrameReader::feed(std::span<const std::uint8_t> data) noexcept {
  if (delivered_) {  // the previous frame was handed out: start the next one
    filled_ = 0;
    delivered_ = false;
  }
  std::size_t used = 0;
  while (used < data.size() && !failed_) {
    std::size_t want = wanted();
    if (want == 0) break;  // complete frame or bad prefix: next() reports it
    std::size_t n = std::min(want, data.size() - used);
    std::memcpy(buffer_.data() + filled_, data.data() + used, n);
    filled_ += n;
    used += n;
  }
  return used;
}

Result<std::span<const std::uint8_t>> FrameReader::next() {
  if (failed_) return fail(EPROTO, "frame stream already failed");
  if (delivered_) return std::span<const std::uint8_t>{};
  if (filled_ < kFramePrefix) return std::span<const std::uint8_t>{};
  std::uint32_t len = prefix_length();
  if (len > kMaxFrame) {
    failed_ = true;
    return fail(EMSGSIZE, "frame of " + std::to_string(len) + " bytes exceeds the cap");
  }
  if (len < kHeaderSize) {
    failed_ = true;
    return fail(EPROTO, "frame of " + std::to_string(len) + " bytes cannot hold a message header");
  }
  if (filled_ < kFramePrefix + len) return std::span<const std::uint8_t>{};
  delivered_ = true;
  return std::span<const std::uint8_t>(buffer_.data() + kFramePrefix, len);
}

}  // namespace rpcie::proto
