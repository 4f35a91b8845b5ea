// The wire codec: every message type round-trips, every malformed input is rejected with
// the documented error code (and never crashes), the encoder refuses what the decoder
// would reject, and FrameReader reassembles length-prefixed frames from a byte stream.
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include "rpcie/latency_wire.hpp"
#include "rpcie/protocol.hpp"

namespace proto = rpcie::proto;
using proto::Message;
using proto::MsgType;

// --- Allocation tracking --------------------------------------------------------------
// The decoder promises never to allocate more than its caps allow, whatever the peer
// says. Replacing the global allocator lets a test see the largest single allocation made
// while one decode runs.
namespace {
std::atomic<bool> g_track{false};
std::atomic<std::size_t> g_largest{0};

void* allocate(std::size_t n) {
  if (g_track.load(std::memory_order_relaxed)) {
    std::size_t seen = g_largest.load(std::memory_order_relaxed);
    while (n > seen && !g_largest.compare_exchange_weak(seen, n)) {
    }
  }
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Largest single allocation made by `f`.
template <class F>
std::size_t largest_allocation(F&& f) {
  g_largest = 0;
  g_track = true;
  f();
  g_track = false;
  return g_largest.load();
}

// --- Helpers ----------------------------------------------------------------------------

using Bytes = std::vector<std::uint8_t>;

// Header field offsets (docs/protocol.md): magic u32, version u8, type u8 (at 5), flags u16,
// payload_length u32, reserved u32, request_id u64.
constexpr std::size_t kOffVersion = 4;
constexpr std::size_t kOffFlags = 6;
constexpr std::size_t kOffLength = 8;
constexpr std::size_t kOffReserved = 12;

// Little-endian appender for hand-made payloads.
class Le {
 public:
  Le& u8(std::uint64_t v) { return put(v, 1); }
  Le& u16(std::uint64_t v) { return put(v, 2); }
  Le& u32(std::uint64_t v) { return put(v, 4); }
  Le& u64(std::uint64_t v) { return put(v, 8); }
  Le& text(std::string_view s) {
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Le& fill(std::size_t n, std::uint8_t b) {
    bytes.insert(bytes.end(), n, b);
    return *this;
  }
  Bytes bytes;

 private:
  Le& put(std::uint64_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    return *this;
  }
};

void put_u32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u16(Bytes& b, std::size_t at, std::uint16_t v) {
  b[at] = static_cast<std::uint8_t>(v);
  b[at + 1] = static_cast<std::uint8_t>(v >> 8);
}

// A message built by hand: a correct header for `type` around `payload`.
Bytes raw(std::uint8_t type, const Bytes& payload, std::uint64_t request_id = 7) {
  Le h;
  h.u32(proto::kMagic).u8(proto::kVersion).u8(type).u16(0).u32(payload.size()).u32(0).u64(request_id);
  Bytes out = h.bytes;
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}
Bytes raw(MsgType type, const Bytes& payload, std::uint64_t request_id = 7) {
  return raw(static_cast<std::uint8_t>(type), payload, request_id);
}

Bytes encode(const Message& m, std::uint64_t request_id = 1) {
  auto out = proto::message_encode(m, request_id);
  REQUIRE_MESSAGE(out.has_value(), out.error().message);
  return std::move(*out);
}

// Error code of a decode that must fail (0 if it unexpectedly succeeded).
int decode_error(std::span<const std::uint8_t> bytes) {
  auto d = proto::message_decode(bytes);
  return d ? 0 : d.error().code;
}

int encode_error(const Message& m) {
  auto out = proto::message_encode(m, 1);
  return out ? 0 : out.error().code;
}

// Encodes, checks the size bookkeeping, decodes and checks the header; returns the decoded
// message (its views point into `storage`).
proto::Decoded round_trip(const Message& m, std::uint64_t request_id, Bytes& storage) {
  const std::size_t size = proto::message_encoded_size(m);
  storage.assign(size + 16, 0xee);
  auto n = proto::message_encode(m, request_id, storage);
  REQUIRE_MESSAGE(n.has_value(), n.error().message);
  CHECK(*n == size);
  CHECK(storage[size] == 0xee);  // nothing written past the reported size
  storage.resize(*n);
  auto d = proto::message_decode(storage);
  REQUIRE_MESSAGE(d.has_value(), d.error().message);
  CHECK(d->header.version == proto::kVersion);
  CHECK(d->header.type == proto::message_type(m));
  CHECK(d->header.flags == 0);
  CHECK(d->header.payload_length == size - proto::kHeaderSize);
  CHECK(d->header.request_id == request_id);
  CHECK(d->message.index() == m.index());
  return std::move(*d);
}

template <class T>
const T& as(const proto::Decoded& d) {
  const T* p = std::get_if<T>(&d.message);
  REQUIRE(p != nullptr);
  return *p;
}

bool same_bytes(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

void check_hello_equal(const proto::Hello& got, const proto::Hello& want) {
  CHECK(got.provider == want.provider);
  CHECK(got.host == want.host);
  CHECK(same_bytes(got.fabric_address, want.fabric_address));
  CHECK(same_bytes(got.nonce, want.nonce));
  REQUIRE(got.regions.size() == want.regions.size());
  for (std::size_t i = 0; i < want.regions.size(); ++i) {
    CAPTURE(i);
    CHECK(got.regions[i].id == want.regions[i].id);
    CHECK(got.regions[i].address == want.regions[i].address);
    CHECK(got.regions[i].length == want.regions[i].length);
    CHECK(got.regions[i].key == want.regions[i].key);
  }
}

const Bytes kAddress{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
const Bytes kNonce{0xa1, 0xb2, 0xc3};

proto::Hello hello_make(std::size_t regions) {
  proto::Hello h;
  h.provider = "tcp;ofi_rxm";
  h.host = "node-17.example";
  h.fabric_address = kAddress;
  h.nonce = kNonce;
  for (std::size_t i = 0; i < regions; ++i) {
    h.regions.push_back({static_cast<std::uint32_t>(i + 100), 0x7f0000001000ULL + i * 0x10000, 4096ULL * (i + 1),
                         0x8000000000000000ULL | (i * 0x0101010101ULL)});
  }
  return h;
}

// Hand-made hello payload: each field given explicitly so that tests can break one.
struct HelloFields {
  std::string provider = "tcp;ofi_rxm";
  std::string host = "h";
  std::size_t address_length = 8;
  std::size_t region_count = 0;     // what the count byte says
  std::size_t regions_present = 0;  // how many region records follow
  std::size_t nonce_length = 0;
  std::uint8_t data_path = proto::kDataPathOpen;
};
Bytes hello_payload(const HelloFields& f) {
  Le p;
  p.u8(f.provider.size()).text(f.provider);
  p.u8(f.host.size()).text(f.host);
  p.u16(f.address_length).fill(f.address_length, 0x5a);
  p.u8(f.region_count);
  for (std::size_t i = 0; i < f.regions_present; ++i) p.u32(i).u64(0x1000).u64(4096).u64(42 + i);
  p.u8(f.nonce_length).fill(f.nonce_length, 0x11);
  p.u8(f.data_path);
  return p.bytes;
}

}  // namespace

// --- Round trips ------------------------------------------------------------------------

TEST_CASE("hello round-trips with every field, with no regions and with kMaxRegions regions") {
  for (std::size_t regions : {std::size_t{0}, std::size_t{1}, proto::kMaxRegions}) {
    CAPTURE(regions);
    proto::Hello h = hello_make(regions);
    Bytes storage;
    auto d = round_trip(h, 0x1122334455667788ULL, storage);
    check_hello_equal(as<proto::Hello>(d), h);
  }
}

TEST_CASE("hello with an empty host and no nonce round-trips") {
  proto::Hello h = hello_make(2);
  h.host = "";
  h.nonce = {};
  Bytes storage;
  auto d = round_trip(h, 3, storage);
  check_hello_equal(as<proto::Hello>(d), h);
}

TEST_CASE("hello at every cap round-trips") {
  std::string provider(proto::kMaxProviderName, 'p');
  std::string host(proto::kMaxHostName, 'h');
  Bytes address(proto::kMaxFabricAddress, 0xab);
  Bytes nonce(proto::kMaxNonce, 0xcd);
  proto::Hello h = hello_make(proto::kMaxRegions);
  h.provider = provider;
  h.host = host;
  h.fabric_address = address;
  h.nonce = nonce;
  Bytes storage;
  auto d = round_trip(h, 9, storage);
  check_hello_equal(as<proto::Hello>(d), h);
}

TEST_CASE("hello_ack round-trips as hello_ack, not as hello") {
  proto::HelloAck a;
  static_cast<proto::Hello&>(a) = hello_make(3);
  Bytes storage;
  auto d = round_trip(a, 5, storage);
  CHECK(d.header.type == MsgType::hello_ack);
  check_hello_equal(as<proto::HelloAck>(d), a);
}

TEST_CASE("error round-trips with its code and text, including empty and maximal text") {
  std::string longest(proto::kMaxErrorText, 'x');
  for (std::string_view text :
       {std::string_view("provider mismatch: shm vs tcp"), std::string_view(), std::string_view(longest)}) {
    CAPTURE(text.size());
    proto::ErrorMsg e{ENODEV, text};
    Bytes storage;
    auto d = round_trip(e, 11, storage);
    CHECK(as<proto::ErrorMsg>(d).code == ENODEV);
    CHECK(as<proto::ErrorMsg>(d).text == text);
  }
}

TEST_CASE("ping and pong round-trip empty, small and kMaxPayload-sized data") {
  Bytes big(proto::kMaxPayload);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 31 + 7);
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, proto::kMaxPayload}) {
    CAPTURE(size);
    std::span<const std::uint8_t> data(big.data(), size);
    Bytes s1, s2;
    auto ping = round_trip(proto::Ping{data}, 21, s1);
    CHECK(same_bytes(as<proto::Ping>(ping).data, data));
    CHECK(s1.size() == proto::kHeaderSize + size);
    auto pong = round_trip(proto::Pong{{data}}, 22, s2);
    CHECK(same_bytes(as<proto::Pong>(pong).data, data));
  }
}

TEST_CASE("a kMaxPayload ping is exactly kMaxMessage bytes") {
  Bytes big(proto::kMaxPayload, 1);
  CHECK(proto::message_encoded_size(proto::Ping{big}) == proto::kMaxMessage);
  CHECK(encode(proto::Ping{big}).size() == proto::kMaxMessage);
}

TEST_CASE("heartbeat and goodbye round-trip") {
  Bytes s1, s2;
  auto hb = round_trip(proto::Heartbeat{0xfedcba9876543210ULL}, 1, s1);
  CHECK(as<proto::Heartbeat>(hb).sequence == 0xfedcba9876543210ULL);
  auto bye = round_trip(proto::Goodbye{}, 2, s2);
  CHECK(bye.header.type == MsgType::goodbye);
  CHECK(s2.size() == proto::kHeaderSize);
}

TEST_CASE("config_read and config_write round-trip at every width, up to the last register") {
  for (std::uint8_t width : {1, 2, 4}) {
    CAPTURE(int{width});
    std::uint16_t last = static_cast<std::uint16_t>(rpcie::pci::kConfigSpaceSize - width);
    std::uint32_t value = width == 4 ? 0xdeadbeefU : width == 2 ? 0xbeefU : 0xefU;
    Bytes s1, s2;
    auto r = round_trip(proto::ConfigRead{last, width}, 40, s1);
    CHECK(as<proto::ConfigRead>(r).offset == last);
    CHECK(as<proto::ConfigRead>(r).width == width);
    auto w = round_trip(proto::ConfigWrite{last, width, value}, 41, s2);
    CHECK(as<proto::ConfigWrite>(w).offset == last);
    CHECK(as<proto::ConfigWrite>(w).width == width);
    CHECK(as<proto::ConfigWrite>(w).value == value);
  }
}

TEST_CASE("mmio_read and mmio_write round-trip at every width and BAR") {
  for (std::uint8_t width : {1, 2, 4, 8}) {
    for (std::uint8_t bar = 0; bar <= rpcie::pci::kBarMax; ++bar) {
      CAPTURE(int{width});
      CAPTURE(int{bar});
      std::uint64_t offset = 0x100000ULL * width;
      std::uint64_t value = width == 8 ? 0x0123456789abcdefULL : (std::uint64_t{1} << (8 * width)) - 1;
      Bytes s1, s2;
      auto r = round_trip(proto::MmioRead{bar, width, offset}, 50, s1);
      CHECK(as<proto::MmioRead>(r).bar == bar);
      CHECK(as<proto::MmioRead>(r).width == width);
      CHECK(as<proto::MmioRead>(r).offset == offset);
      auto w = round_trip(proto::MmioWrite{bar, width, offset, value}, 51, s2);
      CHECK(as<proto::MmioWrite>(w).bar == bar);
      CHECK(as<proto::MmioWrite>(w).width == width);
      CHECK(as<proto::MmioWrite>(w).offset == offset);
      CHECK(as<proto::MmioWrite>(w).value == value);
    }
  }
}

TEST_CASE("read_reply, write_ack, interrupt and rma_notify round-trip") {
  Bytes s1, s2, s3, s4, s5;
  auto rr = round_trip(proto::ReadReply{EIO, 0xffffffffffffffffULL}, 60, s1);
  CHECK(as<proto::ReadReply>(rr).status == EIO);
  CHECK(as<proto::ReadReply>(rr).value == 0xffffffffffffffffULL);
  auto wa = round_trip(proto::WriteAck{0}, 61, s2);
  CHECK(as<proto::WriteAck>(wa).status == 0);
  auto irq = round_trip(proto::Interrupt{proto::kMaxVector - 1, 123456789}, 62, s3);
  CHECK(as<proto::Interrupt>(irq).vector == proto::kMaxVector - 1);
  CHECK(as<proto::Interrupt>(irq).count == 123456789);
  auto n = round_trip(proto::RmaNotify{3, 4096, 1 << 20, 0xcafef00dULL}, 63, s4);
  CHECK(as<proto::RmaNotify>(n).region == 3);
  CHECK(as<proto::RmaNotify>(n).offset == 4096);
  CHECK(as<proto::RmaNotify>(n).length == 1 << 20);
  CHECK(as<proto::RmaNotify>(n).checksum == 0xcafef00dULL);
  auto wa_err = round_trip(proto::WriteAck{EACCES}, 64, s5);
  CHECK(as<proto::WriteAck>(wa_err).status == EACCES);
}

TEST_CASE("the request id is carried unchanged, including 0 and the all-ones value") {
  for (std::uint64_t id :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0x8000000000000001ULL}, ~std::uint64_t{0}}) {
    Bytes storage;
    auto d = round_trip(proto::Heartbeat{1}, id, storage);
    CHECK(d.header.request_id == id);
  }
}

