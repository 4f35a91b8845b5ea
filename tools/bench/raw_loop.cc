// Raw-libfabric baseline for rpcie-bench; see raw_loop.hpp.
//
// Mirrors what fabtests does for fi_rma_bw / fi_pingpong: one RDM endpoint, one
// CQ in FI_CQ_FORMAT_CONTEXT busy-polled with fi_cq_read in batches, buffers
// registered once at open(), window of RMA ops kept in flight, fi_inject for
// small ping-pong messages. Nothing here allocates or registers on the data path.
#include "raw_loop.hpp"

#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace rawbench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kMagic = 0x52415742;  // "RAWB"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kMaxBlob = 4096;
constexpr std::size_t kCqBatch = 64;            // entries per fi_cq_read, like fabtests' bulk reads
constexpr std::size_t kRxDepth = 2;             // pre-posted receives; ping-pong needs 1, keep slack
constexpr std::uint64_t kTimeCheckMask = 255;   // clock read every 256 polls
constexpr std::uint64_t kCtrlCheckMask = 1023;  // recv(MSG_DONTWAIT) every 1024 polls
// Same bit pattern as FI_ADDR_UNSPEC, spelled without the header's C-style cast.
constexpr fi_addr_t kAnyAddr = ~fi_addr_t{0};

constexpr char kEndByte = 'E';
constexpr char kAbortByte = 'A';
constexpr char kReadyByte = 'R';

std::string fi_error(const char* what, long ret) {
  return std::string(what) + ": " + fi_strerror(static_cast<int>(-ret)) + " (" + std::to_string(ret) + ")";
}

std::string sys_error(const char* what, int e) { return std::string(what) + ": " + std::strerror(e); }

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<long long>(0, std::min<long long>(left.count(), 1 << 30)));
}

// Waits for `events` on fd until the deadline; false + *err on timeout/error.
bool wait_fd(int fd, short events, Clock::time_point deadline, std::string* err) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = remaining_ms(deadline);
    int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) {
      *err = "control socket: timed out";
      return false;
    }
    if (errno != EINTR) {
      *err = sys_error("control socket poll", errno);
      return false;
    }
  }
}

// Blocking-socket I/O, but every wait is bounded by the deadline (poll first,
// then a non-blocking syscall), and MSG_NOSIGNAL so a dead peer is an error.
bool write_all(int fd, const void* data, std::size_t len, Clock::time_point deadline, std::string* err) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (len > 0) {
    if (!wait_fd(fd, POLLOUT, deadline, err)) return false;
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      *err = sys_error("control socket send", errno);
      return false;
    }
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t len, Clock::time_point deadline, std::string* err) {
  auto* p = static_cast<unsigned char*>(data);
  while (len > 0) {
    if (!wait_fd(fd, POLLIN, deadline, err)) return false;
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n == 0) {
      *err = "control socket: peer hung up";
      return false;
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      *err = sys_error("control socket recv", errno);
      return false;
    }
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

// Tiny serializer for the open() exchange; both peers run on the same kind of
// host so native byte order is fine, but the magic catches a confused peer.
class BlobWriter {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, std::size_t len) {
    put(static_cast<std::uint32_t>(len));
    const auto* p = static_cast<const unsigned char*>(data);
    bytes_.insert(bytes_.end(), p, p + len);
  }
  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  std::vector<unsigned char> bytes_;
};

class BlobReader {
 public:
  explicit BlobReader(const std::vector<unsigned char>& b) : bytes_(b) {}
  template <typename T>
  bool get(T* v) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool get_bytes(std::vector<unsigned char>* out) {
    std::uint32_t len = 0;
    if (!get(&len) || bytes_.size() - pos_ < len) return false;
    out->assign(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_),
                bytes_.begin() + static_cast<std::ptrdiff_t>(pos_ + len));
    pos_ += len;
    return true;
  }

 private:
  const std::vector<unsigned char>& bytes_;
  std::size_t pos_ = 0;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

