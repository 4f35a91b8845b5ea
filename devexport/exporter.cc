// rpcie-exportd's engine. See exporter.hpp for the contract and ARCHITECTURE.md section 1
// for the ordering rules this file enforces.
#include "exporter.hpp"

#include <poll.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/log.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/session.hpp"

namespace rpcie::dev {

namespace {

using namespace std::chrono_literals;

// Region ids (docs/protocol.md 8.6): BAR n that is plain memory has id n; the ids the client
// looks up (bounce buffer, mirror, its window) are in protocol.hpp.
constexpr std::uint32_t kStagingRegion = 17;  // on-demand DMA staging (local only)
constexpr std::size_t kBounceSize = 1u << 20;
constexpr std::size_t kStagingSize = 1u << 20;
constexpr std::uint64_t kWindowMax = 4ULL << 30;
constexpr std::uint64_t kMirrorMax = 1ULL << 30;
constexpr auto kHandshakeTimeout = 5s;
constexpr auto kDeviceTimeout = 2s;  // a DMA or interrupt that cannot reach the client in this long fails
constexpr std::size_t kDirtyRangesMax = 64;
constexpr std::size_t kWarmupBytes = 1024;  // over every provider's inject size

struct ExportSlot {
  ExportConfig config;
  std::unique_ptr<Backend> backend;
  std::vector<std::string> holders;  // guarded by Exporter::Impl::lock
  std::mutex calls;                  // backend calls of several attachments (shared exports)
  bool device_attached = false;      // guarded by calls
};

proto::BarKind bar_kind(RegionKind k) {
  switch (k) {
    case RegionKind::registers:
      return proto::BarKind::registers;
    case RegionKind::memory:
      return proto::BarKind::memory;
    case RegionKind::io:
      return proto::BarKind::io;
  }
  return proto::BarKind::registers;
}

bool bar_direct(Backend& b, const Region& r) {
  return r.kind == RegionKind::memory && !r.readonly && b.bar_memory(r.bar).size() == r.size;
}

// An entry for list / attach replies. Views point into `slot` and `holder`.
proto::ExportEntry entry_make(ExportSlot& slot, const std::string& holder) {
  proto::ExportEntry e;
  const auto& id = slot.backend->identity();
  e.name = slot.config.spec.name;
  e.backend = slot.backend->name();
  e.holder = std::string_view(holder).substr(0, proto::kMaxNameText);
  e.vendor = id.vendor;
  e.device = id.device;
  e.class_code = id.class_code & 0xffffff;
  e.subsystem_vendor = id.subsystem_vendor;
  e.subsystem_device = id.subsystem_device;
  e.revision = id.revision;
  e.state = slot.holders.empty() ? proto::ExportState::free : proto::ExportState::attached;
  e.flags = static_cast<std::uint8_t>((slot.config.shared ? proto::kExportShared : 0) |
                                      (slot.config.dma == DmaMode::mirror ? proto::kExportMirror : 0));
  e.vectors = std::min<std::uint16_t>(slot.backend->vector_count(), proto::kMaxVector);
  for (const auto& r : slot.backend->regions()) {
    if (e.bars.size() == pci::kBarCount) break;
    std::uint8_t flags =
        static_cast<std::uint8_t>((r.is_64bit ? proto::kBarFlag64 : 0) | (r.readonly ? proto::kBarFlagReadonly : 0) |
                                  (bar_direct(*slot.backend, r) ? proto::kBarFlagDirect : 0));
    e.bars.push_back({r.bar, bar_kind(r.kind), flags, r.size});
  }
  return e;
}

std::string holders_text(const std::vector<std::string>& holders) {
  std::string out;
  for (const auto& h : holders) out += (out.empty() ? "" : ",") + h;
  return out;
}

// Waits until `fd` is readable, `stop` is set, or `slice` passes. True when readable.
bool readable_wait(int fd, std::chrono::milliseconds slice) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(slice.count())) > 0;
}

}  // namespace

// --- One attachment, device-server side -----------------------------------------------

class ServedAttachment final : public DmaPort, public IrqSink {
 public:
  // `pushed`: the client pushes what the device is to read (proto::kAttachWindowPush).
  ServedAttachment(ExportSlot& slot, std::uint64_t id, std::uint64_t window_size, bool pushed)
      : slot_(slot),
        id_(id),
        window_size_(window_size),
        mirror_(slot.config.dma == DmaMode::mirror && window_size > 0),
        pushed_(mirror_ && pushed),
        irq_counts_(slot.backend->vector_count(), 0) {}
  ~ServedAttachment() override { teardown(false); }