TEST_CASE("message_type and msg_type_name agree with the header for every message") {
  const Message all[] = {
      proto::Hello{},         proto::HelloAck{},       proto::ErrorMsg{},         proto::Ping{},
      proto::Pong{},          proto::Heartbeat{},      proto::Goodbye{},          proto::ConfigRead{},
      proto::ConfigWrite{},   proto::MmioRead{},       proto::MmioWrite{},        proto::ReadReply{},
      proto::WriteAck{},      proto::Interrupt{},      proto::RmaNotify{},        proto::AuthHello{},
      proto::AuthChallenge{}, proto::AuthProof{},      proto::AuthOk{},           proto::ListRequest{},
      proto::ListReply{},     proto::AttachRequest{},  proto::AttachReply{},      proto::BarCommit{},
      proto::BarFetch{},      proto::MmioWriteBatch{}, proto::WindowPush{},       proto::SealedHello{},
      proto::RmaPut{},        proto::RmaGet{},         proto::RmaData{},          proto::RmaDone{},
      proto::ResumeRequest{}, proto::ResumeReply{},    proto::TelemetryRequest{}, proto::TelemetryReply{}};
  const MsgType types[] = {MsgType::hello,
                           MsgType::hello_ack,
                           MsgType::error,
                           MsgType::ping,
                           MsgType::pong,
                           MsgType::heartbeat,
                           MsgType::goodbye,
                           MsgType::config_read,
                           MsgType::config_write,
                           MsgType::mmio_read,
                           MsgType::mmio_write,
                           MsgType::read_reply,
                           MsgType::write_ack,
                           MsgType::interrupt,
                           MsgType::rma_notify,
                           MsgType::auth_hello,
                           MsgType::auth_challenge,
                           MsgType::auth_proof,
                           MsgType::auth_ok,
                           MsgType::list_request,
                           MsgType::list_reply,
                           MsgType::attach_request,
                           MsgType::attach_reply,
                           MsgType::bar_commit,
                           MsgType::bar_fetch,
                           MsgType::mmio_write_batch,
                           MsgType::window_push,
                           MsgType::sealed_hello,
                           MsgType::rma_put,
                           MsgType::rma_get,
                           MsgType::rma_data,
                           MsgType::rma_done,
                           MsgType::resume_request,
                           MsgType::resume_reply,
                           MsgType::telemetry_request,
                           MsgType::telemetry_reply};
  static_assert(std::size(all) == std::variant_size_v<Message>);
  for (std::size_t i = 0; i < std::size(all); ++i) {
    CHECK(proto::message_type(all[i]) == types[i]);
    CHECK(std::string_view(proto::msg_type_name(types[i])) != "unknown");
  }
  CHECK(std::string_view(proto::msg_type_name(static_cast<MsgType>(99))) == "unknown");
}

// --- Header rejections ----------------------------------------------------------------

TEST_CASE("empty input and input shorter than a header are rejected with EPROTO") {
  CHECK(decode_error({}) == EPROTO);
  Bytes valid = encode(proto::Goodbye{});
  for (std::size_t n = 1; n < proto::kHeaderSize; ++n) {
    CAPTURE(n);
    CHECK(decode_error(std::span(valid.data(), n)) == EPROTO);
  }
}

TEST_CASE("input longer than kMaxMessage is rejected with EMSGSIZE") {
  Bytes big(proto::kMaxPayload + 1, 0);
  Bytes msg = raw(MsgType::ping, big);
  REQUIRE(msg.size() == proto::kMaxMessage + 1);
  CHECK(decode_error(msg) == EMSGSIZE);
  Bytes huge(4 * proto::kMaxMessage, 0);
  CHECK(decode_error(huge) == EMSGSIZE);
}

TEST_CASE("a bad magic is rejected with EPROTO") {
  Bytes m = encode(proto::Goodbye{});
  m[0] ^= 0x01;
  CHECK(decode_error(m) == EPROTO);
  Bytes zeros(proto::kHeaderSize, 0);
  CHECK(decode_error(zeros) == EPROTO);
}

TEST_CASE("a version other than 1 is rejected with EPROTONOSUPPORT") {
  for (std::uint8_t v : {0, 2, 255}) {
    CAPTURE(int{v});
    Bytes m = encode(proto::Heartbeat{1});
    m[kOffVersion] = v;
    CHECK(decode_error(m) == EPROTONOSUPPORT);
  }
}