Buffer alloc_buffer(std::size_t len) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  len = (len + page - 1) / page * page;
  Buffer b(std::aligned_alloc(page, len));
  // Touch every page now so first-touch faults don't land inside a timed round.
  if (b) std::memset(b.get(), 0x5a, len);
  return b;
}

}  // namespace

// Per-operation context. FI_CONTEXT mode lets the provider scribble on the
// fi_context, so it must come first and each in-flight op needs its own.
struct OpCtx {
  fi_context fi;
  bool is_rx;
  std::size_t slot;  // rx: index of the receive slot in msg_buf
};

struct RawPeer::Impl {
  RawConfig cfg;
  int fd = -1;
  bool server = false;

  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* rma_mr = nullptr;
  fid_mr* msg_mr = nullptr;

  Buffer rma_buf;  // max_size: RMA source/target
  Buffer msg_buf;  // (1 + kRxDepth) slots of max_size: slot 0 send, rest receive
  std::size_t slot_size = 0;
  void* rma_desc = nullptr;
  void* msg_desc = nullptr;
  std::uint64_t rma_key = 0;
  std::uint64_t rma_base = 0;  // what the peer addresses our buffer by (VA or 0)

  fi_addr_t peer = 0;
  std::uint64_t peer_base = 0;
  std::uint64_t peer_key = 0;
  std::uint64_t peer_len = 0;

  std::vector<OpCtx> tx_ctx;
  std::vector<OpCtx> rx_ctx;
  std::vector<OpCtx*> tx_free;
  std::vector<OpCtx*> rx_pending;  // receive slots that need (re)posting
  std::uint64_t tx_done = 0;       // cumulative; an RMA round waits for all of its own
  // Messages received but not yet consumed by a round_trip loop. A credit count,
  // not a per-round base: the peer may legitimately send round N+1's first message
  // while we are still polling at the tail of round N, and that message must not
  // be lost to round N's bookkeeping.
  std::uint64_t rx_ready = 0;

  ~Impl() {
    // Endpoint first so nothing still references the MRs/CQ/AV when they close.
    close_fid(ep ? &ep->fid : nullptr);
    close_fid(rma_mr ? &rma_mr->fid : nullptr);
    close_fid(msg_mr ? &msg_mr->fid : nullptr);
    close_fid(av ? &av->fid : nullptr);
    close_fid(cq ? &cq->fid : nullptr);
    close_fid(domain ? &domain->fid : nullptr);
    close_fid(fabric ? &fabric->fid : nullptr);
    if (info) fi_freeinfo(info);
  }

  static void close_fid(fid* f) {
    if (f) fi_close(f);
  }

  std::size_t inject_size() const { return info->tx_attr->inject_size; }
  unsigned char* tx_slot() const { return static_cast<unsigned char*>(msg_buf.get()); }
  unsigned char* rx_slot(std::size_t i) const { return tx_slot() + (1 + i) * slot_size; }

  bool setup(std::string* err);
  bool register_mr(void* buf, std::size_t len, std::uint64_t access, std::uint64_t key, fid_mr** mr, std::string* err);
  bool exchange(Clock::time_point deadline, std::string* err);
  bool post_rx(OpCtx* c, std::string* err);
  long poll_cq(std::string* err);

  // Bounded busy-wait bookkeeping shared by every loop.
  struct Wait {
    Clock::time_point deadline;
    std::uint64_t n = 0;
  };
  Wait start_wait() const {
    return Wait{
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.timeout_sec)), 0};
  }
  enum class Step { go, end_of_round, fail };
  Step step(Wait* w, bool expect_end, bool* peer_failed, std::string* err);

  bool post_send(std::size_t len, Wait* w, bool* peer_failed, std::string* err);
  bool drain_tx(Wait* w, bool* peer_failed, std::string* err);
  void send_abort() const {
    char b = kAbortByte;
    (void)::send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
};

