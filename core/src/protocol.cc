// Codec for the rpcie wire protocol. See protocol.hpp for the contract and
// docs/protocol.md for the format.
#include "rpcie/protocol.hpp"

#include <cerrno>
#include <cstring>
#include <string>
#include <type_traits>

namespace rpcie::proto {
namespace {

// Bounds-checked little-endian reader over a span. Once a read fails, every later read
// fails too, so a decoder can read a whole payload and check ok() once.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> b) : bytes_(b) {}

  template <class T>
  T uint() {
    static_assert(std::is_unsigned_v<T>);
    if (!take(sizeof(T))) return 0;
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
      v |= static_cast<T>(static_cast<T>(bytes_[pos_ - sizeof(T) + i]) << (8 * i));
    return v;
  }
  std::int32_t int32() { return static_cast<std::int32_t>(uint<std::uint32_t>()); }

  std::span<const std::uint8_t> blob(std::size_t n) {
    if (!take(n)) return {};
    return bytes_.subspan(pos_ - n, n);
  }
  std::string_view text(std::size_t n) {
    auto b = blob(n);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }

  std::span<const std::uint8_t> rest() { return blob(bytes_.size() - pos_); }

  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  bool take(std::size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    pos_ += n;
    return true;
  }
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// Writer into a buffer already checked to be large enough.
class Writer {
 public:
  explicit Writer(std::uint8_t* p) : p_(p) {}
  template <class T>
  void uint(T v) {
    static_assert(std::is_unsigned_v<T>);
    for (std::size_t i = 0; i < sizeof(T); ++i) *p_++ = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void blob(std::span<const std::uint8_t> b) {
    if (!b.empty()) std::memcpy(p_, b.data(), b.size());
    p_ += b.size();
  }
  void text(std::string_view s) { blob({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}); }

 private:
  std::uint8_t* p_;
};

constexpr std::size_t kRegionSize = 4 + 8 + 8 + 8;

bool value_fits(std::uint64_t v, std::uint8_t width) { return width >= 8 || v >> (8 * width) == 0; }

std::size_t hello_size(const Hello& h) {
  return 1 + h.provider.size() + 1 + h.host.size() + 2 + h.fabric_address.size() + 1 + h.regions.size() * kRegionSize +
         1 + h.nonce.size();
}

bool hello_valid(const Hello& h) {
  return h.provider.size() <= kMaxProviderName && !h.provider.empty() && h.host.size() <= kMaxHostName &&
         !h.fabric_address.empty() && h.fabric_address.size() <= kMaxFabricAddress && h.regions.size() <= kMaxRegions &&
         h.nonce.size() <= kMaxNonce;
}

bool config_valid(std::uint16_t offset, std::uint8_t width) {
  return pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax);
}
bool mmio_valid(std::uint8_t bar, std::uint8_t width, std::uint64_t offset) {
  // The BAR's size is the exporter's to check: here only width and alignment.
  return bar <= pci::kBarMax && pci::access_aligned(offset, width);
}

bool auth_bytes_valid(std::span<const std::uint8_t> b) { return b.size() == kAuthBytes; }
bool name_valid(std::string_view n, std::size_t cap) { return !n.empty() && n.size() <= cap; }

constexpr std::size_t kBarInfoSize = 1 + 1 + 1 + 8;
std::size_t entry_size(const ExportEntry& e) {
  return 1 + e.name.size() + 1 + e.backend.size() + 1 + e.holder.size() + 2 + 2 + 4 + 2 + 2 + 1 + 1 + 1 + 2 + 1 +
         e.bars.size() * kBarInfoSize;
}
bool entry_valid(const ExportEntry& e) {
  if (!name_valid(e.name, kMaxNameText) || !name_valid(e.backend, kMaxBackendName) || e.holder.size() > kMaxNameText)
    return false;
  if (e.class_code > 0xffffff || e.vectors > kMaxVector || (e.flags & ~kExportFlagsKnown) != 0) return false;
  if (e.state != ExportState::free && e.state != ExportState::attached) return false;
  if (e.bars.size() > pci::kBarCount) return false;
  unsigned seen = 0;
  for (const auto& b : e.bars) {
    if (b.bar > pci::kBarMax || (seen & (1u << b.bar)) != 0) return false;
    seen |= 1u << b.bar;
    if (b.kind != BarKind::registers && b.kind != BarKind::memory && b.kind != BarKind::io) return false;
    if ((b.flags & ~kBarFlagsKnown) != 0 || b.size == 0) return false;
  }
  return true;
}
bool bar_transfer_valid(const BarCommit& c) {
  return c.bar <= pci::kBarMax && c.length > 0 && c.offset + c.length >= c.offset &&
         c.bounce_offset + c.length >= c.bounce_offset;
}

struct PayloadSize {
  std::size_t operator()(const Hello& h) const { return hello_size(h); }
  std::size_t operator()(const ErrorMsg& e) const { return 4 + 2 + e.text.size(); }
  std::size_t operator()(const Ping& p) const { return p.data.size(); }
  std::size_t operator()(const Heartbeat&) const { return 8; }
  std::size_t operator()(const Goodbye&) const { return 0; }
  std::size_t operator()(const ConfigRead&) const { return 2 + 1; }
  std::size_t operator()(const ConfigWrite&) const { return 2 + 1 + 4; }
  std::size_t operator()(const MmioRead&) const { return 1 + 1 + 8; }
  std::size_t operator()(const MmioWrite&) const { return 1 + 1 + 8 + 8; }
  std::size_t operator()(const ReadReply&) const { return 4 + 8; }
  std::size_t operator()(const WriteAck&) const { return 4; }
  std::size_t operator()(const Interrupt&) const { return 2 + 8; }
  std::size_t operator()(const RmaNotify&) const { return 4 + 8 + 8 + 8; }
  std::size_t operator()(const AuthHello& a) const { return 1 + a.client.size() + a.nonce.size(); }
  std::size_t operator()(const AuthChallenge& a) const { return a.nonce.size() + a.proof.size(); }
  std::size_t operator()(const AuthProof& a) const { return a.proof.size(); }
  std::size_t operator()(const AuthOk&) const { return 0; }
  std::size_t operator()(const ListRequest&) const { return 0; }
  std::size_t operator()(const ListReply& l) const {
    std::size_t n = 2;
    for (const auto& e : l.exports) n += entry_size(e);
    return n;
  }
  std::size_t operator()(const AttachRequest& a) const { return 1 + a.export_name.size() + 8 + 1; }
  std::size_t operator()(const AttachReply& a) const { return entry_size(a.info) + 4 + 8; }
  std::size_t operator()(const BarCommit&) const { return 1 + 8 + 8 + 8; }
  std::size_t operator()(const MmioWriteBatch& b) const { return 2 + b.writes.size() * (1 + 1 + 8 + 8); }
  std::size_t operator()(const WindowPush& p) const {
    return 8 + 4 + p.data.size() + 2 + p.writes.size() * (1 + 1 + 8 + 8);
  }
};

// Whether the encoder may emit `m` (the decoder's rules, applied before sending).
struct Valid {
  bool operator()(const Hello& h) const { return hello_valid(h); }
  bool operator()(const ErrorMsg& e) const { return e.code > 0 && e.text.size() <= kMaxErrorText; }
  bool operator()(const Ping& p) const { return p.data.size() <= kMaxPayload; }
  bool operator()(const Heartbeat&) const { return true; }
  bool operator()(const Goodbye&) const { return true; }
  bool operator()(const ConfigRead& c) const { return config_valid(c.offset, c.width); }
  bool operator()(const ConfigWrite& c) const {
    return config_valid(c.offset, c.width) && value_fits(c.value, c.width);
  }
  bool operator()(const MmioRead& m) const { return mmio_valid(m.bar, m.width, m.offset); }
  bool operator()(const MmioWrite& m) const {
    return mmio_valid(m.bar, m.width, m.offset) && value_fits(m.value, m.width);
  }
  bool operator()(const ReadReply& r) const { return r.status >= 0; }
  bool operator()(const WriteAck& w) const { return w.status >= 0; }
  bool operator()(const Interrupt& i) const { return i.vector < kMaxVector; }
  bool operator()(const RmaNotify&) const { return true; }
  bool operator()(const AuthHello& a) const { return name_valid(a.client, kMaxNameText) && auth_bytes_valid(a.nonce); }
  bool operator()(const AuthChallenge& a) const { return auth_bytes_valid(a.nonce) && auth_bytes_valid(a.proof); }
  bool operator()(const AuthProof& a) const { return auth_bytes_valid(a.proof); }
  bool operator()(const AuthOk&) const { return true; }
  bool operator()(const ListRequest&) const { return true; }
  bool operator()(const ListReply& l) const {
    if (l.exports.size() > kMaxExports) return false;
    for (const auto& e : l.exports)
      if (!entry_valid(e)) return false;
    return true;
  }
  bool operator()(const AttachRequest& a) const {
    return name_valid(a.export_name, kMaxNameText) && (a.flags & ~kAttachFlagsKnown) == 0;
  }
  bool operator()(const AttachReply& a) const { return entry_valid(a.info); }
  bool operator()(const BarCommit& c) const { return bar_transfer_valid(c); }
  bool operator()(const MmioWriteBatch& b) const { return !b.writes.empty() && writes_valid(b.writes); }
  bool operator()(const WindowPush& p) const {
    return !p.data.empty() && p.data.size() <= kMaxPushBytes && p.window_offset <= UINT64_MAX - p.data.size() &&
           writes_valid(p.writes);
  }
  bool writes_valid(const std::vector<MmioWrite>& writes) const {
    if (writes.size() > kMaxBatch) return false;
    for (const auto& m : writes)
      if (!(*this)(m)) return false;
    return true;
  }
};

struct Encode {
  Writer& w;
  void operator()(const Hello& h) const {
    w.uint<std::uint8_t>(static_cast<std::uint8_t>(h.provider.size()));
    w.text(h.provider);
    w.uint<std::uint8_t>(static_cast<std::uint8_t>(h.host.size()));
    w.text(h.host);
    w.uint<std::uint16_t>(static_cast<std::uint16_t>(h.fabric_address.size()));
    w.blob(h.fabric_address);
    w.uint<std::uint8_t>(static_cast<std::uint8_t>(h.regions.size()));
    for (const auto& r : h.regions) {
      w.uint(r.id);
      w.uint(r.address);
      w.uint(r.length);
      w.uint(r.key);
    }
    w.uint<std::uint8_t>(static_cast<std::uint8_t>(h.nonce.size()));
    w.blob(h.nonce);
  }
  void operator()(const ErrorMsg& e) const {
    w.uint(static_cast<std::uint32_t>(e.code));
    w.uint<std::uint16_t>(static_cast<std::uint16_t>(e.text.size()));
    w.text(e.text);
  }
  void operator()(const Ping& p) const { w.blob(p.data); }
  void operator()(const Heartbeat& h) const { w.uint(h.sequence); }
  void operator()(const Goodbye&) const {}
  void operator()(const ConfigRead& c) const {
    w.uint(c.offset);
    w.uint(c.width);
  }
  void operator()(const ConfigWrite& c) const {
    w.uint(c.offset);
    w.uint(c.width);
    w.uint(c.value);
  }
  void operator()(const MmioRead& m) const {
    w.uint(m.bar);
    w.uint(m.width);
    w.uint(m.offset);
  }
  void operator()(const MmioWrite& m) const {
    w.uint(m.bar);
    w.uint(m.width);
    w.uint(m.offset);
    w.uint(m.value);
  }
  void operator()(const ReadReply& r) const {
    w.uint(static_cast<std::uint32_t>(r.status));
    w.uint(r.value);
  }
  void operator()(const WriteAck& a) const { w.uint(static_cast<std::uint32_t>(a.status)); }
  void operator()(const Interrupt& i) const {
    w.uint(i.vector);
    w.uint(i.count);
  }
  void operator()(const RmaNotify& n) const {
    w.uint(n.region);
    w.uint(n.offset);
    w.uint(n.length);
    w.uint(n.checksum);
  }
  void operator()(const AuthHello& a) const {
    w.uint<std::uint8_t>(static_cast<std::uint8_t>(a.client.size()));
    w.text(a.client);
    w.blob(a.nonce);
  }
  void operator()(const AuthChallenge& a) const {
    w.blob(a.nonce);
    w.blob(a.proof);
  }
  void operator()(const AuthProof& a) const { w.blob(a.proof); }
  void operator()(const AuthOk&) const {}
  void operator()(const ListRequest&) const {}
  void operator()(const ListReply& l) const {
    w.uint<std::uint16_t>(static_cast<std::uint16_t>(l.exports.size()));
    for (const auto& e : l.exports) entry(e);
  }
  void operator()(const AttachRequest& a) const {
    w.uint<std::uint8_t>(static_cast<std::uint8_t>(a.export_name.size()));
    w.text(a.export_name);
    w.uint(a.window_size);
    w.uint(a.flags);
  }
  void operator()(const AttachReply& a) const {
    entry(a.info);
    w.uint(a.lease_ms);
    w.uint(a.attachment_id);
  }
  void operator()(const BarCommit& c) const {
    w.uint(c.bar);
    w.uint(c.offset);
    w.uint(c.length);
    w.uint(c.bounce_offset);
  }
  void operator()(const MmioWriteBatch& b) const { writes(b.writes); }
  void operator()(const WindowPush& p) const {
    w.uint(p.window_offset);
    w.uint<std::uint32_t>(static_cast<std::uint32_t>(p.data.size()));
    w.blob(p.data);
    writes(p.writes);
  }
  void writes(const std::vector<MmioWrite>& list) const {
    w.uint<std::uint16_t>(static_cast<std::uint16_t>(list.size()));
    for (const auto& m : list) (*this)(m);
  }
  void entry(const ExportEntry& e) const {
    for (std::string_view t : {e.name, e.backend, e.holder}) {
      w.uint<std::uint8_t>(static_cast<std::uint8_t>(t.size()));
      w.text(t);
    }
    w.uint(e.vendor);
    w.uint(e.device);
    w.uint(e.class_code);
    w.uint(e.subsystem_vendor);
    w.uint(e.subsystem_device);
    w.uint(e.revision);
    w.uint(static_cast<std::uint8_t>(e.state));
    w.uint(e.flags);
    w.uint(e.vectors);
    w.uint<std::uint8_t>(static_cast<std::uint8_t>(e.bars.size()));
    for (const auto& b : e.bars) {
      w.uint(b.bar);
      w.uint(static_cast<std::uint8_t>(b.kind));
      w.uint(b.flags);
      w.uint(b.size);
    }
  }
};

// Reads one ExportEntry; the caller checks r.ok() and validity.
bool entry_decode(Reader& r, ExportEntry& e) {
  e.name = r.text(r.uint<std::uint8_t>());
  e.backend = r.text(r.uint<std::uint8_t>());
  e.holder = r.text(r.uint<std::uint8_t>());
  e.vendor = r.uint<std::uint16_t>();
  e.device = r.uint<std::uint16_t>();
  e.class_code = r.uint<std::uint32_t>();
  e.subsystem_vendor = r.uint<std::uint16_t>();
  e.subsystem_device = r.uint<std::uint16_t>();
  e.revision = r.uint<std::uint8_t>();
  e.state = static_cast<ExportState>(r.uint<std::uint8_t>());
  e.flags = r.uint<std::uint8_t>();
  e.vectors = r.uint<std::uint16_t>();
  std::size_t n = r.uint<std::uint8_t>();
  if (!r.ok() || n > pci::kBarCount) return false;
  e.bars.reserve(n);  // bounded by pci::kBarCount
  for (std::size_t i = 0; i < n; ++i) {
    BarInfo b;
    b.bar = r.uint<std::uint8_t>();
    b.kind = static_cast<BarKind>(r.uint<std::uint8_t>());
    b.flags = r.uint<std::uint8_t>();
    b.size = r.uint<std::uint64_t>();
    e.bars.push_back(b);
  }
  return r.ok() && entry_valid(e);
}

BarCommit bar_transfer_decode(Reader& r) {
  BarCommit c;
  c.bar = r.uint<std::uint8_t>();
  c.offset = r.uint<std::uint64_t>();
  c.length = r.uint<std::uint64_t>();
  c.bounce_offset = r.uint<std::uint64_t>();
  return c;
}

Result<Hello> hello_decode(Reader& r) {
  Hello h;
  h.provider = r.text(r.uint<std::uint8_t>());
  h.host = r.text(r.uint<std::uint8_t>());
  h.fabric_address = r.blob(r.uint<std::uint16_t>());
  std::size_t n = r.uint<std::uint8_t>();
  if (!r.ok()) return fail(EPROTO, "hello truncated");
  if (n > kMaxRegions)
    return fail(EPROTO, "hello lists " + std::to_string(n) + " regions, at most " + std::to_string(kMaxRegions));
  h.regions.reserve(n);  // bounded by kMaxRegions above, never by the peer
  for (std::size_t i = 0; i < n; ++i) {
    RegionDescriptor d;
    d.id = r.uint<std::uint32_t>();
    d.address = r.uint<std::uint64_t>();
    d.length = r.uint<std::uint64_t>();
    d.key = r.uint<std::uint64_t>();
    h.regions.push_back(d);
  }
  h.nonce = r.blob(r.uint<std::uint8_t>());
  if (!r.ok()) return fail(EPROTO, "hello truncated");
  if (!hello_valid(h)) return fail(EPROTO, "hello fields out of range");
  return h;
}

template <class M>
Result<Message> checked(Reader& r, M m, const char* what) {
  if (!r.ok()) return fail(EPROTO, std::string(what) + " truncated");
  if (!Valid{}(m)) return fail(EPROTO, std::string(what) + " fields out of range");
  return Message(std::move(m));
}

// A u16 count and that many MmioWrite entries (mmio_write_batch, window_push).
Result<void> writes_decode(Reader& r, std::vector<MmioWrite>& out, const char* what) {
  const std::size_t n = r.uint<std::uint16_t>();
  if (!r.ok()) return fail(EPROTO, std::string(what) + " truncated");
  if (n > kMaxBatch)
    return fail(EPROTO,
                std::string(what) + " of " + std::to_string(n) + " writes (at most " + std::to_string(kMaxBatch) + ")");
  out.reserve(n);  // bounded by kMaxBatch above
  for (std::size_t i = 0; i < n; ++i) {
    MmioWrite m;
    m.bar = r.uint<std::uint8_t>();
    m.width = r.uint<std::uint8_t>();
    m.offset = r.uint<std::uint64_t>();
    m.value = r.uint<std::uint64_t>();
    out.push_back(m);
  }
  return {};
}

Result<Message> payload_decode(MsgType type, Reader& r) {
  switch (type) {
    case MsgType::hello:
    case MsgType::hello_ack: {
      auto h = hello_decode(r);
      if (!h) return tl::unexpected(h.error());
      if (type == MsgType::hello) return Message(std::move(*h));
      HelloAck a;
      static_cast<Hello&>(a) = std::move(*h);
      return Message(std::move(a));
    }
    case MsgType::error: {
      ErrorMsg e;
      e.code = r.int32();
      e.text = r.text(r.uint<std::uint16_t>());
      return checked(r, e, "error");
    }
    case MsgType::ping:
      return Message(Ping{r.rest()});
    case MsgType::pong:
      return Message(Pong{{r.rest()}});
    case MsgType::heartbeat:
      return checked(r, Heartbeat{r.uint<std::uint64_t>()}, "heartbeat");
    case MsgType::goodbye:
      return Message(Goodbye{});
    case MsgType::config_read: {
      ConfigRead c;
      c.offset = r.uint<std::uint16_t>();
      c.width = r.uint<std::uint8_t>();
      return checked(r, c, "config_read");
    }
    case MsgType::config_write: {
      ConfigWrite c;
      c.offset = r.uint<std::uint16_t>();
      c.width = r.uint<std::uint8_t>();
      c.value = r.uint<std::uint32_t>();
      return checked(r, c, "config_write");
    }
    case MsgType::mmio_read: {
      MmioRead m;
      m.bar = r.uint<std::uint8_t>();
      m.width = r.uint<std::uint8_t>();
      m.offset = r.uint<std::uint64_t>();
      return checked(r, m, "mmio_read");
    }
    case MsgType::mmio_write: {
      MmioWrite m;
      m.bar = r.uint<std::uint8_t>();
      m.width = r.uint<std::uint8_t>();
      m.offset = r.uint<std::uint64_t>();
      m.value = r.uint<std::uint64_t>();
      return checked(r, m, "mmio_write");
    }
    case MsgType::read_reply: {
      ReadReply rr;
      rr.status = r.int32();
      rr.value = r.uint<std::uint64_t>();
      return checked(r, rr, "read_reply");
    }
    case MsgType::write_ack:
      return checked(r, WriteAck{r.int32()}, "write_ack");
    case MsgType::interrupt: {
      Interrupt i;
      i.vector = r.uint<std::uint16_t>();
      i.count = r.uint<std::uint64_t>();
      return checked(r, i, "interrupt");
    }
    case MsgType::rma_notify: {
      RmaNotify n;
      n.region = r.uint<std::uint32_t>();
      n.offset = r.uint<std::uint64_t>();
      n.length = r.uint<std::uint64_t>();
      n.checksum = r.uint<std::uint64_t>();
      return checked(r, n, "rma_notify");
    }
    case MsgType::auth_hello: {
      AuthHello a;
      a.client = r.text(r.uint<std::uint8_t>());
      a.nonce = r.blob(kAuthBytes);
      return checked(r, a, "auth_hello");
    }
    case MsgType::auth_challenge: {
      AuthChallenge a;
      a.nonce = r.blob(kAuthBytes);
      a.proof = r.blob(kAuthBytes);
      return checked(r, a, "auth_challenge");
    }
    case MsgType::auth_proof:
      return checked(r, AuthProof{r.blob(kAuthBytes)}, "auth_proof");
    case MsgType::auth_ok:
      return Message(AuthOk{});
    case MsgType::list_request:
      return Message(ListRequest{});
    case MsgType::list_reply: {
      std::size_t n = r.uint<std::uint16_t>();
      if (!r.ok()) return fail(EPROTO, "list_reply truncated");
      if (n > kMaxExports)
        return fail(EPROTO,
                    "list_reply lists " + std::to_string(n) + " exports, at most " + std::to_string(kMaxExports));
      ListReply l;
      l.exports.reserve(n);  // bounded by kMaxExports above
      for (std::size_t i = 0; i < n; ++i) {
        ExportEntry e;
        if (!entry_decode(r, e))
          return fail(EPROTO, "list_reply entry " + std::to_string(i) + " truncated or out of range");
        l.exports.push_back(std::move(e));
      }
      return Message(std::move(l));
    }
    case MsgType::attach_request: {
      AttachRequest a;
      a.export_name = r.text(r.uint<std::uint8_t>());
      a.window_size = r.uint<std::uint64_t>();
      a.flags = r.uint<std::uint8_t>();
      return checked(r, a, "attach_request");
    }
    case MsgType::attach_reply: {
      AttachReply a;
      if (!entry_decode(r, a.info)) return fail(EPROTO, "attach_reply export truncated or out of range");
      a.lease_ms = r.uint<std::uint32_t>();
      a.attachment_id = r.uint<std::uint64_t>();
      return checked(r, std::move(a), "attach_reply");
    }
    case MsgType::bar_commit:
      return checked(r, bar_transfer_decode(r), "bar_commit");
    case MsgType::mmio_write_batch: {
      MmioWriteBatch b;
      auto listed = writes_decode(r, b.writes, "mmio_write_batch");
      if (!listed) return tl::unexpected(listed.error());
      if (b.writes.empty()) return fail(EPROTO, "mmio_write_batch of 0 writes (1.." + std::to_string(kMaxBatch) + ")");
      return checked(r, std::move(b), "mmio_write_batch");
    }
    case MsgType::window_push: {
      WindowPush p;
      p.window_offset = r.uint<std::uint64_t>();
      const std::size_t n = r.uint<std::uint32_t>();
      if (r.ok() && (n == 0 || n > kMaxPushBytes))
        return fail(EPROTO,
                    "window_push of " + std::to_string(n) + " bytes (1.." + std::to_string(kMaxPushBytes) + ")");
      p.data = r.blob(n);
      auto listed = writes_decode(r, p.writes, "window_push");
      if (!listed) return tl::unexpected(listed.error());
      return checked(r, std::move(p), "window_push");
    }
    case MsgType::bar_fetch: {
      BarFetch f;
      static_cast<BarCommit&>(f) = bar_transfer_decode(r);
      return checked(r, f, "bar_fetch");
    }
  }
  return fail(EPROTO, "unknown message type " + std::to_string(static_cast<unsigned>(type)));
}

bool type_known(std::uint8_t t) {
  switch (static_cast<MsgType>(t)) {
    case MsgType::hello:
    case MsgType::hello_ack:
    case MsgType::error:
    case MsgType::ping:
    case MsgType::pong:
    case MsgType::heartbeat:
    case MsgType::goodbye:
    case MsgType::config_read:
    case MsgType::config_write:
    case MsgType::mmio_read:
    case MsgType::mmio_write:
    case MsgType::read_reply:
    case MsgType::write_ack:
    case MsgType::interrupt:
    case MsgType::rma_notify:
    case MsgType::auth_hello:
    case MsgType::auth_challenge:
    case MsgType::auth_proof:
    case MsgType::auth_ok:
    case MsgType::list_request:
    case MsgType::list_reply:
    case MsgType::attach_request:
    case MsgType::attach_reply:
    case MsgType::bar_commit:
    case MsgType::bar_fetch:
    case MsgType::mmio_write_batch:
    case MsgType::window_push:
      return true;
  }
  return false;
}

}  // namespace

MsgType message_type(const Message& m) noexcept {
  static constexpr MsgType kTypes[] = {
      MsgType::hello,          MsgType::hello_ack,        MsgType::error,        MsgType::ping,
      MsgType::pong,           MsgType::heartbeat,        MsgType::goodbye,      MsgType::config_read,
      MsgType::config_write,   MsgType::mmio_read,        MsgType::mmio_write,   MsgType::read_reply,
      MsgType::write_ack,      MsgType::interrupt,        MsgType::rma_notify,   MsgType::auth_hello,
      MsgType::auth_challenge, MsgType::auth_proof,       MsgType::auth_ok,      MsgType::list_request,
      MsgType::list_reply,     MsgType::attach_request,   MsgType::attach_reply, MsgType::bar_commit,
      MsgType::bar_fetch,      MsgType::mmio_write_batch, MsgType::window_push};
  static_assert(std::size(kTypes) == std::variant_size_v<Message>);
  return kTypes[m.index()];
}

const char* msg_type_name(MsgType t) noexcept {
  switch (t) {
    case MsgType::hello:
      return "hello";
    case MsgType::hello_ack:
      return "hello_ack";
    case MsgType::error:
      return "error";
    case MsgType::ping:
      return "ping";
    case MsgType::pong:
      return "pong";
    case MsgType::heartbeat:
      return "heartbeat";
    case MsgType::goodbye:
      return "goodbye";
    case MsgType::config_read:
      return "config_read";
    case MsgType::config_write:
      return "config_write";
    case MsgType::mmio_read:
      return "mmio_read";
    case MsgType::mmio_write:
      return "mmio_write";
    case MsgType::read_reply:
      return "read_reply";
    case MsgType::write_ack:
      return "write_ack";
    case MsgType::interrupt:
      return "interrupt";
    case MsgType::rma_notify:
      return "rma_notify";
    case MsgType::auth_hello:
      return "auth_hello";
    case MsgType::auth_challenge:
      return "auth_challenge";
    case MsgType::auth_proof:
      return "auth_proof";
    case MsgType::auth_ok:
      return "auth_ok";
    case MsgType::list_request:
      return "list_request";
    case MsgType::list_reply:
      return "list_reply";
    case MsgType::attach_request:
      return "attach_request";
    case MsgType::attach_reply:
      return "attach_reply";
    case MsgType::bar_commit:
      return "bar_commit";
    case MsgType::bar_fetch:
      return "bar_fetch";
    case MsgType::mmio_write_batch:
      return "mmio_write_batch";
    case MsgType::window_push:
      return "window_push";
  }
  return "unknown";
}

std::size_t message_encoded_size(const Message& m) noexcept { return kHeaderSize + std::visit(PayloadSize{}, m); }

Result<std::size_t> message_encode(const Message& m, std::uint64_t request_id, std::span<std::uint8_t> out) {
  if (!std::visit(Valid{}, m))
    return fail(EINVAL, std::string("refusing to encode an invalid ") + msg_type_name(message_type(m)));
  std::size_t payload = std::visit(PayloadSize{}, m);
  if (payload > kMaxPayload) return fail(EINVAL, "payload over the protocol's cap");
  if (out.size() < kHeaderSize + payload) return fail(EMSGSIZE, "encode buffer too small");
  Writer w(out.data());
  w.uint(kMagic);
  w.uint(kVersion);
  w.uint(static_cast<std::uint8_t>(message_type(m)));
  w.uint<std::uint16_t>(0);
  w.uint(static_cast<std::uint32_t>(payload));
  w.uint<std::uint32_t>(0);
  w.uint(request_id);
  std::visit(Encode{w}, m);
  return kHeaderSize + payload;
}

Result<std::vector<std::uint8_t>> message_encode(const Message& m, std::uint64_t request_id) {
  std::vector<std::uint8_t> out(message_encoded_size(m));
  auto n = message_encode(m, request_id, out);
  if (!n) return tl::unexpected(n.error());
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
  if (!type_known(type)) return fail(EPROTO, "unknown message type " + std::to_string(type));
  d.header.type = static_cast<MsgType>(type);
  if ((d.header.flags & ~kFlagsKnown) != 0) return fail(EPROTO, "unknown header flags");
  if (reserved != 0) return fail(EPROTO, "reserved header field is not zero");
  if (d.header.payload_length > kMaxPayload) return fail(EMSGSIZE, "payload length over the cap");
  if (d.header.payload_length != bytes.size() - kHeaderSize)
    return fail(EPROTO, "payload length disagrees with the message size");

  Reader p(bytes.subspan(kHeaderSize));
  auto m = payload_decode(d.header.type, p);
  if (!m) return tl::unexpected(m.error());
  if (!p.at_end()) return fail(EPROTO, std::string(msg_type_name(d.header.type)) + " has trailing bytes");
  d.message = std::move(*m);
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