TEST_CASE("unknown message types are rejected with EPROTO") {
  for (int t : {0, 16 + 9, 31, 34, 64, 255}) {
    CAPTURE(t);
    Bytes m = raw(static_cast<std::uint8_t>(t), {});
    CHECK(decode_error(m) == EPROTO);
    Bytes with_payload = raw(static_cast<std::uint8_t>(t), Bytes(8, 0));
    CHECK(decode_error(with_payload) == EPROTO);
  }
}

TEST_CASE("header flags: the MAC bit is accepted (the frame layer checks it), any other is EPROTO") {
  for (std::uint16_t flags : {std::uint16_t{2}, std::uint16_t{3}, std::uint16_t{0x8000}, std::uint16_t{0xffff}}) {
    CAPTURE(flags);
    Bytes m = encode(proto::Heartbeat{1});
    put_u16(m, kOffFlags, flags);
    CHECK(decode_error(m) == EPROTO);
  }
  Bytes m = encode(proto::Heartbeat{1});
  put_u16(m, kOffFlags, proto::kFlagMac);
  auto d = proto::message_decode(m);
  REQUIRE(d);
  CHECK(d->header.flags == proto::kFlagMac);
}

TEST_CASE("a nonzero reserved header field is rejected with EPROTO") {
  for (std::uint32_t reserved : {1U, 0x80000000U, 0xffffffffU}) {
    Bytes m = encode(proto::Heartbeat{1});
    put_u32(m, kOffReserved, reserved);
    CHECK(decode_error(m) == EPROTO);
  }
}

TEST_CASE("a payload length that disagrees with the buffer is rejected with EPROTO both ways") {
  Bytes m = encode(proto::Heartbeat{1});
  put_u32(m, kOffLength, 7);  // says less than the buffer holds
  CHECK(decode_error(m) == EPROTO);
  put_u32(m, kOffLength, 9);  // says more than the buffer holds
  CHECK(decode_error(m) == EPROTO);
  put_u32(m, kOffLength, 0);
  CHECK(decode_error(m) == EPROTO);
  Bytes ping = encode(proto::Ping{});
  put_u32(ping, kOffLength, 1);
  CHECK(decode_error(ping) == EPROTO);
}

TEST_CASE("a payload length over the cap is rejected with EMSGSIZE") {
  for (std::uint32_t length : {static_cast<std::uint32_t>(proto::kMaxPayload + 1), 0x7fffffffU, 0xffffffffU}) {
    CAPTURE(length);
    Bytes m = encode(proto::Ping{});
    put_u32(m, kOffLength, length);
    CHECK(decode_error(m) == EMSGSIZE);
  }
}

// --- Payload rejections ----------------------------------------------------------------

TEST_CASE("every truncation of a valid hello fails cleanly, with the header kept or adjusted") {
  proto::Hello h = hello_make(3);
  Bytes valid = encode(h, 77);
  REQUIRE(proto::message_decode(valid).has_value());
  for (std::size_t n = 0; n < valid.size(); ++n) {
    CAPTURE(n);
    Bytes prefix(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(n));
    // Original header: the length field no longer matches (or the header itself is cut).
    CHECK(decode_error(prefix) == EPROTO);
    // Header adjusted to the truncated payload: the payload parser must notice.
    if (n >= proto::kHeaderSize) {
      put_u32(prefix, kOffLength, static_cast<std::uint32_t>(n - proto::kHeaderSize));
      CHECK(decode_error(prefix) == EPROTO);
    }
  }
}

TEST_CASE("every truncation of every fixed-size payload fails with EPROTO") {
  const Message all[] = {proto::ErrorMsg{EIO, "abc"}, proto::Heartbeat{1},      proto::ConfigRead{4, 4},
                         proto::ConfigWrite{4, 4, 1}, proto::MmioRead{1, 8, 8}, proto::MmioWrite{1, 8, 8, 1},
                         proto::ReadReply{0, 1},      proto::WriteAck{0},       proto::Interrupt{1, 1},
                         proto::RmaNotify{1, 2, 3, 4}};
  for (const Message& m : all) {
    CAPTURE(proto::msg_type_name(proto::message_type(m)));
    Bytes valid = encode(m);
    for (std::size_t n = proto::kHeaderSize; n < valid.size(); ++n) {
      CAPTURE(n);
      Bytes prefix(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(n));
      put_u32(prefix, kOffLength, static_cast<std::uint32_t>(n - proto::kHeaderSize));
      CHECK(decode_error(prefix) == EPROTO);
    }
  }
}

TEST_CASE("trailing bytes after a fixed-size payload are rejected with EPROTO") {
  const Message all[] = {proto::Heartbeat{1},          proto::Goodbye{},          proto::ConfigRead{4, 4},
                         proto::ConfigWrite{4, 4, 1},  proto::MmioRead{1, 8, 8},  proto::MmioWrite{1, 8, 8, 1},
                         proto::ReadReply{0, 1},       proto::WriteAck{0},        proto::Interrupt{1, 1},
                         proto::RmaNotify{1, 2, 3, 4}, proto::ErrorMsg{EIO, "x"}, proto::Hello{hello_make(1)}};
  for (const Message& m : all) {
    CAPTURE(proto::msg_type_name(proto::message_type(m)));
    Bytes b = encode(m);
    b.push_back(0);
    put_u32(b, kOffLength, static_cast<std::uint32_t>(b.size() - proto::kHeaderSize));
    CHECK(decode_error(b) == EPROTO);
  }
}

TEST_CASE("config accesses with a width other than 1, 2 or 4 are rejected with EPROTO") {
  for (int width : {0, 3, 5, 8, 255}) {
    CAPTURE(width);
    CHECK(decode_error(raw(MsgType::config_read, Le().u16(0).u8(width).bytes)) == EPROTO);
    CHECK(decode_error(raw(MsgType::config_write, Le().u16(0).u8(width).u32(0).bytes)) == EPROTO);
  }
}

TEST_CASE("config accesses misaligned or past the 4096-byte space are rejected with EPROTO") {
  // Misaligned.
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(2).u8(4).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(1).u8(2).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::config_write, Le().u16(6).u8(4).u32(0).bytes)) == EPROTO);
  // Past the end.
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(4096).u8(1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(4096).u8(4).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(0xfffc).u8(4).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::config_write, Le().u16(4096).u8(2).u32(0).bytes)) == EPROTO);
  // The last register of each width is fine.
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(4095).u8(1).bytes)) == 0);
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(4094).u8(2).bytes)) == 0);
  CHECK(decode_error(raw(MsgType::config_read, Le().u16(4092).u8(4).bytes)) == 0);
}

TEST_CASE("mmio accesses with a bad width, BAR 6 or up, or a misaligned offset are rejected with EPROTO") {
  for (int width : {0, 3, 5, 16}) {
    CAPTURE(width);
    CHECK(decode_error(raw(MsgType::mmio_read, Le().u8(0).u8(width).u64(0).bytes)) == EPROTO);
    CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(0).u8(width).u64(0).u64(0).bytes)) == EPROTO);
  }
  for (int bar : {6, 7, 255}) {
    CAPTURE(bar);
    CHECK(decode_error(raw(MsgType::mmio_read, Le().u8(bar).u8(4).u64(0).bytes)) == EPROTO);
    CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(bar).u8(4).u64(0).u64(0).bytes)) == EPROTO);
  }
  CHECK(decode_error(raw(MsgType::mmio_read, Le().u8(0).u8(8).u64(4).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::mmio_read, Le().u8(0).u8(2).u64(1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(0).u8(4).u64(2).u64(0).bytes)) == EPROTO);
  // BAR 5 with an aligned offset is fine.
  CHECK(decode_error(raw(MsgType::mmio_read, Le().u8(5).u8(8).u64(0x1000).bytes)) == 0);
}

TEST_CASE("write values that do not fit the access width are rejected with EPROTO") {
  CHECK(decode_error(raw(MsgType::config_write, Le().u16(0).u8(1).u32(0x100).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::config_write, Le().u16(0).u8(2).u32(0x10000).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(0).u8(1).u64(0).u64(0x100).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(0).u8(2).u64(0).u64(0x10000).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(0).u8(4).u64(0).u64(0x100000000ULL).bytes)) == EPROTO);
  // The largest value of each width is fine.
  CHECK(decode_error(raw(MsgType::config_write, Le().u16(0).u8(1).u32(0xff).bytes)) == 0);
  CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(0).u8(4).u64(0).u64(0xffffffffULL).bytes)) == 0);
  CHECK(decode_error(raw(MsgType::mmio_write, Le().u8(0).u8(8).u64(0).u64(~0ULL).bytes)) == 0);
}