bool RawPeer::Impl::setup(std::string* err) {
  fi_info* hints = fi_allocinfo();
  if (!hints) {
    *err = "fi_allocinfo failed";
    return false;
  }
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA;
  hints->mode = FI_CONTEXT;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  // Single-threaded use: lets util-based providers (rxm, shm) elide locks.
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!cfg.prov_name.empty()) hints->fabric_attr->prov_name = ::strdup(cfg.prov_name.c_str());
  const char* node = cfg.node.empty() ? nullptr : cfg.node.c_str();
  const std::uint64_t flags = node ? FI_SOURCE : 0;
  int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, nullptr, flags, hints, &info);
  fi_freeinfo(hints);  // also frees the strdup'ed prov_name
  if (ret) {
    info = nullptr;
    *err = fi_error("fi_getinfo", ret);
    return false;
  }

  if ((ret = fi_fabric(info->fabric_attr, &fabric, nullptr))) {
    *err = fi_error("fi_fabric", ret);
    return false;
  }
  if ((ret = fi_domain(fabric, info, &domain, nullptr))) {
    *err = fi_error("fi_domain", ret);
    return false;
  }

  const std::size_t window = std::max<std::size_t>(cfg.window, 1);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_CONTEXT;
  cq_attr.wait_obj = FI_WAIT_NONE;  // busy-polled, no fd/signal overhead
  cq_attr.size = std::max<std::size_t>(info->tx_attr->size + info->rx_attr->size, window + kRxDepth);
  if ((ret = fi_cq_open(domain, &cq_attr, &cq, nullptr))) {
    *err = fi_error("fi_cq_open", ret);
    return false;
  }

  fi_av_attr av_attr{};
  av_attr.type = info->domain_attr->av_type != FI_AV_UNSPEC ? info->domain_attr->av_type : FI_AV_MAP;
  av_attr.count = 1;
  if ((ret = fi_av_open(domain, &av_attr, &av, nullptr))) {
    *err = fi_error("fi_av_open", ret);
    return false;
  }

  if ((ret = fi_endpoint(domain, info, &ep, nullptr))) {
    *err = fi_error("fi_endpoint", ret);
    return false;
  }
  if ((ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV))) {
    *err = fi_error("fi_ep_bind(cq)", ret);
    return false;
  }
  if ((ret = fi_ep_bind(ep, &av->fid, 0))) {
    *err = fi_error("fi_ep_bind(av)", ret);
    return false;
  }
  if ((ret = fi_enable(ep))) {
    *err = fi_error("fi_enable", ret);
    // shm names its region after the source address, so two processes given
    // the same node collide here.
    if (ret == -FI_EBUSY && node) *err += " (same node on both peers? leave node empty for shm)";
    return false;
  }

  // Registration happens once, here, never on the data path.
  slot_size = cfg.max_size;
  rma_buf = alloc_buffer(cfg.max_size);
  msg_buf = alloc_buffer((1 + kRxDepth) * slot_size);
  if (!rma_buf || !msg_buf) {
    *err = "buffer allocation failed";
    return false;
  }
  const std::uint64_t mr_mode = static_cast<std::uint64_t>(info->domain_attr->mr_mode);
  if (info->domain_attr->mr_key_size > sizeof(std::uint64_t)) {
    *err = "provider needs raw MR keys (mr_key_size > 8), unsupported";
    return false;
  }
  // Without FI_MR_PROV_KEY the application picks keys; random so a stale peer
  // can't hit them by accident, and distinct for the two regions.
  std::uint64_t key_mask = ~std::uint64_t{0};
  if (info->domain_attr->mr_key_size > 0 && info->domain_attr->mr_key_size < 8)
    key_mask = (std::uint64_t{1} << (8 * info->domain_attr->mr_key_size)) - 1;
  std::mt19937_64 rng(std::random_device{}());
  const std::uint64_t key0 = (rng() & key_mask) & ~std::uint64_t{1};
  if (!register_mr(rma_buf.get(), cfg.max_size, FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, key0, &rma_mr,
                   err))
    return false;
  if (!register_mr(msg_buf.get(), (1 + kRxDepth) * slot_size, FI_SEND | FI_RECV, key0 | 1, &msg_mr, err)) return false;
  rma_desc = fi_mr_desc(rma_mr);
  msg_desc = fi_mr_desc(msg_mr);
  rma_key = fi_mr_key(rma_mr);
  if (rma_key == FI_KEY_NOTAVAIL) {
    *err = "fi_mr_key: key not available";
    return false;
  }
  rma_base = (mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<std::uintptr_t>(rma_buf.get()) : 0;

  tx_ctx.resize(window);
  rx_ctx.resize(kRxDepth);
  tx_free.reserve(window);  // never reallocates on the data path
  rx_pending.reserve(kRxDepth);
  for (auto& c : tx_ctx) {
    c.is_rx = false;
    tx_free.push_back(&c);
  }
  for (std::size_t i = 0; i < kRxDepth; ++i) {
    rx_ctx[i].is_rx = true;
    rx_ctx[i].slot = i;
  }
  return true;
}