  // Buffers, the Session handshake on `socket` (hello from the client), device attach, data
  // thread. `first`: this attachment is the device's first holder (it attaches the device).
  Result<void> setup(Socket socket, const SessionOptions& options, bool first, Deadline deadline) {
    std::vector<LocalRegion> regions;
    for (const auto& r : slot_.backend->regions()) {
      if (!bar_direct(*slot_.backend, r)) continue;
      auto mem = slot_.backend->bar_memory(r.bar);
      regions.push_back({r.bar, mem.data(), mem.size(), FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE});
    }
    auto bounce = HostBuffer::create(kBounceSize);
    if (!bounce) return tl::unexpected(bounce.error());
    bounce_.emplace(std::move(*bounce));
    regions.push_back({proto::kRegionBounce, bounce_->data(), bounce_->size(),
                       FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE});
    if (window_size_ > 0) {
      auto local = HostBuffer::create(mirror_ ? window_size_ : kStagingSize);
      if (!local) return tl::unexpected(local.error());
      local_.emplace(std::move(*local));
      // A client that pushes writes into the mirror itself (one-sided, Attachment::window_push).
      regions.push_back({mirror_ ? proto::kRegionMirror : kStagingRegion, local_->data(), local_->size(),
                         FI_READ | FI_WRITE | (pushed_ ? FI_REMOTE_WRITE : 0)});
    }
    auto session = Session::accept(std::move(socket), options, regions, deadline);
    if (!session) return tl::unexpected(session.error());
    session_ = std::move(*session);
    // Warms the fabric up now rather than on the first device access (the client answers
    // this ping with a pong): rxm connects on first use, and its first sends larger than
    // the inject size allocate its buffer pools (measured: 10-20 ms each on tcp).
    std::vector<std::uint8_t> warm(kWarmupBytes, 0);
    auto ping = session_->channel().message_send(proto::Ping{warm}, 0, deadline);
    if (!ping) return ping;
    if (window_size_ > 0) {
      auto w = session_->peer_region(proto::kRegionWindow);
      if (!w) return fail(EPROTO, "the client offered no DMA window");
      if (w->length < window_size_) return fail(EPROTO, "the client's window is smaller than announced");
      window_ = *w;
      local_mr_ = &session_->region(regions.size() - 1);
    }
    // (No initial pull of the mirror: the device reads host memory only after a doorbell,
    // and every doorbell pulls the window first — or the client pushed what it will read.)
    {
      // Device work that is due at once runs on this attachment's thread, after the request
      // that started it (data_run), instead of behind a hand-off to a backend thread.
      std::lock_guard g(slot_.calls);
      slot_.backend->work_inline_enable();
    }
    if (first) {
      // A shared export's device outlives any one attachment, so it gets no ports (shared
      // exports cannot do DMA; create() refuses that) and its interrupts go nowhere.
      std::lock_guard g(slot_.calls);
      const bool own = !slot_.config.shared;
      const bool dma = own && slot_.backend->uses_dma() && window_size_ > 0;
      auto a = slot_.backend->attach(dma ? this : nullptr, own ? this : nullptr);
      if (!a) return a;
      slot_.device_attached = true;
    }
    data_thread_ = std::thread([this] { data_run(); });
    return {};
  }

  // Ends the attachment: no more requests, device detached (and reset) if `last`, memory
  // keys closed with the session.
  void teardown(bool last) {
    stop_.store(true);
    if (data_thread_.joinable()) data_thread_.join();
    if (last) {
      // detach() returns the device to its power-on state where the backend can (the
      // contract's reset-on-detach): the next client finds it fresh.
      std::lock_guard g(slot_.calls);
      if (std::exchange(slot_.device_attached, false)) slot_.backend->detach();
    }
    session_.reset();  // closes the memory regions: the client's keys to them are dead
  }

  Socket& bootstrap() { return session_->bootstrap(); }
  bool has_session() const { return session_ != nullptr; }
  bool failed() const { return failed_.load(); }
  std::uint64_t id() const { return id_; }