TEST_CASE("an interrupt vector at or above kMaxVector is rejected with EPROTO") {
  CHECK(decode_error(raw(MsgType::interrupt, Le().u16(proto::kMaxVector).u64(1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::interrupt, Le().u16(0xffff).u64(1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::interrupt, Le().u16(proto::kMaxVector - 1).u64(1).bytes)) == 0);
}

TEST_CASE("a hello listing more than kMaxRegions regions is rejected with EPROTO") {
  HelloFields f;
  f.region_count = proto::kMaxRegions + 1;
  f.regions_present = proto::kMaxRegions + 1;
  CHECK(decode_error(raw(MsgType::hello, hello_payload(f))) == EPROTO);
  CHECK(decode_error(raw(MsgType::hello_ack, hello_payload(f))) == EPROTO);
  f.region_count = proto::kMaxRegions;
  f.regions_present = proto::kMaxRegions;
  CHECK(decode_error(raw(MsgType::hello, hello_payload(f))) == 0);
}

TEST_CASE("a hello claiming 255 regions is rejected without allocating room for them") {
  HelloFields f;
  f.region_count = 255;
  f.regions_present = 0;
  Bytes m = raw(MsgType::hello, hello_payload(f));
  int code = -1;
  std::size_t largest = largest_allocation([&] { code = decode_error(m); });
  CHECK(code == EPROTO);
  // 255 descriptors would be 255 * 32 bytes; the decoder may allocate its error text but
  // never room for more than kMaxRegions descriptors.
  CHECK(largest <= proto::kMaxRegions * sizeof(proto::RegionDescriptor));
  f.regions_present = 255;  // all present: still refused by the cap
  Bytes full = raw(MsgType::hello, hello_payload(f));
  largest = largest_allocation([&] { code = decode_error(full); });
  CHECK(code == EPROTO);
  CHECK(largest <= proto::kMaxRegions * sizeof(proto::RegionDescriptor));
  // The tracker does see the decoder's allocations: a valid hello at the cap reserves them.
  f.region_count = proto::kMaxRegions;
  f.regions_present = proto::kMaxRegions;
  Bytes at_cap = raw(MsgType::hello, hello_payload(f));
  largest = largest_allocation([&] { code = decode_error(at_cap); });
  CHECK(code == 0);
  CHECK(largest >= proto::kMaxRegions * sizeof(proto::RegionDescriptor));
}

TEST_CASE("a hello with an empty provider or an empty fabric address is rejected with EPROTO") {
  HelloFields empty_provider;
  empty_provider.provider = "";
  CHECK(decode_error(raw(MsgType::hello, hello_payload(empty_provider))) == EPROTO);
  HelloFields empty_address;
  empty_address.address_length = 0;
  CHECK(decode_error(raw(MsgType::hello, hello_payload(empty_address))) == EPROTO);
  CHECK(decode_error(raw(MsgType::hello_ack, hello_payload(empty_address))) == EPROTO);
}

TEST_CASE("a hello with over-long provider, fabric address or nonce is rejected with EPROTO") {
  HelloFields provider;
  provider.provider = std::string(proto::kMaxProviderName + 1, 'p');
  CHECK(decode_error(raw(MsgType::hello, hello_payload(provider))) == EPROTO);
  HelloFields address;
  address.address_length = proto::kMaxFabricAddress + 1;
  CHECK(decode_error(raw(MsgType::hello, hello_payload(address))) == EPROTO);
  HelloFields nonce;
  nonce.nonce_length = proto::kMaxNonce + 1;
  CHECK(decode_error(raw(MsgType::hello, hello_payload(nonce))) == EPROTO);
  // Each at its cap is fine; the host is capped by its one-byte length.
  HelloFields caps;
  caps.provider = std::string(proto::kMaxProviderName, 'p');
  caps.host = std::string(proto::kMaxHostName, 'h');
  caps.address_length = proto::kMaxFabricAddress;
  caps.nonce_length = proto::kMaxNonce;
  CHECK(decode_error(raw(MsgType::hello, hello_payload(caps))) == 0);
}

TEST_CASE("a hello whose length fields point past the payload is rejected with EPROTO") {
  Bytes p = hello_payload(HelloFields{});
  p[0] = 255;  // provider length far beyond the payload
  CHECK(decode_error(raw(MsgType::hello, p)) == EPROTO);
  Bytes q = hello_payload(HelloFields{});
  std::size_t address_length_at = 1 + 11 + 1 + 1;  // provider "tcp;ofi_rxm", host "h"
  q[address_length_at] = 0xff;
  q[address_length_at + 1] = 0xff;
  CHECK(decode_error(raw(MsgType::hello, q)) == EPROTO);
}

TEST_CASE("an error message with text over kMaxErrorText or a non-positive code is rejected with EPROTO") {
  std::string text(proto::kMaxErrorText + 1, 'e');
  CHECK(decode_error(raw(MsgType::error, Le().u32(EIO).u16(text.size()).text(text).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::error, Le().u32(0).u16(2).text("no").bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::error, Le().u32(0xffffffffU).u16(2).text("no").bytes)) == EPROTO);
  // Text length claiming more than is there.
  CHECK(decode_error(raw(MsgType::error, Le().u32(EIO).u16(10).text("short").bytes)) == EPROTO);
}

TEST_CASE("a negative status in read_reply or write_ack is rejected with EPROTO") {
  CHECK(decode_error(raw(MsgType::read_reply, Le().u32(0xffffffffU).u64(0).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::read_reply, Le().u32(0x80000000U).u64(0).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::write_ack, Le().u32(0xfffffffbU).bytes)) == EPROTO);
}

TEST_CASE("random corruption of valid messages never crashes the decoder") {
  // A deterministic xorshift so a failure reproduces.
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  static const std::uint8_t kPushSeed[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const Message seeds[] = {proto::Hello{hello_make(4)},  proto::ErrorMsg{EIO, "text"},
                           proto::MmioWrite{1, 8, 8, 9}, proto::RmaNotify{1, 2, 3, 4},
                           proto::ConfigWrite{8, 4, 5},  proto::WindowPush{64, kPushSeed, {{0, 8, 0x98, 5}}}};
  std::size_t decoded = 0;
  for (const Message& seed : seeds) {
    Bytes valid = encode(seed);
    for (int round = 0; round < 2000; ++round) {
      Bytes b = valid;
      int flips = 1 + static_cast<int>(next() % 4);
      for (int i = 0; i < flips; ++i) b[next() % b.size()] = static_cast<std::uint8_t>(next());
      if (next() % 4 == 0) b.resize(next() % (b.size() + 1));
      if (proto::message_decode(b)) ++decoded;
    }
  }
  CHECK(decoded < 5 * 2000);  // something was rejected; the point is that nothing crashed
}

// --- Encoder refusals -------------------------------------------------------------------

TEST_CASE("the encoder refuses messages the decoder would reject with EINVAL") {
  std::string long_provider(proto::kMaxProviderName + 1, 'p');
  std::string long_host(proto::kMaxHostName + 1, 'h');
  Bytes long_address(proto::kMaxFabricAddress + 1, 1);
  Bytes long_nonce(proto::kMaxNonce + 1, 1);
  std::string long_text(proto::kMaxErrorText + 1, 'e');
  Bytes too_big(proto::kMaxPayload + 1, 0);

  proto::Hello h = hello_make(1);
  h.provider = "";
  CHECK(encode_error(h) == EINVAL);
  h = hello_make(1);
  h.provider = long_provider;
  CHECK(encode_error(h) == EINVAL);
  h = hello_make(1);
  h.host = long_host;
  CHECK(encode_error(h) == EINVAL);
  h = hello_make(1);
  h.fabric_address = {};
  CHECK(encode_error(h) == EINVAL);
  h = hello_make(1);
  h.fabric_address = long_address;
  CHECK(encode_error(h) == EINVAL);
  h = hello_make(1);
  h.nonce = long_nonce;
  CHECK(encode_error(h) == EINVAL);
  h = hello_make(proto::kMaxRegions + 1);
  CHECK(encode_error(h) == EINVAL);
  proto::HelloAck ack;
  static_cast<proto::Hello&>(ack) = hello_make(proto::kMaxRegions + 1);
  CHECK(encode_error(ack) == EINVAL);

  CHECK(encode_error(proto::ErrorMsg{0, "x"}) == EINVAL);
  CHECK(encode_error(proto::ErrorMsg{-5, "x"}) == EINVAL);
  CHECK(encode_error(proto::ErrorMsg{EIO, long_text}) == EINVAL);
  CHECK(encode_error(proto::Ping{too_big}) == EINVAL);
  CHECK(encode_error(proto::Pong{{too_big}}) == EINVAL);
  CHECK(encode_error(proto::ConfigRead{0, 3}) == EINVAL);
  CHECK(encode_error(proto::ConfigRead{0, 8}) == EINVAL);
  CHECK(encode_error(proto::ConfigRead{2, 4}) == EINVAL);
  CHECK(encode_error(proto::ConfigRead{4096, 1}) == EINVAL);
  CHECK(encode_error(proto::ConfigWrite{0, 1, 0x100}) == EINVAL);
  CHECK(encode_error(proto::MmioRead{6, 4, 0}) == EINVAL);
  CHECK(encode_error(proto::MmioRead{0, 16, 0}) == EINVAL);
  CHECK(encode_error(proto::MmioRead{0, 3, 0}) == EINVAL);
  CHECK(encode_error(proto::MmioRead{0, 8, 4}) == EINVAL);
  CHECK(encode_error(proto::MmioWrite{0, 2, 0, 0x10000}) == EINVAL);
  CHECK(encode_error(proto::ReadReply{-1, 0}) == EINVAL);
  CHECK(encode_error(proto::WriteAck{-1}) == EINVAL);
  CHECK(encode_error(proto::Interrupt{proto::kMaxVector, 0}) == EINVAL);
}

TEST_CASE("the encoder refuses an output buffer one byte too small with EMSGSIZE") {
  const Message all[] = {proto::Hello{hello_make(2)}, proto::ErrorMsg{EIO, "abc"}, proto::Goodbye{},
                         proto::Heartbeat{1}, proto::MmioWrite{1, 8, 8, 1}};
  for (const Message& m : all) {
    CAPTURE(proto::msg_type_name(proto::message_type(m)));
    std::size_t size = proto::message_encoded_size(m);
    Bytes out(size - 1, 0xee);
    auto n = proto::message_encode(m, 1, out);
    REQUIRE_FALSE(n.has_value());
    CHECK(n.error().code == EMSGSIZE);
    CHECK(std::all_of(out.begin(), out.end(), [](std::uint8_t b) { return b == 0xee; }));
    Bytes none;
    auto z = proto::message_encode(m, 1, none);
    REQUIRE_FALSE(z.has_value());
    CHECK(z.error().code == EMSGSIZE);
  }
}

// --- Checksum ---------------------------------------------------------------------------

TEST_CASE("checksum_fnv1a matches the published FNV-1a 64 vectors") {
  CHECK(proto::checksum_fnv1a({}) == 0xcbf29ce484222325ULL);
  const std::uint8_t a[] = {'a'};
  CHECK(proto::checksum_fnv1a(a) == 0xaf63dc4c8601ec8cULL);
  const std::string foobar = "foobar";
  CHECK(proto::checksum_fnv1a({reinterpret_cast<const std::uint8_t*>(foobar.data()), foobar.size()}) ==
        0x85944171f73967e8ULL);
}

TEST_CASE("checksum_fnv1a chains: hashing in two parts with the first result as seed equals one pass") {
  Bytes data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i);
  std::span<const std::uint8_t> all(data);
  std::uint64_t first = proto::checksum_fnv1a(all.first(400));
  CHECK(proto::checksum_fnv1a(all.subspan(400), first) == proto::checksum_fnv1a(all));
}

// --- FrameReader ------------------------------------------------------------------------

namespace {

Bytes frame_of(const Bytes& message) {
  Bytes f = Le().u32(message.size()).bytes;
  f.insert(f.end(), message.begin(), message.end());
  return f;
}

}  // namespace

TEST_CASE("FrameReader delivers a whole frame fed at once") {
  Bytes msg = encode(proto::Heartbeat{42}, 9);
  Bytes frame = frame_of(msg);
  proto::FrameReader reader;
  CHECK(reader.wanted() == proto::kFramePrefix);
  CHECK(reader.feed(frame) == frame.size());
  CHECK(reader.wanted() == 0);
  auto got = reader.next();
  REQUIRE(got.has_value());
  CHECK(same_bytes(*got, msg));
  auto d = proto::message_decode(*got);
  REQUIRE(d.has_value());
  CHECK(as<proto::Heartbeat>(*d).sequence == 42);
}

TEST_CASE("FrameReader delivers a frame fed one byte at a time, asking for exactly what is missing") {
  Bytes payload(300, 0x33);
  Bytes msg = encode(proto::Ping{payload});
  Bytes frame = frame_of(msg);
  proto::FrameReader reader;
  for (std::size_t i = 0; i < frame.size(); ++i) {
    CAPTURE(i);
    std::size_t expected_wanted = i < proto::kFramePrefix ? proto::kFramePrefix - i : frame.size() - i;
    CHECK(reader.wanted() == expected_wanted);
    auto before = reader.next();
    REQUIRE(before.has_value());
    CHECK(before->empty());
    CHECK(reader.feed(std::span(&frame[i], 1)) == 1);
  }
  auto got = reader.next();
  REQUIRE(got.has_value());
  CHECK(same_bytes(*got, msg));
}

TEST_CASE("FrameReader stops after one frame so two back-to-back frames come out one by one") {
  Bytes m1 = encode(proto::Heartbeat{1}, 1);
  Bytes m2 = encode(proto::Ping{Bytes(100, 7)}, 2);
  Bytes stream = frame_of(m1);
  Bytes f2 = frame_of(m2);
  stream.insert(stream.end(), f2.begin(), f2.end());

  proto::FrameReader reader;
  std::size_t used = reader.feed(stream);
  CHECK(used == proto::kFramePrefix + m1.size());
  CHECK(reader.feed(std::span(stream).subspan(used)) == 0);  // holds a whole frame: takes nothing more
  auto first = reader.next();
  REQUIRE(first.has_value());
  CHECK(same_bytes(*first, m1));
  CHECK(reader.feed(std::span(stream).subspan(used)) == f2.size());
  auto second = reader.next();
  REQUIRE(second.has_value());
  CHECK(same_bytes(*second, m2));
  // Nothing more until more bytes arrive.
  CHECK(reader.feed({}) == 0);
  auto none = reader.next();
  REQUIRE(none.has_value());
  CHECK(none->empty());
  CHECK(reader.wanted() == proto::kFramePrefix);
}

TEST_CASE("FrameReader accepts a frame of exactly kMaxMessage bytes") {
  Bytes msg = encode(proto::Ping{Bytes(proto::kMaxPayload, 0x42)});
  REQUIRE(msg.size() == proto::kMaxMessage);
  Bytes frame = frame_of(msg);
  proto::FrameReader reader;
  CHECK(reader.feed(frame) == frame.size());
  auto got = reader.next();
  REQUIRE(got.has_value());
  CHECK(got->size() == proto::kMaxMessage);
}

TEST_CASE("FrameReader fails with EMSGSIZE on a length prefix over kMaxFrame (message + MAC) and stays failed") {
  for (std::uint32_t length : {static_cast<std::uint32_t>(proto::kMaxFrame + 1), 0xffffffffU}) {
    CAPTURE(length);
    proto::FrameReader reader;
    Bytes stream = Le().u32(length).fill(64, 0).bytes;
    CHECK(reader.feed(stream) == proto::kFramePrefix);  // takes the prefix, nothing of the body
    CHECK(reader.wanted() == 0);
    auto r = reader.next();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EMSGSIZE);
    // Unusable from now on, even when offered a good frame.
    Bytes good = frame_of(encode(proto::Goodbye{}));
    CHECK(reader.feed(good) == 0);
    CHECK(reader.wanted() == 0);
    CHECK_FALSE(reader.next().has_value());
    CHECK_FALSE(reader.next().has_value());
  }
}

TEST_CASE("FrameReader fails with EPROTO on a length prefix smaller than a header, before the body arrives") {
  for (std::uint32_t length : {0U, 1U, static_cast<std::uint32_t>(proto::kHeaderSize - 1)}) {
    CAPTURE(length);
    proto::FrameReader reader;
    Bytes prefix = Le().u32(length).bytes;
    CHECK(reader.feed(prefix) == proto::kFramePrefix);
    auto r = reader.next();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EPROTO);
    CHECK_FALSE(reader.next().has_value());
  }
}