bool RawPeer::Impl::register_mr(void* buf, std::size_t len, std::uint64_t access, std::uint64_t key, fid_mr** mr,
                                std::string* err) {
  int ret = fi_mr_reg(domain, buf, len, access, 0, key, 0, mr, nullptr);
  if (ret) {
    *err = fi_error("fi_mr_reg", ret);
    return false;
  }
  if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
    if ((ret = fi_mr_bind(*mr, &ep->fid, 0))) {
      *err = fi_error("fi_mr_bind", ret);
      return false;
    }
    if ((ret = fi_mr_enable(*mr))) {
      *err = fi_error("fi_mr_enable", ret);
      return false;
    }
  }
  return true;
}

bool RawPeer::Impl::exchange(Clock::time_point deadline, std::string* err) {
  std::size_t addr_len = 0;
  int ret = fi_getname(&ep->fid, nullptr, &addr_len);
  if (ret != -FI_ETOOSMALL && ret != 0) {
    *err = fi_error("fi_getname(size)", ret);
    return false;
  }
  std::vector<unsigned char> addr(addr_len);
  if ((ret = fi_getname(&ep->fid, addr.data(), &addr_len))) {
    *err = fi_error("fi_getname", ret);
    return false;
  }
  addr.resize(addr_len);

  BlobWriter w;
  w.put(kMagic);
  w.put(kVersion);
  w.put(rma_base);
  w.put(rma_key);
  w.put(static_cast<std::uint64_t>(cfg.max_size));
  const std::string prov = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
  w.put_bytes(prov.data(), prov.size());
  w.put_bytes(addr.data(), addr.size());
  const auto frame_len = static_cast<std::uint32_t>(w.bytes().size());
  // Payload is tiny, so both sides writing before reading cannot deadlock.
  if (!write_all(fd, &frame_len, sizeof(frame_len), deadline, err) ||
      !write_all(fd, w.bytes().data(), w.bytes().size(), deadline, err))
    return false;

  std::uint32_t peer_frame = 0;
  if (!read_all(fd, &peer_frame, sizeof(peer_frame), deadline, err)) return false;
  if (peer_frame == 0 || peer_frame > kMaxBlob) {
    *err = "address exchange: bad frame length";
    return false;
  }
  std::vector<unsigned char> blob(peer_frame);
  if (!read_all(fd, blob.data(), blob.size(), deadline, err)) return false;

  BlobReader r(blob);
  std::uint32_t magic = 0, version = 0;
  std::vector<unsigned char> peer_prov, peer_addr;
  if (!r.get(&magic) || !r.get(&version) || magic != kMagic || version != kVersion || !r.get(&peer_base) ||
      !r.get(&peer_key) || !r.get(&peer_len) || !r.get_bytes(&peer_prov) || !r.get_bytes(&peer_addr) ||
      peer_addr.empty()) {
    *err = "address exchange: malformed peer blob";
    return false;
  }
  if (std::string(peer_prov.begin(), peer_prov.end()) != prov) {
    *err = "address exchange: peer picked provider '" + std::string(peer_prov.begin(), peer_prov.end()) +
           "', we picked '" + prov + "'";
    return false;
  }
  if (peer_addr == addr) {
    // Happens with shm when both sides pass the same node: each would then
    // silently talk to itself and the numbers would be meaningless.
    *err = "address exchange: peer has our own endpoint address (same node for shm?)";
    return false;
  }
  ret = fi_av_insert(av, peer_addr.data(), 1, &peer, 0, nullptr);
  if (ret != 1) {
    *err = fi_error("fi_av_insert", ret < 0 ? ret : -FI_EADDRNOTAVAIL);
    return false;
  }
  return true;
}