  // DmaPort ---------------------------------------------------------------------------
  std::uint64_t window_size() const noexcept override { return window_size_; }

  Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline deadline) override {
    if (!window_contains(iova, into.size())) return fail(EFAULT, "DMA read outside the window");
    if (mirror_) {
      std::lock_guard g(dma_lock_);
      std::memcpy(into.data(), local_->data() + iova, into.size());
      return {};
    }
    std::lock_guard g(dma_lock_);
    auto& ch = session_->channel();
    for (std::size_t done = 0; done < into.size();) {
      const std::size_t n = std::min(into.size() - done, kStagingSize);
      auto r = ch.rma_read(*local_mr_, 0, window_, iova + done, n, deadline);
      if (r) r = ch.rma_flush(deadline);
      if (!r) return fail(EIO, "DMA read from the client's window failed: " + r.error().describe());
      std::memcpy(into.data() + done, local_->data(), n);
      done += n;
    }
    return {};
  }

  Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline deadline) override {
    if (!window_contains(iova, from.size())) return fail(EFAULT, "DMA write outside the window");
    std::lock_guard g(dma_lock_);
    if (mirror_) {
      std::memcpy(local_->data() + iova, from.data(), from.size());
      dirty_add(iova, from.size());
      return {};
    }
    // Posted RMA writes; the staging buffer is free again once they completed locally. A
    // later interrupt or read reply is ordered behind them by message_send_after_writes.
    auto& ch = session_->channel();
    for (std::size_t done = 0; done < from.size();) {
      const std::size_t n = std::min(from.size() - done, kStagingSize);
      std::memcpy(local_->data(), from.data() + done, n);
      auto w = ch.rma_write(*local_mr_, 0, window_, iova + done, n, deadline);
      if (w) w = ch.rma_flush(deadline);
      if (!w) return fail(EIO, "DMA write to the client's window failed: " + w.error().describe());
      done += n;
    }
    return {};
  }

  // IrqSink ---------------------------------------------------------------------------
  void irq_raise(std::uint16_t vector) override {
    if (vector >= irq_counts_.size() || stop_.load()) return;
    std::lock_guard g(irq_lock_);  // interrupts leave in the order they were raised
    const std::uint64_t count = ++irq_counts_[vector];
    auto deadline = Deadline::after(kDeviceTimeout);
    // Rule 4: what the device wrote before the interrupt reaches the window first.
    auto pushed = mirror_push(deadline);
    auto sent =
        pushed ? session_->channel().message_send_after_writes(proto::Interrupt{vector, count}, 0, deadline) : pushed;
    if (!sent) {
      RPCIE_LOG_WARN("exportd", "attachment {}: interrupt {} not delivered: {}", id_, vector, sent.error().describe());
      failed_.store(true);
    }
  }

 private:
  bool window_contains(std::uint64_t iova, std::size_t length) const {
    return window_size_ > 0 && iova <= window_size_ && length <= window_size_ - iova;
  }

  void dirty_add(std::uint64_t at, std::uint64_t length) {
    // Ranges stay sorted and disjoint; beyond kDirtyRangesMax they collapse into one.
    std::uint64_t begin = at, end = at + length;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    bool placed = false;
    for (auto [b, e] : dirty_) {
      if (e < begin)
        out.push_back({b, e});
      else if (end < b) {
        if (!placed) out.push_back({begin, end}), placed = true;
        out.push_back({b, e});
      } else {
        begin = std::min(begin, b);
        end = std::max(end, e);
      }
    }
    if (!placed) out.push_back({begin, end});
    std::sort(out.begin(), out.end());
    if (out.size() > kDirtyRangesMax) out = {{out.front().first, out.back().second}};
    dirty_ = std::move(out);
  }

  void dirty_remove(std::uint64_t at, std::uint64_t length) {
    const std::uint64_t begin = at, end = at + length;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (auto [b, e] : dirty_) {
      if (b < begin) out.push_back({b, std::min(e, begin)});
      if (e > end) out.push_back({std::max(b, end), e});
    }
    dirty_ = std::move(out);
  }

  // Mirror mode: posts RMA writes of what the device changed in the mirror. The caller then
  // sends with message_send_after_writes, which orders the message behind them.
  Result<void> mirror_push(Deadline deadline) {
    if (!mirror_) return {};
    std::lock_guard g(dma_lock_);
    return mirror_push_locked(deadline);
  }
  Result<void> mirror_push_locked(Deadline deadline) {
    auto& ch = session_->channel();
    for (auto [b, e] : dirty_) {
      auto w = ch.rma_write(*local_mr_, b, window_, b, e - b, deadline);
      if (!w) return w;
    }
    dirty_.clear();
    return {};
  }
  // Mirror mode, rule 3: the whole window from the client before a doorbell (nothing finer
  // is known about what the driver wrote), unless the client pushes (then its pushes are
  // ordered before the doorbell on the channel, and they are all the device may read).
  // Device writes not yet pushed go out first, so the pull cannot overwrite them with older
  // bytes.
  Result<void> window_pull_locked() {
    auto deadline = Deadline::after(kDeviceTimeout);
    auto& ch = session_->channel();
    auto r = mirror_push_locked(deadline);
    if (r) r = ch.rma_flush(deadline);
    if (r) r = ch.rma_read(*local_mr_, 0, window_, 0, window_size_, deadline);
    if (r) r = ch.rma_flush(deadline);
    return r;
  }

  Result<void> reply_send(const proto::Message& m, std::uint64_t rid) {
    auto deadline = Deadline::after(kDeviceTimeout);
    auto pushed = mirror_push(deadline);  // rule 4 for read completions
    if (!pushed) return pushed;
    return session_->channel().message_send_after_writes(m, rid, deadline);
  }

  Result<void> error_send(int code, const std::string& text, std::uint64_t rid) {
    return session_->channel().message_send(
        proto::ErrorMsg{code, std::string_view(text).substr(0, proto::kMaxErrorText)}, rid,
        Deadline::after(kDeviceTimeout));
  }

  const Region* region_find(std::uint8_t bar) const {
    for (const auto& r : slot_.backend->regions())
      if (r.bar == bar) return &r;
    return nullptr;
  }

  // Bounce buffer <-> BAR for memory BARs that are not plain memory (or not offered).
  Result<void> bar_copy(const proto::BarCommit& c, bool to_bar) {
    const Region* r = region_find(c.bar);
    if (!r || r->kind != RegionKind::memory)
      return fail(EINVAL, "BAR " + std::to_string(c.bar) + " is not a memory BAR");
    if (c.offset > r->size || c.length > r->size - c.offset) return fail(EINVAL, "range outside the BAR");
    if (c.bounce_offset > kBounceSize || c.length > kBounceSize - c.bounce_offset)
      return fail(EINVAL, "range outside the bounce buffer");
    if (to_bar && r->readonly) return fail(EPERM, "BAR " + std::to_string(c.bar) + " is read-only");
    std::uint8_t* bounce = bounce_->data() + c.bounce_offset;
    auto mem = slot_.backend->bar_memory(c.bar);
    if (mem.size() == r->size) {
      if (to_bar)
        std::memcpy(mem.data() + c.offset, bounce, c.length);
      else
        std::memcpy(bounce, mem.data() + c.offset, c.length);
      return {};
    }
    // Through MMIO, the widest naturally aligned access at each step.
    return pci::access_split(c.offset, c.length, pci::kBarWidthMax, [&](std::uint64_t at, unsigned w) -> Result<void> {
      std::uint8_t* byte = bounce + (at - c.offset);
      if (to_bar) {
        std::uint64_t v = 0;
        std::memcpy(&v, byte, w);
        return slot_.backend->mmio_write(c.bar, at, w, v);
      }
      RPCIE_TRY_ASSIGN(const std::uint64_t v, slot_.backend->mmio_read(c.bar, at, w));
      std::memcpy(byte, &v, w);
      return {};
    });
  }

  // Streaming DMA: bytes the client pushed (window_push) for what the device reads next.
  // They replace what the device wrote there and had not yet pushed back: the client's
  // window holds the pushed bytes already.
  Result<void> mirror_fill(std::uint64_t iova, std::span<const std::uint8_t> bytes) {
    if (!pushed_)
      return fail(EINVAL, "window push: this attachment did not attach to push (no mirror, or no kAttachWindowPush)");
    if (!window_contains(iova, bytes.size())) return fail(EINVAL, "window push outside the window");
    std::lock_guard g(dma_lock_);
    std::memcpy(local_->data() + iova, bytes.data(), bytes.size());
    dirty_remove(iova, bytes.size());
    return {};
  }

  Result<void> posted_write(const proto::MmioWrite& m) {
    if (mirror_ && !pushed_ && slot_.backend->mmio_write_is_doorbell(m.bar, m.offset)) {
      std::lock_guard g(dma_lock_);  // rule 3: the driver's memory before the doorbell
      auto pulled = window_pull_locked();
      if (!pulled) return fail(EIO, "window pull before a doorbell failed: " + pulled.error().describe());
    }
    return slot_.backend->mmio_write(m.bar, m.offset, m.width, m.value);
  }

  void handle(const proto::Decoded& d) {
    const auto rid = d.header.request_id;
    Result<void> sent{};
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          std::unique_lock calls(slot_.calls);
          if constexpr (std::is_same_v<M, proto::ConfigRead>) {
            auto v = slot_.backend->config_read(m.offset, m.width);
            calls.unlock();
            sent = reply_send(proto::ReadReply{v ? 0 : v.error().to_errno(), v ? *v : 0}, rid);
          } else if constexpr (std::is_same_v<M, proto::ConfigWrite>) {
            auto r = slot_.backend->config_write(m.offset, m.width, m.value);
            calls.unlock();
            sent = reply_send(proto::WriteAck{r ? 0 : r.error().to_errno()}, rid);
          } else if constexpr (std::is_same_v<M, proto::MmioRead>) {
            auto v = slot_.backend->mmio_read(m.bar, m.offset, m.width);
            calls.unlock();
            sent = reply_send(proto::ReadReply{v ? 0 : v.error().to_errno(), v ? *v : 0}, rid);
          } else if constexpr (std::is_same_v<M, proto::MmioWrite>) {
            auto r = posted_write(m);
            calls.unlock();
            // Posted: only a failure is answered (the client reports it on its next call).
            if (!r) sent = error_send(r.error().to_errno(), r.error().message, rid);
          } else if constexpr (std::is_same_v<M, proto::MmioWriteBatch> || std::is_same_v<M, proto::WindowPush>) {
            // Each step is performed, in order, whatever became of the one before (as
            // posted writes on PCIe); the first failure is reported.
            Result<void> first_failure{};
            if constexpr (std::is_same_v<M, proto::WindowPush>) first_failure = mirror_fill(m.window_offset, m.data);
            for (const auto& w : m.writes) {
              auto r = posted_write(w);
              if (!r && first_failure) first_failure = r;
            }
            calls.unlock();
            if (!first_failure) sent = error_send(first_failure.error().to_errno(), first_failure.error().message, rid);
          } else if constexpr (std::is_same_v<M, proto::BarFetch>) {
            auto r = bar_copy(m, false);
            calls.unlock();
            sent = reply_send(proto::WriteAck{r ? 0 : r.error().to_errno()}, rid);
          } else if constexpr (std::is_same_v<M, proto::BarCommit>) {
            auto r = bar_copy(m, true);
            calls.unlock();
            sent = reply_send(proto::WriteAck{r ? 0 : r.error().to_errno()}, rid);
          } else if constexpr (std::is_same_v<M, proto::Pong>) {
            calls.unlock();  // the answer to the warm-up ping of setup()
          } else {
            calls.unlock();
            RPCIE_LOG_ONCE(LogLevel::warn, "exportd", "unexpected {} on the data path",
                           proto::msg_type_name(d.header.type));
            sent = error_send(EPROTO, std::string("unexpected ") + proto::msg_type_name(d.header.type), rid);
          }
        },
        d.message);
    if (!sent) {
      RPCIE_LOG_WARN("exportd", "attachment {}: reply failed: {}", id_, sent.error().describe());
      failed_.store(true);
    }
  }

  void data_run() {
    auto& ch = session_->channel();
    while (!stop_.load()) {
      auto ready = ch.message_wait(Deadline::after(100ms), [this] { return stop_.load(std::memory_order_relaxed); });
      if (!ready) {
        RPCIE_LOG_WARN("exportd", "attachment {}: fabric failed: {}", id_, ready.error().describe());
        failed_.store(true);
        return;
      }
      if (!*ready) continue;
      auto m = ch.message_recv(Deadline::after(10ms));
      if (!m) {
        if (m.error().code == EPROTO) continue;  // malformed: dropped and counted by the channel
        if (m.error().code == ETIMEDOUT) continue;
        failed_.store(true);
        return;
      }
      handle(**m);
      // The request has been performed (a posted write that started device work included):
      // now the work that is due, here, with no thread hand-off (Backend::work_run).
      std::lock_guard g(slot_.calls);
      slot_.backend->work_run();
    }
  }

  ExportSlot& slot_;
  std::uint64_t id_;
  std::uint64_t window_size_;
  bool mirror_;
  bool pushed_;
  std::unique_ptr<Session> session_;
  std::optional<HostBuffer> bounce_;
  std::optional<HostBuffer> local_;  // staging (on-demand) or mirror
  const MemoryRegion* local_mr_ = nullptr;
  RemoteRegion window_{};
  std::mutex dma_lock_;  // staging / mirror and its dirty ranges
  std::vector<std::pair<std::uint64_t, std::uint64_t>> dirty_;
  std::mutex irq_lock_;
  std::vector<std::uint64_t> irq_counts_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::thread data_thread_;
};