TEST_CASE("FrameReader reports wanted() through prefix, partial body and completion") {
  Bytes msg = encode(proto::Ping{Bytes(1000, 1)});
  Bytes frame = frame_of(msg);
  proto::FrameReader reader;
  CHECK(reader.wanted() == 4);
  CHECK(reader.feed(std::span(frame).first(3)) == 3);
  CHECK(reader.wanted() == 1);
  CHECK(reader.feed(std::span(frame).subspan(3, 1)) == 1);
  CHECK(reader.wanted() == msg.size());
  CHECK(reader.feed(std::span(frame).subspan(4, 500)) == 500);
  CHECK(reader.wanted() == msg.size() - 500);
  CHECK(reader.feed(std::span(frame).subspan(504)) == msg.size() - 500);
  CHECK(reader.wanted() == 0);
  auto got = reader.next();
  REQUIRE(got.has_value());
  CHECK(got->size() == msg.size());
}

// --- Authentication, exports and bounce-buffer messages --------------------------------

namespace {
proto::ExportEntry entry_sample(std::string_view name) {
  proto::ExportEntry e;
  e.name = name;
  e.backend = "edu";
  e.holder = "alice";
  e.vendor = 0x1234;
  e.device = 0x11e8;
  e.class_code = 0x00ff00;
  e.subsystem_vendor = 0x1af4;
  e.subsystem_device = 0x1100;
  e.revision = 0x10;
  e.state = proto::ExportState::attached;
  e.flags = proto::kExportMirror;
  e.vectors = 1;
  e.bars = {{0, proto::BarKind::registers, 0, 1 << 20},
            {2, proto::BarKind::memory, proto::kBarFlag64 | proto::kBarFlagDirect, 1ULL << 32}};
  return e;
}
}  // namespace

TEST_CASE("auth messages round-trip and insist on 32-byte nonces and proofs") {
  Bytes nonce(proto::kAuthBytes, 0xa5), proof(proto::kAuthBytes, 0x5a), s1, s2, s3;
  auto h = round_trip(proto::AuthHello{"node-7", nonce}, 70, s1);
  CHECK(as<proto::AuthHello>(h).client == "node-7");
  CHECK(Bytes(as<proto::AuthHello>(h).nonce.begin(), as<proto::AuthHello>(h).nonce.end()) == nonce);
  auto c = round_trip(proto::AuthChallenge{nonce, proof}, 71, s2);
  CHECK(Bytes(as<proto::AuthChallenge>(c).proof.begin(), as<proto::AuthChallenge>(c).proof.end()) == proof);
  auto p = round_trip(proto::AuthProof{proof}, 72, s3);
  CHECK(as<proto::AuthProof>(p).proof.size() == proto::kAuthBytes);
  Bytes short_nonce(31, 1);
  CHECK(encode_error(proto::AuthHello{"x", short_nonce}) == EINVAL);
  CHECK(encode_error(proto::AuthHello{"", nonce}) == EINVAL);
  CHECK(encode_error(proto::AuthChallenge{nonce, short_nonce}) == EINVAL);
  // Hand-made: a proof one byte short, one byte long, a name over the cap.
  CHECK(decode_error(raw(MsgType::auth_proof, Bytes(31, 0))) == EPROTO);
  CHECK(decode_error(raw(MsgType::auth_proof, Bytes(33, 0))) == EPROTO);
  Le long_name;
  long_name.u8(65).fill(65, 'a').fill(proto::kAuthBytes, 0);
  CHECK(decode_error(raw(MsgType::auth_hello, long_name.bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::auth_ok, Bytes(1, 0))) == EPROTO);
}

