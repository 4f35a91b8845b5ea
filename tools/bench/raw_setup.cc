// Raw-libfabric baseline for rpcie-bench, its setup: the fabric, the endpoint and the
// buffers (registered once, here), and the address exchange with the peer. See raw_loop.hpp.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "raw_peer.hpp"
#include "rpcie/providers/provider.hpp"

namespace rpcie::bench::raw {
namespace {

constexpr std::uint32_t kMagic = 0x52415742;  // "RAWB"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kMaxBlob = 4096;

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

Buffer alloc_buffer(std::size_t len) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  len = (len + page - 1) / page * page;
  Buffer b(std::aligned_alloc(page, len));
  // Touch every page now so first-touch faults don't land inside a timed round; rpcie's side
  // writes the same byte into its buffers (support.hpp, buffer_written).
  if (b) std::memset(b.get(), 0x5a, len);
  return b;
}

}  // namespace

std::string fi_error(const char* what, long ret) {
  return std::string(what) + ": " + fi_strerror(static_cast<int>(-ret)) + " (" + std::to_string(ret) + ")";
}

std::string sys_error(const char* what, int e) { return std::string(what) + ": " + std::strerror(e); }

namespace {

enum class Way { send, recv };

// All `len` bytes one way over the control socket, within the deadline. `p` is only read
// when sending.
bool transfer_all(int fd, Way way, unsigned char* p, std::size_t len, Clock::time_point deadline, std::string* err) {
  const bool sending = way == Way::send;
  while (len > 0) {
    if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline, err)) return false;
    const ssize_t n = sending ? ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd, p, len, MSG_DONTWAIT);
    if (n == 0 && !sending) {
      *err = "control socket: peer hung up";
      return false;
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      *err = sys_error(sending ? "control socket send" : "control socket recv", errno);
      return false;
    }
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

bool write_all(int fd, const void* data, std::size_t len, Clock::time_point deadline, std::string* err) {
  auto* bytes = const_cast<unsigned char*>(static_cast<const unsigned char*>(data));  // only read
  return transfer_all(fd, Way::send, bytes, len, deadline, err);
}

bool read_all(int fd, void* data, std::size_t len, Clock::time_point deadline, std::string* err) {
  return transfer_all(fd, Way::recv, static_cast<unsigned char*>(data), len, deadline, err);
}

bool RawPeer::Impl::setup(std::string* err) {
  if (!fabric_open(err) || !endpoint_open(err) || !buffers_register(err)) return false;
  contexts_init();
  return true;
}

// fi_getinfo for the configured provider and node, the fabric and the domain.
bool RawPeer::Impl::fabric_open(std::string* err) {
  // The same libfabric settings as rpcie's own endpoints, so both sides measure alike.
  rpcie::providers::environment_defaults_apply();
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
  int ret = fi_getinfo(rpcie::providers::kFabricApiVersion, node, nullptr, flags, hints, &info);
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
  return true;
}

// The busy-polled CQ, the address vector, and the endpoint bound to both.
bool RawPeer::Impl::endpoint_open(std::string* err) {
  const std::size_t window = std::max<std::size_t>(cfg.window, 1);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_MSG;  // the length of each receive, for sealed streams
  cq_attr.wait_obj = FI_WAIT_NONE;    // busy-polled, no fd/signal overhead
  cq_attr.size = std::max<std::size_t>(info->tx_attr->size + info->rx_attr->size, window + kRxDepth);
  int ret;
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
    if (ret == -FI_EBUSY && !cfg.node.empty()) *err += " (same node on both peers? leave node empty for shm)";
    return false;
  }
  return true;
}

// Registration happens once, here, never on the data path.
bool RawPeer::Impl::buffers_register(std::string* err) {
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
  return true;
}

void RawPeer::Impl::contexts_init() {
  const std::size_t window = std::max<std::size_t>(cfg.window, 1);
  tx_ctx.resize(window);
  rx_ctx.resize(kRxDepth);
  tx_free.reserve(window);  // never reallocates on the data path
  rx_pending.reserve(kRxDepth);
  for (std::size_t i = 0; i < window; ++i) {
    tx_ctx[i].is_rx = false;
    tx_ctx[i].slot = i;
    tx_free.push_back(&tx_ctx[i]);
  }
  for (std::size_t i = 0; i < kRxDepth; ++i) {
    rx_ctx[i].is_rx = true;
    rx_ctx[i].slot = i;
  }
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

}  // namespace rpcie::bench::raw