// --- The exporter -------------------------------------------------------------------

struct Exporter::Impl {
  ExporterConfig config;
  std::optional<Listener> listener;
  std::shared_ptr<const auth::Key> shared_key;
  std::map<std::string, std::shared_ptr<const auth::Key>> client_keys;
  std::vector<std::unique_ptr<ExportSlot>> exports;
  std::mutex lock;  // holders of every slot
  std::atomic<std::uint64_t> next_attachment{1};
  const std::atomic<bool>* stop = nullptr;

  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Connection> connections;

  bool stopping() const { return stop != nullptr && stop->load(); }

  Result<std::string> authenticate(Socket& sock) {
    auto deadline = Deadline::after(kHandshakeTimeout);
    auto first = sock.message_recv(deadline);
    if (!first) return tl::unexpected(first.error());
    auto* hello = std::get_if<proto::AuthHello>(&first->decoded.message);
    if (!hello) {
      (void)sock.message_send(proto::ErrorMsg{EACCES, "authenticate first (auth_hello)"},
                              first->decoded.header.request_id, deadline);
      return fail(EACCES, std::string("peer sent ") + proto::msg_type_name(first->decoded.header.type) +
                              " before authenticating");
    }
    const std::string name(hello->client);
    auth::Nonce client_nonce{};
    std::copy(hello->nonce.begin(), hello->nonce.end(), client_nonce.begin());
    std::shared_ptr<const auth::Key> key;
    if (auto it = client_keys.find(name); it != client_keys.end())
      key = it->second;
    else if (shared_key && auth::client_name_valid(name))
      key = shared_key;
    std::optional<auth::Key> decoy;
    if (!key) {
      // Unknown client: answer like for a known one, with a key nobody has, so that the
      // reply does not tell which names exist. The client's check of our proof fails.
      auth::Nonce junk = auth::nonce_random();
      auto k = auth::Key::create(junk);
      if (!k) return tl::unexpected(k.error());
      decoy.emplace(std::move(*k));
    }
    const auth::Key& use = key ? *key : *decoy;
    const auth::Nonce server_nonce = auth::nonce_random();
    const auth::Proof mine = auth::proof_compute(use, auth::Role::server, name, client_nonce, server_nonce);
    auto sent = sock.message_send(proto::AuthChallenge{server_nonce, mine}, 0, deadline);
    if (!sent) return tl::unexpected(sent.error());
    auto answer = sock.message_recv(deadline);
    if (!answer) return tl::unexpected(answer.error());
    auto* proof = std::get_if<proto::AuthProof>(&answer->decoded.message);
    auth::Proof theirs{};
    if (proof) std::copy(proof->proof.begin(), proof->proof.end(), theirs.begin());
    if (!key || !proof || !auth::proof_verify(use, auth::Role::client, name, client_nonce, server_nonce, theirs)) {
      (void)sock.message_send(proto::ErrorMsg{EACCES, "authentication failed for client '" + name + "'"}, 0, deadline);
      return fail(EACCES, "authentication failed for client '" + name + "' from " + sock.peer_address());
    }
    sent = sock.message_send(proto::AuthOk{}, 0, deadline);
    if (!sent) return tl::unexpected(sent.error());
    sock.frame_mac_set(
        auth::FrameMac(auth::session_key_derive(use, name, client_nonce, server_nonce), auth::Role::server));
    return name;
  }