bool RawPeer::Impl::post_rx(OpCtx* c, std::string* err) {
  ssize_t ret = fi_recv(ep, rx_slot(c->slot), slot_size, msg_desc, kAnyAddr, c);
  if (ret == 0) return true;
  if (ret == -FI_EAGAIN) {
    rx_pending.push_back(c);  // retried on the next poll
    return true;
  }
  *err = fi_error("fi_recv", ret);
  return false;
}

// One fi_cq_read of up to kCqBatch entries (also drives manual progress).
// Returns the number of completions, or -1 with *err set.
long RawPeer::Impl::poll_cq(std::string* err) {
  fi_cq_entry entries[kCqBatch];
  ssize_t n = fi_cq_read(cq, entries, kCqBatch);
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      auto* c = static_cast<OpCtx*>(entries[i].op_context);
      if (!c) {
        *err = "completion without context";
        return -1;
      }
      if (c->is_rx) {
        ++rx_ready;
        rx_pending.push_back(c);
      } else {
        ++tx_done;
        tx_free.push_back(c);
      }
    }
  } else if (n == -FI_EAGAIN) {
    n = 0;
  } else if (n == -FI_EAVAIL) {
    fi_cq_err_entry e{};
    ssize_t r = fi_cq_readerr(cq, &e, 0);
    if (r < 0) {
      *err = fi_error("fi_cq_readerr", r);
      return -1;
    }
    char buf[256];
    const char* detail = fi_cq_strerror(cq, e.prov_errno, e.err_data, buf, sizeof(buf));
    *err = std::string("completion error: ") + fi_strerror(e.err) + " (prov: " + (detail ? detail : "?") + ")";
    return -1;
  } else {
    *err = fi_error("fi_cq_read", n);
    return -1;
  }
  // Re-post consumed receive slots right away so the peer's next message (sent
  // only after our reply) always finds a posted buffer.
  // In place (no temporary vector): this runs once per ping-pong message, so
  // keep heap allocation off the data path.
  if (!rx_pending.empty()) {
    std::size_t keep = 0;
    for (OpCtx* c : rx_pending) {
      ssize_t ret = fi_recv(ep, rx_slot(c->slot), slot_size, msg_desc, kAnyAddr, c);
      if (ret == -FI_EAGAIN) {
        rx_pending[keep++] = c;  // retried on the next poll
      } else if (ret) {
        *err = fi_error("fi_recv", ret);
        return -1;
      }
    }
    rx_pending.resize(keep);
  }
  return static_cast<long>(n);
}

RawPeer::Impl::Step RawPeer::Impl::step(Wait* w, bool expect_end, bool* peer_failed, std::string* err) {
  if (poll_cq(err) < 0) return Step::fail;
  ++w->n;
  if ((w->n & kTimeCheckMask) == 0 && Clock::now() > w->deadline) {
    char msg[64];
    std::snprintf(msg, sizeof(msg), "timed out after %.1f s", cfg.timeout_sec);
    *err = msg;
    return Step::fail;
  }
  // A syscall per poll would distort the loop, so the control socket (end of
  // round, abort, hang-up) is only looked at every ~thousand polls.
  if ((w->n & kCtrlCheckMask) == 0) {
    char b = 0;
    ssize_t r = ::recv(fd, &b, 1, MSG_DONTWAIT);
    if (r == 1) {
      if (expect_end && b == kEndByte) return Step::end_of_round;
      *peer_failed = true;
      *err = b == kAbortByte ? "peer aborted the round" : "unexpected byte on control socket";
      return Step::fail;
    }
    if (r == 0) {
      *peer_failed = true;
      *err = "control socket: peer hung up";
      return Step::fail;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *err = sys_error("control socket recv", errno);
      return Step::fail;
    }
  }
  return Step::go;
}