TEST_CASE("list_reply and attach_reply carry export entries exactly") {
  Bytes s1, s2;
  proto::ListReply l;
  l.exports = {entry_sample("dev0"), entry_sample("dev1")};
  l.exports[1].state = proto::ExportState::free;
  l.exports[1].holder = "";
  auto d = round_trip(l, 80, s1);
  const auto& got = as<proto::ListReply>(d);
  REQUIRE(got.exports.size() == 2);
  CHECK(got.exports[0].name == "dev0");
  CHECK(got.exports[0].holder == "alice");
  CHECK(got.exports[0].class_code == 0x00ff00);
  CHECK(got.exports[0].flags == proto::kExportMirror);
  REQUIRE(got.exports[0].bars.size() == 2);
  CHECK(got.exports[0].bars[1].size == 1ULL << 32);
  CHECK(got.exports[0].bars[1].flags == (proto::kBarFlag64 | proto::kBarFlagDirect));
  CHECK(got.exports[1].state == proto::ExportState::free);
  auto a = round_trip(proto::AttachReply{entry_sample("dev0"), 5000, 42}, 81, s2);
  CHECK(as<proto::AttachReply>(a).lease_ms == 5000);
  CHECK(as<proto::AttachReply>(a).attachment_id == 42);
  CHECK(as<proto::AttachReply>(a).info.revision == 0x10);
}

TEST_CASE("resume_request and resume_reply round trip; a performed order with bit 63 is refused") {
  Bytes s1, s2;
  auto q = round_trip(proto::ResumeRequest{42, 0x8000000000000007ULL}, 5, s1);
  CHECK(as<proto::ResumeRequest>(q).attachment_id == 42);
  CHECK(as<proto::ResumeRequest>(q).answered == 0x8000000000000007ULL);
  auto r = round_trip(proto::ResumeReply{0x7fffffffffffffffULL}, 5, s2);
  CHECK(as<proto::ResumeReply>(r).performed == 0x7fffffffffffffffULL);
  CHECK(encode_error(proto::ResumeReply{0x8000000000000000ULL}) == EINVAL);
  auto bytes = proto::message_encode(proto::ResumeReply{1}, 5);
  REQUIRE(bytes);
  (*bytes)[proto::kHeaderSize + 7] = 0x80;  // performed's top byte: bit 63 set
  auto d = proto::message_decode(*bytes);
  REQUIRE_FALSE(d);
  CHECK(d.error().code == EPROTO);
}