  proto::ListReply list_make(std::vector<std::string>& holder_storage) {
    std::lock_guard g(lock);
    proto::ListReply l;
    holder_storage.clear();
    holder_storage.reserve(exports.size());  // entries point into these strings
    for (auto& slot : exports) {
      if (l.exports.size() == proto::kMaxExports) break;
      holder_storage.push_back(holders_text(slot->holders));
      l.exports.push_back(entry_make(*slot, holder_storage.back()));
    }
    return l;
  }

  ExportSlot* slot_find(std::string_view name) {
    for (auto& s : exports)
      if (s->config.spec.name == name) return s.get();
    return nullptr;
  }

  // Claims the export for `client`, or says why not. Returns whether it is the first holder.
  Result<bool> claim(ExportSlot& slot, const std::string& client) {
    const auto& allow = slot.config.allow;
    if (!allow.empty() && std::find(allow.begin(), allow.end(), client) == allow.end())
      return fail(EACCES, "client '" + client + "' is not allowed to attach '" + slot.config.spec.name + "'");
    std::lock_guard g(lock);
    if (!slot.holders.empty() && !slot.config.shared)
      return fail(EBUSY, "busy: attached by " + holders_text(slot.holders));
    slot.holders.push_back(client);
    return slot.holders.size() == 1;
  }
  // Releases one claim; true when it was the last holder.
  bool release(ExportSlot& slot, const std::string& client) {
    std::lock_guard g(lock);
    auto it = std::find(slot.holders.begin(), slot.holders.end(), client);
    if (it != slot.holders.end()) slot.holders.erase(it);
    return slot.holders.empty();
  }