bool RawPeer::Impl::post_send(std::size_t len, Wait* w, bool* peer_failed, std::string* err) {
  for (;;) {
    ssize_t ret;
    OpCtx* c = nullptr;
    if (len <= inject_size()) {
      // Like fabtests' pingpong: inject copies the payload and generates no
      // completion, so there is nothing to reap afterwards.
      ret = fi_inject(ep, tx_slot(), len, peer);
    } else if (!tx_free.empty()) {
      c = tx_free.back();
      ret = fi_send(ep, tx_slot(), len, msg_desc, peer, c);
    } else {
      ret = -FI_EAGAIN;
    }
    if (ret == 0) {
      if (c) tx_free.pop_back();
      return true;
    }
    if (ret != -FI_EAGAIN) {
      *err = fi_error(c ? "fi_send" : "fi_inject", ret);
      return false;
    }
    if (step(w, false, peer_failed, err) == Step::fail) return false;
  }
}

bool RawPeer::Impl::drain_tx(Wait* w, bool* peer_failed, std::string* err) {
  while (tx_free.size() < tx_ctx.size())
    if (step(w, false, peer_failed, err) == Step::fail) return false;
  return true;
}

RawPeer::RawPeer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RawPeer::~RawPeer() = default;

std::unique_ptr<RawPeer> RawPeer::open(const RawConfig& cfg, int ctrl_fd, bool server, std::string* err) {
  std::string local_err;
  if (!err) err = &local_err;
  if (cfg.max_size == 0) {
    *err = "max_size must be > 0";
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->fd = ctrl_fd;
  impl->server = server;
  const auto deadline = impl->start_wait().deadline;
  if (!impl->setup(err) || !impl->exchange(deadline, err)) return nullptr;
  for (auto& c : impl->rx_ctx)
    if (!impl->post_rx(&c, err)) return nullptr;
  // Barrier: neither side starts traffic before the other has its AV entry and
  // receives in place, so round 1 never measures the unexpected-message path.
  char b = kReadyByte;
  if (!write_all(ctrl_fd, &b, 1, deadline, err) || !read_all(ctrl_fd, &b, 1, deadline, err)) return nullptr;
  if (b != kReadyByte) {
    *err = "open: bad barrier byte from peer";
    return nullptr;
  }
  return std::unique_ptr<RawPeer>(new RawPeer(std::move(impl)));
}

double RawPeer::run(Workload w, std::size_t size, std::size_t iterations, std::string* err, std::size_t window) {
  std::string local_err;
  if (!err) err = &local_err;
  Impl& m = *impl_;
  bool peer_failed = false;
  auto fail = [&]() {
    if (!peer_failed) m.send_abort();
    return -1.0;
  };
  Impl::Wait wait = m.start_wait();

  if (w == Workload::round_trip) {
    const std::size_t len = size ? size : 8;
    if (len > m.slot_size) {
      *err = "round_trip: size exceeds max_size";
      return fail();
    }
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < iterations; ++i) {
      if (!m.post_send(len, &wait, &peer_failed, err)) return fail();
      while (m.rx_ready == 0)
        if (m.step(&wait, false, &peer_failed, err) == Impl::Step::fail) {
          *err +=
              " (round_trip: waiting for reply " + std::to_string(i + 1) + " of " + std::to_string(iterations) + ")";
          return fail();
        }
      --m.rx_ready;
    }
    const auto t1 = Clock::now();
    if (!m.drain_tx(&wait, &peer_failed, err)) return fail();
    return std::chrono::duration<double>(t1 - t0).count();
  }

  if (size == 0 || size > m.cfg.max_size || size > m.peer_len) {
    *err = "rma: size must be in [1, max_size]";
    return fail();
  }
  const bool is_write = w == Workload::rma_write;
  void* local = m.rma_buf.get();
  const std::uint64_t tx_base = m.tx_done;
  std::size_t posted = 0;
  const auto t0 = Clock::now();
  while (m.tx_done - tx_base < iterations) {
    // Top the window up; -FI_EAGAIN means the provider queue is full, so fall
    // through to polling (which frees resources) and retry.
    while (posted < iterations && !m.tx_free.empty() && (window == 0 || posted - (m.tx_done - tx_base) < window)) {
      OpCtx* c = m.tx_free.back();
      ssize_t ret = is_write ? fi_write(m.ep, local, size, m.rma_desc, m.peer, m.peer_base, m.peer_key, c)
                             : fi_read(m.ep, local, size, m.rma_desc, m.peer, m.peer_base, m.peer_key, c);
      if (ret == -FI_EAGAIN) break;
      if (ret) {
        *err = fi_error(is_write ? "fi_write" : "fi_read", ret);
        return fail();
      }
      m.tx_free.pop_back();
      ++posted;
    }
    if (m.step(&wait, false, &peer_failed, err) == Impl::Step::fail) {
      *err += " (rma: " + std::to_string(m.tx_done - tx_base) + " of " + std::to_string(iterations) + " completed, " +
              std::to_string(posted) + " posted)";
      return fail();
    }
  }
  const auto t1 = Clock::now();
  // All initiator completions are in, so the target no longer needs to drive progress.
  char b = kEndByte;
  if (!write_all(m.fd, &b, 1, wait.deadline, err)) return -1.0;
  return std::chrono::duration<double>(t1 - t0).count();
}