TEST_CASE("telemetry_request and telemetry_reply round trip; a histogram of another bucket count is refused") {
  using rpcie::LatencyHistogram, rpcie::latency_counts_of, rpcie::snapshot_of;
  Bytes s1, s2;
  auto q = round_trip(proto::TelemetryRequest{}, 9, s1);
  CHECK(std::holds_alternative<proto::TelemetryRequest>(q.message));
  LatencyHistogram h;
  h.record(std::chrono::microseconds(3));
  h.record(std::chrono::microseconds(3));
  h.record(std::chrono::seconds(11));
  proto::TelemetryReply t{.dma_read_bytes = 4096,
                          .dma_written_bytes = 0xffffffffffffffffULL,
                          .dma_read = latency_counts_of(h.snapshot()),
                          .dma_write = latency_counts_of(LatencyHistogram::Snapshot{}),
                          .window_pull = latency_counts_of(LatencyHistogram::Snapshot{}),
                          .interrupt = latency_counts_of(h.snapshot())};
  auto r = round_trip(t, 9, s2);
  const auto& got = as<proto::TelemetryReply>(r);
  CHECK(got.dma_read_bytes == 4096);
  CHECK(got.dma_written_bytes == 0xffffffffffffffffULL);
  const auto back = snapshot_of(got.dma_read);
  CHECK(back.count == 3);
  CHECK(back.sum_ns == 11'000'006'000ULL);
  CHECK(back.counts[LatencyHistogram::bucket_of(3'000)] == 2);
  CHECK(back.counts[LatencyHistogram::kBuckets] == 1);  // above 10 s
  CHECK(snapshot_of(got.interrupt).count == 3);
  CHECK(snapshot_of(got.dma_write).count == 0);
  CHECK(got.window_pull.buckets.size() == proto::kLatencyBuckets);

  // The bucket list is exactly kLatencyBuckets long, both ways.
  auto short_list = t;
  short_list.dma_write.buckets.pop_back();
  CHECK(encode_error(short_list) == EINVAL);
  auto bytes = proto::message_encode(t, 9);
  REQUIRE(bytes);
  // dma_read's count byte follows the two byte counts and its sum: 22 buckets claimed.
  const std::size_t count_at = proto::kHeaderSize + 8 + 8 + 8;
  REQUIRE((*bytes)[count_at] == proto::kLatencyBuckets);
  (*bytes)[count_at] = proto::kLatencyBuckets - 1;
  auto d = proto::message_decode(*bytes);
  REQUIRE_FALSE(d);
  CHECK(d.error().code == EPROTO);
}

TEST_CASE("export entries out of range are refused by encoder and decoder") {
  auto bad = [](auto mutate) {
    proto::ListReply l;
    l.exports = {entry_sample("dev0")};
    mutate(l.exports[0]);
    return l;
  };
  std::vector<proto::ListReply> cases = {
      bad([](proto::ExportEntry& e) { e.class_code = 0x1000000; }),
      bad([](proto::ExportEntry& e) { e.name = ""; }),
      bad([](proto::ExportEntry& e) { e.bars[1].bar = 0; }),  // duplicate BAR number
      bad([](proto::ExportEntry& e) { e.bars[1].bar = 6; }),
      bad([](proto::ExportEntry& e) { e.bars[0].size = 0; }),
      bad([](proto::ExportEntry& e) { e.bars[0].flags = 8; }),
      bad([](proto::ExportEntry& e) { e.bars[0].kind = static_cast<proto::BarKind>(4); }),
      bad([](proto::ExportEntry& e) { e.state = static_cast<proto::ExportState>(2); }),
      bad([](proto::ExportEntry& e) { e.flags = 16; }),  // an unknown flag
      // sealed only and open only at once
      bad([](proto::ExportEntry& e) { e.flags = proto::kExportSealedOnly | proto::kExportOpenOnly; }),
      bad([](proto::ExportEntry& e) { e.vectors = proto::kMaxVector + 1; }),
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    CHECK(encode_error(cases[i]) == EINVAL);
  }
  // The decoder's view: patch the class code of a valid encoding to 25 bits.
  proto::ListReply l;
  l.exports = {entry_sample("dev0")};
  Bytes m = encode(l);
  // payload: count u16, name (1+4), backend (1+3), holder (1+5), vendor, device, then class.
  const std::size_t class_at = proto::kHeaderSize + 2 + 5 + 4 + 6 + 2 + 2;
  REQUIRE(m[class_at + 1] == 0xff);
  put_u32(m, class_at, 0x01000000);
  CHECK(decode_error(m) == EPROTO);
  // A count over the cap, with nothing behind it.
  Le many;
  many.u16(proto::kMaxExports + 1);
  CHECK(decode_error(raw(MsgType::list_reply, many.bytes)) == EPROTO);
  // A count that promises more entries than there are bytes.
  Le promise;
  promise.u16(3);
  CHECK(decode_error(raw(MsgType::list_reply, promise.bytes)) == EPROTO);
  // Too many BARs in one entry.
  Bytes seven = encode(l);
  const std::size_t nbars_at = class_at + 4 + 2 + 2 + 1 + 1 + 1 + 2;
  REQUIRE(seven[nbars_at] == 2);
  seven[nbars_at] = 7;
  CHECK(decode_error(seven) == EPROTO);
}

TEST_CASE("a maximal list_reply fits the payload cap") {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < proto::kMaxExports; ++i)
    names.push_back(std::string(proto::kMaxNameText - 3, 'n') + std::to_string(100 + i));
  proto::ListReply l;
  for (const auto& n : names) {
    auto e = entry_sample(n);
    e.backend = std::string_view("pci-sysfs-backend-name-32-bytes!");
    e.holder = n;
    e.bars.clear();
    for (std::uint8_t b = 0; b < rpcie::pci::kBarCount; ++b) e.bars.push_back({b, proto::BarKind::memory, 0, 4096});
    l.exports.push_back(e);
  }
  Bytes storage;
  auto d = round_trip(l, 90, storage);
  CHECK(as<proto::ListReply>(d).exports.size() == proto::kMaxExports);
}

TEST_CASE("attach_request, bar_commit and bar_fetch round-trip; overflowing ranges are refused") {
  Bytes s1, s2, s3;
  auto a = round_trip(proto::AttachRequest{"dev0", 16 << 20}, 100, s1);
  CHECK(as<proto::AttachRequest>(a).export_name == "dev0");
  CHECK(as<proto::AttachRequest>(a).window_size == 16 << 20);
  CHECK(as<proto::AttachRequest>(a).flags == 0);
  Bytes s4;
  auto pushed = round_trip(proto::AttachRequest{"dev1", 4096, proto::kAttachWindowPush}, 103, s4);
  CHECK(as<proto::AttachRequest>(pushed).flags == proto::kAttachWindowPush);
  CHECK(encode_error(proto::AttachRequest{"dev1", 4096, 0x80}) == EINVAL);
  // An unknown flag; then no flags; then no data_path.
  CHECK(decode_error(raw(MsgType::attach_request, Le().u8(4).text("dev1").u64(4096).u8(0x04).u8(2).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::attach_request, Le().u8(4).text("dev1").u64(4096).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::attach_request, Le().u8(4).text("dev1").u64(4096).u8(0).bytes)) == EPROTO);
  auto c = round_trip(proto::BarCommit{2, 4096, 1 << 20, 0}, 101, s2);
  CHECK(as<proto::BarCommit>(c).bar == 2);
  CHECK(as<proto::BarCommit>(c).length == 1 << 20);
  proto::BarFetch f;
  f.bar = 1;
  f.offset = 8;
  f.length = 16;
  f.bounce_offset = 32;
  auto fd = round_trip(f, 102, s3);
  CHECK(as<proto::BarFetch>(fd).bounce_offset == 32);
  CHECK(encode_error(proto::BarCommit{6, 0, 1, 0}) == EINVAL);
  CHECK(encode_error(proto::BarCommit{0, 0, 0, 0}) == EINVAL);
  CHECK(encode_error(proto::BarCommit{0, ~std::uint64_t{0}, 2, 0}) == EINVAL);
  CHECK(encode_error(proto::AttachRequest{"", 0}) == EINVAL);
}

TEST_CASE("the data path travels in hello, attach_request (with insist) and attach_reply; only sealed or open") {
  Bytes s1, s2, s3;
  auto a = round_trip(proto::AttachRequest{"dev0", 0, proto::kAttachDataPathInsist, proto::kDataPathSealed}, 1, s1);
  CHECK(as<proto::AttachRequest>(a).flags == proto::kAttachDataPathInsist);
  CHECK(as<proto::AttachRequest>(a).data_path == proto::kDataPathSealed);
  auto r = round_trip(proto::AttachReply{entry_sample("dev0"), 5000, 7, proto::kDataPathSealed}, 2, s2);
  CHECK(as<proto::AttachReply>(r).data_path == proto::kDataPathSealed);
  proto::Hello h = hello_make(1);
  h.data_path = proto::kDataPathSealed;
  auto hd = round_trip(h, 3, s3);
  CHECK(as<proto::Hello>(hd).data_path == proto::kDataPathSealed);
  for (std::uint8_t bad : {std::uint8_t{0}, std::uint8_t{3}, std::uint8_t{255}}) {
    CAPTURE(int(bad));
    CHECK(encode_error(proto::AttachRequest{"dev0", 0, 0, bad}) == EINVAL);
    CHECK(encode_error(proto::AttachReply{entry_sample("dev0"), 5000, 7, bad}) == EINVAL);
    proto::Hello bad_hello = hello_make(0);
    bad_hello.data_path = bad;
    CHECK(encode_error(bad_hello) == EINVAL);
    CHECK(decode_error(raw(MsgType::attach_request, Le().u8(4).text("dev1").u64(0).u8(0).u8(bad).bytes)) == EPROTO);
    HelloFields f;
    f.data_path = bad;
    CHECK(decode_error(raw(MsgType::hello, hello_payload(f))) == EPROTO);
  }
}

TEST_CASE("mmio_write_batch round-trips in order and is bounded") {
  proto::MmioWriteBatch b;
  for (std::uint64_t i = 0; i < proto::kMaxBatch; ++i)
    b.writes.push_back({static_cast<std::uint8_t>(i % 6), 8, i * 8, ~i});
  Bytes storage;
  auto d = round_trip(b, 110, storage);
  const auto& got = as<proto::MmioWriteBatch>(d);
  REQUIRE(got.writes.size() == proto::kMaxBatch);
  for (std::size_t i = 0; i < got.writes.size(); ++i) {
    CHECK(got.writes[i].offset == i * 8);
    CHECK(got.writes[i].value == ~std::uint64_t{i});
  }
  CHECK(encode_error(proto::MmioWriteBatch{}) == EINVAL);
  b.writes.push_back({0, 4, 0, 0});
  CHECK(encode_error(b) == EINVAL);  // one over the cap
  proto::MmioWriteBatch bad;
  bad.writes = {{0, 4, 0, 1}, {0, 4, 2, 0}};  // the second is misaligned
  CHECK(encode_error(bad) == EINVAL);
  // Hand-made: a count of zero, over the cap, and one entry short.
  CHECK(decode_error(raw(MsgType::mmio_write_batch, Le().u16(0).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::mmio_write_batch, Le().u16(proto::kMaxBatch + 1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::mmio_write_batch, Le().u16(2).u8(0).u8(4).u64(0).u64(1).bytes)) == EPROTO);
  // A value wider than its width inside a batch.
  CHECK(decode_error(raw(MsgType::mmio_write_batch, Le().u16(1).u8(0).u8(1).u64(0).u64(0x100).bytes)) == EPROTO);
}

TEST_CASE("window_push carries its bytes and the writes after them, in order, and is bounded") {
  std::vector<std::uint8_t> data(4096);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7 + 1);
  proto::WindowPush p{0x2000, data, {{0, 8, 0x98, 5}, {0, 4, 0x64, 0x100}}};
  Bytes storage;
  auto d = round_trip(p, 120, storage);
  const auto& got = as<proto::WindowPush>(d);
  CHECK(got.window_offset == 0x2000);
  CHECK(same_bytes(got.data, data));
  REQUIRE(got.writes.size() == 2);
  CHECK(got.writes[0].offset == 0x98);
  CHECK(got.writes[0].value == 5);
  CHECK(got.writes[1].offset == 0x64);
  // Bytes alone (no writes) are a valid push; the largest push fits one message.
  std::vector<std::uint8_t> big(proto::kMaxPushBytes, 0xa5);
  Bytes s2;
  auto alone = round_trip(proto::WindowPush{0, big, {}}, 121, s2);
  CHECK(as<proto::WindowPush>(alone).writes.empty());
  CHECK(as<proto::WindowPush>(alone).data.size() == proto::kMaxPushBytes);
  // Refused when encoding: no bytes, too many, an offset that wraps, a bad write, too many writes.
  CHECK(encode_error(proto::WindowPush{0, {}, {}}) == EINVAL);
  big.push_back(0);
  CHECK(encode_error(proto::WindowPush{0, big, {}}) == EINVAL);
  CHECK(encode_error(proto::WindowPush{~std::uint64_t{0}, data, {}}) == EINVAL);
  CHECK(encode_error(proto::WindowPush{0, data, {{0, 4, 2, 0}}}) == EINVAL);
  proto::WindowPush many{0, data, {}};
  many.writes.assign(proto::kMaxBatch + 1, proto::MmioWrite{0, 4, 0, 0});
  CHECK(encode_error(many) == EINVAL);
  // Hand-made: zero bytes, over the cap, bytes short of their length, writes short of their count.
  CHECK(decode_error(raw(MsgType::window_push, Le().u64(0).u32(0).u16(0).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::window_push, Le().u64(0).u32(proto::kMaxPushBytes + 1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::window_push, Le().u64(0).u32(8).fill(4, 1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::window_push, Le().u64(0).u32(2).fill(2, 1).u16(1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::window_push, Le().u64(~std::uint64_t{0}).u32(2).fill(2, 1).u16(0).bytes)) == EPROTO);
}

TEST_CASE("sealed_hello carries a cipher offer and an envelope, both bounded") {
  std::vector<std::uint8_t> envelope(300, 0x5c);
  Bytes storage;
  auto d = round_trip(proto::SealedHello{3, envelope}, 7, storage);
  CHECK(as<proto::SealedHello>(d).aead == 3);
  CHECK(same_bytes(as<proto::SealedHello>(d).envelope, envelope));
  CHECK(encode_error(proto::SealedHello{0, envelope}) == EINVAL);  // offers no cipher
  CHECK(encode_error(proto::SealedHello{4, envelope}) == EINVAL);  // an unknown cipher bit
  CHECK(encode_error(proto::SealedHello{1, {}}) == EINVAL);
  std::vector<std::uint8_t> big(proto::kMaxHelloEnvelope + 1, 1);
  CHECK(encode_error(proto::SealedHello{1, big}) == EINVAL);
  CHECK(decode_error(raw(MsgType::sealed_hello, Le().u8(1).u16(0).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::sealed_hello, Le().u8(1).u16(8).fill(4, 1).bytes)) == EPROTO);
  CHECK(decode_error(raw(MsgType::sealed_hello, Le().u8(8).u16(1).fill(1, 1).bytes)) == EPROTO);
}

TEST_CASE("the worked example 13.3 of docs/protocol.md (a hello) is what the encoder writes") {
  const Bytes hello = {0x52, 0x50, 0x43, 0x49, 0x01, 0x01, 0x00, 0x00, 0x2b, 0x00, 0x00, 0x00, 0x00, 0x00,
                       0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x73, 0x68, 0x6d,
                       0x01, 0x68, 0x04, 0x00, 0xaa, 0xbb, 0xcc, 0xdd, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00,
                       0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00,
                       0x00, 0x55, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02};
  const std::uint8_t address[] = {0xaa, 0xbb, 0xcc, 0xdd};
  proto::Hello h;
  h.provider = "shm";
  h.host = "h";
  h.fabric_address = address;
  h.regions = {{1, 0x1000, 0x2000, 0x55}};
  auto e = proto::message_encode(h, 9);
  REQUIRE(e);
  CHECK(*e == hello);
}

TEST_CASE("the worked examples 13.6 and 13.11 of docs/protocol.md are what the encoder writes") {
  const Bytes attach = {0x52, 0x50, 0x43, 0x49, 0x01, 0x0e, 0x00, 0x00, 0x0f, 0x00, 0x00, 0x00, 0x00,
                        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x65,
                        0x64, 0x75, 0x30, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02};
  auto a = proto::message_encode(proto::AttachRequest{"edu0", 1 << 20}, 1);
  REQUIRE(a);
  CHECK(*a == attach);
  const std::uint8_t data[] = {0xde, 0xad, 0xbe, 0xef};
  const Bytes push = {0x52, 0x50, 0x43, 0x49, 0x01, 0x19, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                      0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00,
                      0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x00, 0x00, 0x08, 0x98,
                      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  auto p = proto::message_encode(proto::WindowPush{0x2000, data, {{0, 8, 0x98, 5}}}, 6 | (std::uint64_t{1} << 63));
  REQUIRE(p);
  CHECK(*p == push);
}

// --- The message table ------------------------------------------------------------------
// Each message declares its type number and name once (protocol.hpp); the codec derives
// its table from the Message variant. These tests hold the table to the declarations.

namespace {

template <class T>
struct Tag {
  using type = T;
};
template <class F, std::size_t... I>
void messages_each(F&& f, std::index_sequence<I...>) {
  (f(Tag<std::variant_alternative_t<I, Message>>{}), ...);
}
// Calls f(Tag<T>) for every message type T of the variant.
template <class F>
void messages_each(F&& f) {
  messages_each(f, std::make_index_sequence<std::variant_size_v<Message>>{});
}

// A message that claims bar_commit's number, and one that claims heartbeat's name.
struct NumberTwin {
  static constexpr MsgType kType = MsgType::bar_commit;
  static constexpr const char* kName = "number_twin";
};
struct NameTwin {
  static constexpr MsgType kType = static_cast<MsgType>(99);
  static constexpr const char* kName = "heartbeat";
};

}  // namespace

static_assert(proto::wire::kMessagesUnique<Message>);
static_assert(!proto::wire::kMessagesUnique<std::variant<proto::Heartbeat, proto::BarCommit, NumberTwin>>,
              "a type number given twice is caught");
static_assert(!proto::wire::kMessagesUnique<std::variant<NameTwin, proto::Heartbeat>>, "a name given twice is caught");
static_assert(proto::wire::kMessagesUnique<std::variant<NameTwin, NumberTwin>>);

TEST_CASE("the type table is the variant's: every message's own kType and kName, and no other number") {
  std::array<int, 256> claimed{};
  messages_each([&](auto tag) {
    using T = typename decltype(tag)::type;
    CAPTURE(T::kName);
    ++claimed[static_cast<std::uint8_t>(T::kType)];
    CHECK(proto::message_type(Message(std::in_place_type<T>)) == T::kType);
    CHECK(std::string_view(proto::msg_type_name(T::kType)) == T::kName);
  });
  std::size_t known = 0;
  for (unsigned n = 0; n < 256; ++n) {
    CAPTURE(n);
    CHECK(claimed[n] <= 1);
    const bool named = std::string_view(proto::msg_type_name(static_cast<MsgType>(n))) != "unknown";
    CHECK(named == (claimed[n] == 1));
    // A known type with an empty payload is decoded (or refused) by its own rules, never as
    // an unknown type.
    auto d = proto::message_decode(raw(static_cast<std::uint8_t>(n), Bytes{}));
    const bool unknown = !d && d.error().message.find("unknown message type") != std::string::npos;
    CHECK(unknown == (claimed[n] == 0));
    known += claimed[n];
  }
  CHECK(known == std::variant_size_v<Message>);
}

TEST_CASE("a message decodes as the alternative that declares its type number, for every message") {
  // An empty payload is valid for the messages without fields; the others, minimally filled.
  const Bytes auth(proto::kAuthBytes, 3);
  const Bytes address{9};
  const std::uint8_t data[] = {1};
  proto::Hello hello{"p", "", address, {}, {}};
  proto::HelloAck ack;
  static_cast<proto::Hello&>(ack) = hello;
  const proto::LatencyCounts empty = rpcie::latency_counts_of({});
  const proto::TelemetryReply telemetry{0, 0, empty, empty, empty, empty};
  const Message samples[] = {hello,
                             ack,
                             proto::ErrorMsg{EIO, ""},
                             proto::Ping{},
                             proto::Pong{},
                             proto::Heartbeat{},
                             proto::Goodbye{},
                             proto::ConfigRead{},
                             proto::ConfigWrite{},
                             proto::MmioRead{},
                             proto::MmioWrite{},
                             proto::ReadReply{},
                             proto::WriteAck{},
                             proto::Interrupt{},
                             proto::RmaNotify{},
                             proto::AuthHello{"c", auth},
                             proto::AuthChallenge{auth, auth},
                             proto::AuthProof{auth},
                             proto::AuthOk{},
                             proto::ListRequest{},
                             proto::ListReply{},
                             proto::AttachRequest{"e", 0, 0},
                             proto::AttachReply{entry_sample("e"), 0, 0},
                             proto::BarCommit{0, 0, 1, 0},
                             proto::BarFetch{{0, 0, 1, 0}},
                             proto::MmioWriteBatch{{proto::MmioWrite{}}},
                             proto::WindowPush{0, data, {}},
                             proto::SealedHello{1, data},
                             proto::RmaPut{0, 0, 0, data},
                             proto::RmaGet{0, 0, 1},
                             proto::RmaData{0, data},
                             proto::RmaDone{},
                             proto::ResumeRequest{},
                             proto::ResumeReply{},
                             proto::TelemetryRequest{},
                             telemetry};
  std::array<bool, std::variant_size_v<Message>> seen{};
  for (const Message& m : samples) {
    CAPTURE(proto::msg_type_name(proto::message_type(m)));
    seen[m.index()] = true;
    Bytes storage;
    round_trip(m, 5, storage);  // checks the header's type and the decoded alternative
    CHECK(storage[5] == static_cast<std::uint8_t>(proto::message_type(m)));
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    CAPTURE(i);
    CHECK(seen[i]);
  }
}

TEST_CASE("payload sizes, smallest and largest, are those of the type table in docs/protocol.md section 4") {
  // Each sample is valid: the encoder takes it.
  auto payload = [](const Message& m) {
    CHECK(encode_error(m) == 0);
    return proto::message_encoded_size(m) - proto::kHeaderSize;
  };
  const Bytes auth(proto::kAuthBytes, 1);
  CHECK(payload(proto::Heartbeat{}) == 8);
  CHECK(payload(proto::Goodbye{}) == 0);
  CHECK(payload(proto::AuthOk{}) == 0);
  CHECK(payload(proto::ListRequest{}) == 0);
  CHECK(payload(proto::ConfigRead{}) == 3);
  CHECK(payload(proto::ConfigWrite{}) == 7);
  CHECK(payload(proto::MmioRead{}) == 10);
  CHECK(payload(proto::MmioWrite{}) == 18);
  CHECK(payload(proto::ReadReply{}) == 12);
  CHECK(payload(proto::WriteAck{}) == 4);
  CHECK(payload(proto::BarCommit{0, 0, 1, 0}) == 25);
  CHECK(payload(proto::BarFetch{{0, 0, 1, 0}}) == 25);
  CHECK(payload(proto::Interrupt{}) == 10);
  CHECK(payload(proto::RmaNotify{}) == 28);
  CHECK(payload(proto::AuthChallenge{auth, auth}) == 64);
  CHECK(payload(proto::AuthProof{auth}) == 32);

  const std::string s255(255, 'h'), s64(64, 'n'), s32(32, 'b'), s1024(proto::kMaxErrorText, 'e');
  const Bytes address_min{1}, address_max(proto::kMaxFabricAddress, 2), nonce_max(proto::kMaxNonce, 3);
  proto::Hello hello_min{"p", "", address_min, {}, {}};
  proto::Hello hello_max{s64, s255, address_max, std::vector<proto::RegionDescriptor>(proto::kMaxRegions), nonce_max};
  CHECK(payload(hello_min) == 9);
  CHECK(payload(hello_max) == 1094);
  CHECK(payload(proto::ErrorMsg{EIO, ""}) == 6);
  CHECK(payload(proto::ErrorMsg{EIO, s1024}) == 1030);
  const Bytes ping_max(proto::kMaxPayload, 4);
  CHECK(payload(proto::Ping{}) == 0);
  CHECK(payload(proto::Pong{{ping_max}}) == 65536);
  CHECK(payload(proto::AuthHello{"a", auth}) == 34);
  CHECK(payload(proto::AuthHello{s64, auth}) == 97);
  CHECK(payload(proto::AttachRequest{"e", 0, 0}) == 12);
  CHECK(payload(proto::AttachRequest{s64, 0, proto::kAttachWindowPush}) == 75);

  proto::ExportEntry entry_min;
  entry_min.name = "e";
  entry_min.backend = "b";
  proto::ExportEntry entry_max = entry_min;
  entry_max.name = s64;
  entry_max.backend = s32;
  entry_max.holder = s64;
  for (std::uint8_t b = 0; b < rpcie::pci::kBarCount; ++b)
    entry_max.bars.push_back({b, proto::BarKind::memory, proto::kBarFlagsKnown, 1});
  CHECK(payload(proto::AttachReply{entry_min, 0, 0}) == 36);
  CHECK(payload(proto::AttachReply{entry_max, 0, 0}) == 260);
  CHECK(payload(proto::ListReply{}) == 2);
  CHECK(payload(proto::ListReply{std::vector<proto::ExportEntry>(proto::kMaxExports, entry_max)}) == 31618);

  proto::MmioWriteBatch batch_max;
  batch_max.writes.assign(proto::kMaxBatch, proto::MmioWrite{});
  CHECK(payload(proto::MmioWriteBatch{{proto::MmioWrite{}}}) == 20);
  CHECK(payload(batch_max) == 4610);
  const std::uint8_t one[] = {1};
  const Bytes push_max(proto::kMaxPushBytes, 5);
  CHECK(payload(proto::WindowPush{0, one, {}}) == 15);
  CHECK(payload(proto::WindowPush{0, push_max, batch_max.writes}) == 37390);
  const Bytes rma_max(proto::kMaxRmaBytes, 6);
  CHECK(payload(proto::RmaPut{0, 0, 0, one}) == 18);
  CHECK(payload(proto::RmaPut{0, 0, proto::kRmaPutAck, rma_max}) == 61457);
  CHECK(payload(proto::RmaGet{0, 0, 1}) == 20);
  CHECK(payload(proto::RmaData{0, one}) == 13);
  CHECK(payload(proto::RmaData{0, rma_max}) == 61452);
  CHECK(payload(proto::RmaDone{}) == 4);
}