  // Serves one attachment until goodbye, lease lapse, connection loss or shutdown. Returns
  // the request id of the client's goodbye (answered once the device is reset), if that
  // is how it ended.
  std::optional<std::uint64_t> attachment_serve(ServedAttachment& a, ExportSlot& slot, const std::string& client) {
    auto last_heard = Deadline::Clock::now();
    const auto lease = config.lease;
    for (;;) {
      if (stopping()) {
        RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: ending (shutdown)", a.id(), slot.config.spec.name,
                       client);
        return std::nullopt;
      }
      if (a.failed()) {
        RPCIE_LOG_WARN("exportd", "attachment {} of {} by {}: ending after a fabric failure", a.id(),
                       slot.config.spec.name, client);
        return std::nullopt;
      }
      if (Deadline::Clock::now() - last_heard > lease) {
        RPCIE_LOG_WARN("exportd", "attachment {} of {} by {}: lease lapsed (no heartbeat for {} ms)", a.id(),
                       slot.config.spec.name, client, lease.count());
        return std::nullopt;
      }
      auto& sock = a.bootstrap();
      if (!readable_wait(sock.fd(), 200ms)) continue;
      auto m = sock.message_recv(Deadline::after(lease));
      if (!m) {
        RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: connection lost ({})", a.id(), slot.config.spec.name,
                       client, m.error().describe());
        return std::nullopt;
      }
      last_heard = Deadline::Clock::now();
      const auto rid = m->decoded.header.request_id;
      if (auto* hb = std::get_if<proto::Heartbeat>(&m->decoded.message)) {
        (void)sock.message_send(proto::Heartbeat{hb->sequence}, rid, Deadline::after(lease));
      } else if (std::holds_alternative<proto::Goodbye>(m->decoded.message)) {
        RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: detached", a.id(), slot.config.spec.name, client);
        return rid;
      } else {
        (void)sock.message_send(
            proto::ErrorMsg{EPROTO, std::string("unexpected ") + proto::msg_type_name(m->decoded.header.type)}, rid,
            Deadline::after(lease));
      }
    }
  }

  Result<void> attach(Socket& sock, const proto::AttachRequest& req, std::uint64_t rid, const std::string& client) {
    ExportSlot* slot = slot_find(req.export_name);
    if (!slot) return fail(ENOENT, "no export named '" + std::string(req.export_name) + "'");
    if (slot->backend->uses_dma() && req.window_size == 0)
      return fail(EINVAL, "export '" + slot->config.spec.name + "' does DMA: attach with a DMA window");
    if (req.window_size > (slot->config.dma == DmaMode::mirror ? kMirrorMax : kWindowMax))
      return fail(EINVAL, "DMA window of " + std::to_string(req.window_size) + " bytes is too large");
    auto first = claim(*slot, client);
    if (!first) return tl::unexpected(first.error());
    const std::uint64_t id = next_attachment.fetch_add(1);
    const bool pushed = (req.flags & proto::kAttachWindowPush) != 0;
    auto a = std::make_unique<ServedAttachment>(*slot, id, req.window_size, pushed);
    std::string holder;  // the reply's entry points into it
    proto::AttachReply reply;
    {
      std::lock_guard g(lock);
      holder = holders_text(slot->holders);
      reply.info = entry_make(*slot, holder);
    }
    reply.lease_ms = static_cast<std::uint32_t>(config.lease.count());
    reply.attachment_id = id;
    auto sent = sock.message_send(reply, rid, Deadline::after(kHandshakeTimeout));
    SessionOptions so;
    so.provider = config.provider;
    // An idle attachment sleeps on the CQ wait fd; a busy one spins (Channel). Without the
    // fd an idle attachment would wake a thousand times a second: the provider's signal fd
    // costs less (two system calls per message, within the noise of the device bench),
    // and an exporter serves many attachments (docs/performance.md, "idle CPU").
    so.cq_wait_fd = true;
    so.source_check = true;
    auto up = sent ? a->setup(std::move(sock), so, *first, Deadline::after(kHandshakeTimeout)) : sent;
    // The client waits for this verdict after the hello exchange: a failure after hello_ack
    // (its window too small, the device refusing to attach) reaches it as an error now
    // rather than as a dead attachment later.
    if (a->has_session()) {
      proto::Message verdict = up ? proto::Message(proto::WriteAck{0})
                                  : proto::Message(proto::ErrorMsg{up.error().to_errno(), up.error().message});
      auto v = a->bootstrap().message_send(verdict, rid, Deadline::after(kHandshakeTimeout));
      if (up && !v) up = v;
    }
    if (!up) {
      a->teardown(release(*slot, client));
      RPCIE_LOG_WARN("exportd", "attach of {} by {} failed: {}", slot->config.spec.name, client, up.error().describe());
      return {};  // the connection is gone with the socket
    }
    RPCIE_LOG_INFO("exportd", "attachment {}: {} attached {} (window {} bytes, dma {})", id, client,
                   slot->config.spec.name, req.window_size,
                   slot->config.dma == DmaMode::on_demand ? "on-demand"
                   : pushed                               ? "mirror, client pushes"
                                                          : "mirror");
    const auto goodbye = attachment_serve(*a, *slot, client);
    const bool last = release(*slot, client);
    // The reply to goodbye goes out once the device is reset and the keys are closed, so
    // that a client that re-attaches right after finds the export free.
    Socket keep = std::move(a->bootstrap());
    a->teardown(last);
    if (goodbye) (void)keep.message_send(proto::Goodbye{}, *goodbye, Deadline::after(1s));
    return {};
  }

  void connection_serve(Socket sock) {
    const std::string peer = sock.peer_address();
    auto client = authenticate(sock);
    if (!client) {
      RPCIE_LOG_WARN("exportd", "{}: {}", peer, client.error().describe());
      return;
    }
    RPCIE_LOG_DEBUG("exportd", "{}: authenticated as {}", peer, *client);
    auto last_heard = Deadline::Clock::now();
    while (!stopping() && sock.valid()) {
      if (Deadline::Clock::now() - last_heard > config.lease) return;  // idle unattached connection
      if (!readable_wait(sock.fd(), 200ms)) continue;
      auto m = sock.message_recv(Deadline::after(kHandshakeTimeout));
      if (!m) return;
      last_heard = Deadline::Clock::now();
      const auto rid = m->decoded.header.request_id;
      const auto deadline = Deadline::after(kHandshakeTimeout);
      if (std::holds_alternative<proto::ListRequest>(m->decoded.message)) {
        std::vector<std::string> storage;
        (void)sock.message_send(list_make(storage), rid, deadline);
      } else if (auto* req = std::get_if<proto::AttachRequest>(&m->decoded.message)) {
        auto r = attach(sock, *req, rid, *client);
        if (!r) {
          RPCIE_LOG_INFO("exportd", "{} ({}): attach refused: {}", *client, peer, r.error().message);
          (void)sock.message_send(proto::ErrorMsg{r.error().to_errno(), r.error().message}, rid, deadline);
        } else {
          return;  // the attachment took the connection and has ended
        }
      } else if (auto* hb = std::get_if<proto::Heartbeat>(&m->decoded.message)) {
        (void)sock.message_send(proto::Heartbeat{hb->sequence}, rid, deadline);
      } else if (std::holds_alternative<proto::Goodbye>(m->decoded.message)) {
        return;
      } else {
        (void)sock.message_send(
            proto::ErrorMsg{EPROTO, std::string("unexpected ") + proto::msg_type_name(m->decoded.header.type)}, rid,
            deadline);
        return;
      }
    }
  }

  void connections_reap(bool all) {
    for (auto it = connections.begin(); it != connections.end();) {
      if (all || it->done->load()) {
        it->thread.join();
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
  }
};

Exporter::Exporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Exporter::~Exporter() = default;

std::uint16_t Exporter::port() const noexcept { return impl_->listener->port(); }

Result<std::unique_ptr<Exporter>> Exporter::create(const ExporterConfig& config) {
  auto check = config_check(config);
  if (!check) return tl::unexpected(check.error());
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (!config.psk_file.empty()) {
    auto k = auth::key_load(config.psk_file);
    if (!k) return tl::unexpected(k.error());
    impl->shared_key = std::make_shared<const auth::Key>(std::move(*k));
  }
  for (const auto& c : config.clients) {
    auto k = auth::key_load(c.psk_file);
    if (!k) return fail(k.error().code, "client '" + c.name + "': " + k.error().message);
    impl->client_keys[c.name] = std::make_shared<const auth::Key>(std::move(*k));
  }
  for (const auto& e : config.exports) {
    auto b = backend_create(e.spec);
    if (!b) return tl::unexpected(b.error());
    if (e.shared && (*b)->uses_dma())
      return fail(EINVAL, "export '" + e.spec.name + "': a device that does DMA cannot be shared");
    auto slot = std::make_unique<ExportSlot>();
    slot->config = e;
    slot->backend = std::move(*b);
    impl->exports.push_back(std::move(slot));
  }
  auto l = Listener::open(config.listen_host == "0.0.0.0" ? "" : config.listen_host, config.port);
  if (!l) return tl::unexpected(l.error());
  impl->listener.emplace(std::move(*l));
  return std::unique_ptr<Exporter>(new Exporter(std::move(impl)));
}

void Exporter::run(const std::atomic<bool>& stop) {
  Impl& im = *impl_;
  im.stop = &stop;
  RPCIE_LOG_INFO("exportd", "serving {} export(s) on {}:{}", im.exports.size(), im.config.listen_host, port());
  while (!stop.load()) {
    im.connections_reap(false);
    auto s = im.listener->accept(Deadline::after(200ms));
    if (!s) {
      if (s.error().code != ETIMEDOUT) {
        // Out of descriptors and the like: the pending connection stays readable, so back
        // off instead of spinning on it (and say so once).
        RPCIE_LOG_ONCE(LogLevel::warn, "exportd", "accept failed: {} (retrying)", s.error().describe());
        std::this_thread::sleep_for(100ms);
      }
      continue;
    }
    if (im.connections.size() >= kMaxConnections) {
      (void)s->message_send(proto::ErrorMsg{EBUSY, "too many connections"}, 0, Deadline::after(100ms));
      continue;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    im.connections.push_back({std::thread([&im, done, sock = std::move(*s)]() mutable {
                                im.connection_serve(std::move(sock));
                                done->store(true);
                              }),
                              done});
  }
  im.connections_reap(true);
  RPCIE_LOG_INFO("exportd", "stopped");
}

}  // namespace rpcie::dev