bool RawPeer::serve(Workload w, std::size_t size, std::size_t iterations, std::string* err) {
  std::string local_err;
  if (!err) err = &local_err;
  Impl& m = *impl_;
  bool peer_failed = false;
  auto fail = [&]() {
    if (!peer_failed) m.send_abort();
    return false;
  };
  Impl::Wait wait = m.start_wait();

  if (w == Workload::round_trip) {
    const std::size_t len = size ? size : 8;
    if (len > m.slot_size) {
      *err = "round_trip: size exceeds max_size";
      return fail();
    }
    for (std::size_t i = 0; i < iterations; ++i) {
      while (m.rx_ready == 0)
        if (m.step(&wait, false, &peer_failed, err) == Impl::Step::fail) {
          *err +=
              " (round_trip: waiting for message " + std::to_string(i + 1) + " of " + std::to_string(iterations) + ")";
          return fail();
        }
      --m.rx_ready;
      if (!m.post_send(len, &wait, &peer_failed, err)) return fail();
    }
    if (!m.drain_tx(&wait, &peer_failed, err)) return fail();
    return true;
  }

  // RMA target: nothing to post, but manual progress means our CQ polls are
  // what move the data; keep polling until the initiator says it is done.
  for (;;) {
    switch (m.step(&wait, true, &peer_failed, err)) {
      case Impl::Step::go:
        break;
      case Impl::Step::end_of_round:
        return true;
      case Impl::Step::fail:
        return fail();
    }
  }
}

std::string RawPeer::describe() const {
  const fi_info* i = impl_->info;
  std::string s = impl_->server ? "role=server prov=" : "role=client prov=";
  s += i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?";
  s += " fabric=";
  s += i->fabric_attr->name ? i->fabric_attr->name : "?";
  s += " domain=";
  s += i->domain_attr->name ? i->domain_attr->name : "?";
  s += " mr_mode=";
  s += fi_tostr(&i->domain_attr->mr_mode, FI_TYPE_MR_MODE);
  s += " mode=";
  s += fi_tostr(&i->mode, FI_TYPE_MODE);
  s += " inject=" + std::to_string(i->tx_attr->inject_size);
  s += " tx_size=" + std::to_string(i->tx_attr->size);
  s += " rx_size=" + std::to_string(i->rx_attr->size);
  s += " rma_addr=" + std::string((i->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? "va" : "offset");
  return s;
}

}  // namespace rawbench
