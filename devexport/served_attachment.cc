// One attachment's data path. See served_attachment.hpp for the contract and ARCHITECTURE.md
// section 1 for the ordering rules (numbered below) this file enforces.
#include "served_attachment.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <utility>

#include "rpcie/log.hpp"
#include "rpcie/thread_sched.hpp"

namespace rpcie::dev {

namespace {

using namespace std::chrono_literals;

// Region ids (docs/protocol.md 8.6): BAR n that is plain memory has id n; the ids the client
// looks up (bounce buffer, mirror, its window) are in protocol.hpp.
constexpr std::uint32_t kStagingRegion = 17;  // on-demand DMA staging (local only)
constexpr std::size_t kBounceSize = 1u << 20;
constexpr std::size_t kStagingSize = 1u << 20;
constexpr auto kDeviceTimeout = 2s;         // a DMA or interrupt that cannot reach the client in this long fails
constexpr auto kDataIdleSlice = 1s;         // an idle data thread's sleep: one wake-up a second
constexpr std::size_t kWarmupBytes = 1024;  // over rxm's inject size (not shm's 4 KiB, which has no pools to set up)
// A teardown step slower than this is logged, with what it waits for (each of its waits has
// its own deadline; the report is for the one that would not).
constexpr auto kTeardownReport = 10s;

// Runs `step` and logs it when it took over a second: the steps of a teardown.
template <class Step>
void teardown_step_timed(std::uint64_t id, const char* what, Step&& step) {
  const auto t0 = Deadline::Clock::now();
  step();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::Clock::now() - t0);
  if (took > 1s) RPCIE_LOG_WARN("exportd", "attachment {}: teardown: {} took {} ms", id, what, took.count());
}

}  // namespace

ServedAttachment::ServedAttachment(ExportSlot& slot, std::uint64_t id, std::uint64_t window_size, bool pushed,
                                   AccessLog* access_log, std::optional<int> data_nice)
    : slot_(slot),
      id_(id),
      window_size_(window_size),
      mirror_(slot.config.dma == DmaMode::mirror && window_size > 0),
      pushed_(mirror_ && pushed),
      requests_(slot, *this, access_log),
      irq_counts_(slot.backend->vector_count(), 0),
      data_nice_(data_nice) {}

ServedAttachment::~ServedAttachment() { teardown(false); }

Result<void> ServedAttachment::setup(Socket socket, const SessionOptions& options, bool first, Deadline deadline) {
  for (const auto& r : slot_.backend->regions()) {
    if (!bar_direct(*slot_.backend, r)) continue;
    auto mem = slot_.backend->bar_memory(r.bar);
    regions_.push_back({r.bar, mem.data(), mem.size(), FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE});
  }
  RPCIE_TRY_ASSIGN(auto bounce, HostBuffer::create(kBounceSize));
  bounce_.emplace(std::move(bounce));
  requests_.bounce_set({bounce_->data(), bounce_->size()});
  regions_.push_back(
      {proto::kRegionBounce, bounce_->data(), bounce_->size(), FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE});
  if (window_size_ > 0) {
    RPCIE_TRY_ASSIGN(auto local, HostBuffer::create(mirror_ ? window_size_ : kStagingSize));
    local_.emplace(std::move(local));
    // A client that pushes writes into the mirror itself (one-sided, Attachment::window_push).
    regions_.push_back({mirror_ ? proto::kRegionMirror : kStagingRegion, local_->data(), local_->size(),
                        FI_READ | FI_WRITE | (pushed_ ? FI_REMOTE_WRITE : 0)});
  }
  RPCIE_TRY_ASSIGN(session_, session_open(std::move(socket), options, deadline, window_));
  if (window_size_ > 0) local_mr_ = &session_->region(regions_.size() - 1);
  // No initial pull of the mirror: the device reads host memory only after a doorbell, and
  // every doorbell pulls the window first, or the client pushed what it will read.
  {
    // Device work that is due at once runs on this attachment's thread, after the request
    // that started it (data_run), instead of behind a hand-off to a backend thread.
    std::lock_guard g(slot_.calls);
    slot_.backend->work_inline_enable();
  }
  if (first) {
    // A shared export's device outlives any one attachment, so it gets no ports (shared
    // exports cannot do DMA; Exporter::create refuses that) and its interrupts go nowhere.
    std::lock_guard g(slot_.calls);
    const bool own = !slot_.config.shared;
    const bool dma = own && slot_.backend->uses_dma() && window_size_ > 0;
    RPCIE_TRY(slot_.backend->attach(dma ? this : nullptr, own ? this : nullptr));
    slot_.device_attached = true;
  }
  data_start();
  return {};
}

Result<std::unique_ptr<Session>> ServedAttachment::session_open(Socket socket, const SessionOptions& options,
                                                                Deadline deadline, RemoteRegion& window) {
  RPCIE_TRY_ASSIGN(auto session, Session::accept(std::move(socket), options, regions_, deadline));
  // Warms the fabric up now rather than on the first device access (the client answers
  // this ping with a pong): rxm connects on first use, and its first sends larger than
  // the inject size allocate its buffer pools (measured: 10-20 ms each on tcp).
  std::vector<std::uint8_t> warm(kWarmupBytes, 0);
  RPCIE_TRY(session->channel().message_send(proto::Ping{warm}, 0, deadline));
  if (window_size_ > 0) {
    auto w = session->peer_region(proto::kRegionWindow);
    if (!w) return fail(EPROTO, "the client offered no DMA window");
    if (w->length < window_size_) return fail(EPROTO, "the client's window is smaller than announced");
    window = *w;
  }
  return session;
}

void ServedAttachment::data_start() {
  stop_.store(false);
  failed_.store(false);
  data_done_ = false;
  data_doing_.store("not started", std::memory_order_relaxed);
  data_thread_ = std::thread([this] { data_run(); });
}

void ServedAttachment::link_abort() {
  // A wait, reply or DMA under way on the dead link ends now, not at its deadline. (Only the
  // control side's thread replaces session_: read here without the lock.)
  if (session_) {
    session_->channel().abort();
    session_->channel().wake();
  }
}

void ServedAttachment::park() {
  stop_.store(true);
  {
    std::lock_guard p(park_lock_);
    parked_ = true;
  }
  park_changed_.notify_all();
  link_abort();
  // The data thread's request and device work, and port calls holding the link, finish
  // first (each fails at once on the aborted channel).
  std::unique_lock link(link_lock_);
  local_mr_ = nullptr;
  session_.reset();
}

Result<void> ServedAttachment::resume(Socket socket, const proto::ResumeRequest& request, std::uint64_t rid,
                                      const SessionOptions& options, Deadline deadline) {
  auto answers = performed_.answers_after(request.answered);
  if (!answers) {
    (void)socket.message_send(proto::ErrorMsg{ENOENT, "an answer the client has not seen is no longer kept"}, rid,
                              deadline);
    return fail(ENOENT, "resume: an answer the client has not seen is no longer kept");
  }
  RPCIE_TRY(socket.message_send(proto::ResumeReply{performed_.performed()}, rid, deadline));
  RemoteRegion window{};
  RPCIE_TRY_ASSIGN(auto session, session_open(std::move(socket), options, deadline, window));
  RPCIE_TRY(session->bootstrap().message_send(proto::WriteAck{0}, rid, deadline));
  {
    std::unique_lock link(link_lock_);
    session_ = std::move(session);
    window_ = window;
    if (window_size_ > 0) local_mr_ = &session_->region(regions_.size() - 1);
    std::lock_guard p(park_lock_);
    parked_ = false;
  }
  park_changed_.notify_all();  // device work waiting for the link goes on over the new one
  {
    std::shared_lock link(link_lock_);
    // Rule 4 for the answers sent again: what the device wrote before them goes first. Then
    // the answers the client has not seen, in id order, as the lost link would have
    // delivered them; then every interrupt count so far (one sent just before the loss may
    // have gone with the link; a count the client has seen changes nothing).
    RPCIE_TRY(mirror_push(deadline));
    for (const auto& a : *answers) RPCIE_TRY(session_->channel().bytes_send(a.bytes, deadline));
    std::lock_guard g(irq_lock_);
    for (std::uint16_t v = 0; v < irq_counts_.size(); ++v)
      if (irq_counts_[v] != 0) RPCIE_TRY(irq_send_locked(v, deadline));
  }
  // The data thread of the lost link ends once its device work is done (over this link).
  data_thread_end();
  data_start();
  return {};
}

void ServedAttachment::teardown(bool last) {
  {
    std::lock_guard p(park_lock_);
    ending_.store(true);
  }
  park_changed_.notify_all();
  stop_.store(true);
  data_thread_end();
  if (last) {
    // detach() returns the device to its power-on state where the backend can (the
    // contract's reset-on-detach): the next client finds it fresh.
    teardown_step_timed(id_, "the device's detach", [this] {
      std::lock_guard g(slot_.calls);
      if (std::exchange(slot_.device_attached, false)) slot_.backend->detach();
    });
  }
  // Closes the memory regions: the client's keys to them are dead.
  teardown_step_timed(id_, "closing the session", [this] { session_.reset(); });
}

void ServedAttachment::data_thread_end() {
  if (!data_thread_.joinable()) return;
  if (session_) session_->channel().wake();
  const auto t0 = Deadline::Clock::now();
  std::unique_lock g(data_end_lock_);
  while (!data_ended_.wait_for(g, kTeardownReport, [this] { return data_done_; }))
    RPCIE_LOG_ERROR("exportd", "attachment {}: teardown: the data thread is still {} after {} s; waiting for it", id_,
                    data_doing_.load(),
                    std::chrono::duration_cast<std::chrono::seconds>(Deadline::Clock::now() - t0).count());
  g.unlock();
  data_thread_.join();
}

// --- DmaPort and IrqSink ----------------------------------------------------------------

void ServedAttachment::latency_record(ExportCounters::Latency op,
                                      std::chrono::steady_clock::time_point since) noexcept {
  const auto took = std::chrono::steady_clock::now() - since;
  slot_.counters.latency_record(op, took);
  activity_.latency_record(op, took);
}

void ServedAttachment::dma_bytes_add(bool written, std::uint64_t bytes) noexcept {
  slot_.counters.dma_bytes_add(written, bytes);
  activity_.dma_bytes_add(written, bytes);
}

Result<void> ServedAttachment::dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline deadline) {
  // From the device's request: waiting behind another transfer for the DMA lock is part of it.
  const auto t0 = std::chrono::steady_clock::now();
  if (!window_contains(iova, into.size())) return fail(EFAULT, "DMA read outside the window");
  if (ending_.load()) return fail(ENOTCONN, "DMA read: the attachment is ending");
  if (mirror_) {
    std::lock_guard g(dma_lock_);
    std::memcpy(into.data(), local_->data() + iova, into.size());
    dma_bytes_add(false, into.size());
    latency_record(ExportCounters::Latency::dma_read, t0);
    return {};
  }
  auto link = link_share();
  if (!session_) return fail(EAGAIN, "DMA read: the link to the client is lost; the attachment is resuming");
  std::lock_guard g(dma_lock_);
  auto& ch = session_->channel();
  for (std::size_t done = 0; done < into.size();) {
    const std::size_t n = std::min(into.size() - done, kStagingSize);
    auto r = ch.rma_read(*local_mr_, 0, window_, iova + done, n, deadline);
    if (r) r = ch.rma_flush(deadline);
    if (!r) return dma_failed("DMA read from the client's window failed: ", r.error());
    std::memcpy(into.data() + done, local_->data(), n);
    done += n;
  }
  dma_bytes_add(false, into.size());
  latency_record(ExportCounters::Latency::dma_read, t0);
  return {};
}

Result<void> ServedAttachment::dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline deadline) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!window_contains(iova, from.size())) return fail(EFAULT, "DMA write outside the window");
  if (ending_.load()) return fail(ENOTCONN, "DMA write: the attachment is ending");
  if (mirror_) {
    // The mirror is local: written while parked too, pushed with the next interrupt or reply.
    std::lock_guard g(dma_lock_);
    std::memcpy(local_->data() + iova, from.data(), from.size());
    dirty_.add(iova, from.size());
    dma_bytes_add(true, from.size());
    latency_record(ExportCounters::Latency::dma_write, t0);
    return {};
  }
  auto link = link_share();
  if (!session_) return fail(EAGAIN, "DMA write: the link to the client is lost; the attachment is resuming");
  std::lock_guard g(dma_lock_);
  // The transfer is done only once its bytes are proven in the client's window (window_
  // writes_prove). A write that completed locally can still die with the link, and a resume
  // sends the interrupt that follows this transfer again, but not the bytes (this side keeps
  // no copy): the client would see the interrupt over stale memory. A failed proof fails the
  // transfer, which the device performs again after the resume.
  auto& ch = session_->channel();
  for (std::size_t done = 0; done < from.size();) {
    const std::size_t n = std::min(from.size() - done, kStagingSize);
    std::memcpy(local_->data(), from.data() + done, n);
    auto w = ch.rma_write(*local_mr_, 0, window_, iova + done, n, deadline, window_write_completion());
    if (w)
      w = done + n < from.size() ? ch.rma_flush(deadline) : window_writes_prove(n - 1, iova + done + n - 1, deadline);
    if (!w) return dma_failed("DMA write to the client's window failed: ", w.error());
    done += n;
  }
  dma_bytes_add(true, from.size());
  latency_record(ExportCounters::Latency::dma_write, t0);
  return {};
}

void ServedAttachment::irq_raise(std::uint16_t vector) {
  // From the device's raise: waiting behind an earlier interrupt's send is part of it.
  const auto t0 = std::chrono::steady_clock::now();
  if (vector >= irq_counts_.size() || ending_.load()) return;
  auto link = link_share();
  std::lock_guard g(irq_lock_);  // interrupts leave in the order they were raised
  ++irq_counts_[vector];
  slot_.counters.interrupts.fetch_add(1, std::memory_order_relaxed);
  if (!session_) return;  // parked: resume() sends the count
  auto sent = irq_send_locked(vector, Deadline::after(kDeviceTimeout));
  if (!sent) {
    RPCIE_LOG_WARN("exportd", "attachment {}: interrupt {} not delivered: {}", id_, vector, sent.error().describe());
    failure_mark();
    return;
  }
  latency_record(ExportCounters::Latency::interrupt, t0);
}

Result<void> ServedAttachment::irq_send_locked(std::uint16_t vector, Deadline deadline) {
  // Rule 4: what the device wrote before the interrupt reaches the window first.
  RPCIE_TRY(mirror_push(deadline));
  const std::uint64_t count = irq_counts_[vector];
  return session_->channel().message_send_after_writes(proto::Interrupt{vector, count}, 0, deadline);
}

Result<void> ServedAttachment::dma_failed(const char* what, const Error& e) {
  if (!session_->channel().failure()) return fail(EIO, what + e.describe());
  // The link went down under the transfer: the device tries again once it is resumed (a
  // transfer between the window and the device is idempotent). The control side is told now,
  // in case it has not seen the loss yet.
  failure_mark();
  return fail(EAGAIN, what + e.describe() + " (the link is lost; the attachment is resuming)");
}

namespace {
// The attachment whose data thread this is, while that thread holds the link lock (shared):
// port calls it makes (device work it runs) must not take the lock again.
thread_local const ServedAttachment* t_link_holder = nullptr;
}  // namespace

std::shared_lock<std::shared_mutex> ServedAttachment::link_share() {
  if (t_link_holder == this) return {};
  return std::shared_lock(link_lock_);
}

bool ServedAttachment::window_contains(std::uint64_t iova, std::size_t length) const {
  return window_size_ > 0 && iova <= window_size_ && length <= window_size_ - iova;
}

// --- The mirror -------------------------------------------------------------------------

// Writes what the device changed in the mirror into the client's window and waits until it
// is proven there (window_writes_prove): a range leaves the dirty set only then. A write that
// completed locally could die with the link, and the resume's push would leave its range
// out, while the interrupt or answer that followed it is sent again: the client would act on
// stale memory. On failure the ranges stay dirty and the resume pushes them again.
Result<void> ServedAttachment::mirror_push(Deadline deadline) {
  if (!mirror_) return {};
  std::lock_guard g(dma_lock_);
  return mirror_push_locked(deadline);
}

Result<void> ServedAttachment::mirror_push_locked(Deadline deadline) {
  if (dirty_.empty()) return {};
  auto& ch = session_->channel();
  for (const auto& r : dirty_)
    RPCIE_TRY(
        ch.rma_write(*local_mr_, r.begin, window_, r.begin, r.end - r.begin, deadline, window_write_completion()));
  // Read back into the mirror: the byte read is the one just written there.
  const std::uint64_t last = (dirty_.end() - 1)->end - 1;
  RPCIE_TRY(window_writes_prove(last, last, deadline));
  dirty_.clear();
  return {};
}

// How writes into the client's window are proven there. Delivery-complete where it cannot
// be read back: the sealed data path (an acknowledged put, a sealed message), a provider
// without FI_ORDER_RAW (EFA). Where it can (tcp, verbs), posted, and a one-byte read of the
// last byte written proves them all: FI_DELIVERY_COMPLETE's acknowledgement is the provider's
// own and unauthenticated, and libfabric 1.17's tcp provider crashes on one it did not expect
// (a replayed write makes the target acknowledge it again: docs/security.md 5.3).
WriteCompletion ServedAttachment::window_write_completion() const {
  const auto& ch = session_->channel();
  return ch.rma_sealed() || !ch.order_raw() ? WriteCompletion::delivered : WriteCompletion::posted;
}

// Waits for the writes into the window posted so far and proves them there: with posted
// writes (window_write_completion), reads [iova, +1) — a byte the last write wrote — back
// into the local region at `local_at`, where that byte came from.
Result<void> ServedAttachment::window_writes_prove(std::size_t local_at, std::uint64_t iova, Deadline deadline) {
  auto& ch = session_->channel();
  RPCIE_TRY(ch.rma_flush(deadline));
  if (window_write_completion() == WriteCompletion::delivered || ch.delivery_complete()) return {};
  RPCIE_TRY(ch.rma_read(*local_mr_, local_at, window_, iova, 1, deadline));
  return ch.rma_flush(deadline);
}

// Rule 3: the whole window from the client before a doorbell (nothing finer is known about
// what the driver wrote), unless the client pushes (then its pushes are ordered before the
// doorbell on the channel, and they are all the device may read). Device writes not yet
// pushed go out first, so the pull cannot overwrite them with older bytes.
Result<void> ServedAttachment::window_pull_locked() {
  auto deadline = Deadline::after(kDeviceTimeout);
  auto& ch = session_->channel();
  RPCIE_TRY(mirror_push_locked(deadline));
  RPCIE_TRY(ch.rma_read(*local_mr_, 0, window_, 0, window_size_, deadline));
  return ch.rma_flush(deadline);
}

// Streaming DMA: bytes the client pushed (window_push) for what the device reads next.
// They replace what the device wrote there and had not yet pushed back: the client's
// window holds the pushed bytes already.
Result<void> ServedAttachment::window_fill(std::uint64_t iova, std::span<const std::uint8_t> bytes) {
  if (!pushed_)
    return fail(EINVAL, "window push: this attachment did not attach to push (no mirror, or no kAttachWindowPush)");
  if (!window_contains(iova, bytes.size())) return fail(EINVAL, "window push outside the window");
  std::lock_guard g(dma_lock_);
  std::memcpy(local_->data() + iova, bytes.data(), bytes.size());
  dirty_.remove(iova, bytes.size());
  return {};
}

// --- Requests ---------------------------------------------------------------------------

Result<void> ServedAttachment::reply_send(const proto::Message& m, std::uint64_t rid) {
  answer_keep(m, rid);
  auto deadline = Deadline::after(kDeviceTimeout);
  RPCIE_TRY(mirror_push(deadline));  // rule 4 for read completions
  return session_->channel().message_send_after_writes(m, rid, deadline);
}

Result<void> ServedAttachment::error_send(int code, const std::string& text, std::uint64_t rid) {
  const proto::Message m = proto::ErrorMsg{code, std::string_view(text).substr(0, proto::kMaxErrorText)};
  answer_keep(m, rid);
  return session_->channel().message_send(m, rid, Deadline::after(kDeviceTimeout));
}

void ServedAttachment::answer_keep(const proto::Message& m, std::uint64_t rid) {
  // Kept before it is sent: if the link fails under the send, the request was performed all
  // the same, and a resume delivers this answer.
  answer_.resize(proto::message_encoded_size(m));
  auto n = proto::message_encode(m, rid, answer_);
  answer_.resize(n ? *n : 0);
}

namespace {

void request_count(ExportCounters& c, const proto::Message& m) {
  using R = ExportCounters::Request;
  if (std::holds_alternative<proto::MmioRead>(m))
    c.request_add(R::mmio_read);
  else if (std::holds_alternative<proto::MmioWrite>(m))
    c.request_add(R::mmio_write);
  else if (auto* b = std::get_if<proto::MmioWriteBatch>(&m))
    c.request_add(R::mmio_write, b->writes.size());
  else if (auto* p = std::get_if<proto::WindowPush>(&m))
    c.request_add(R::mmio_write, p->writes.size());
  else if (std::holds_alternative<proto::ConfigRead>(m))
    c.request_add(R::config_read);
  else if (std::holds_alternative<proto::ConfigWrite>(m))
    c.request_add(R::config_write);
  else if (std::holds_alternative<proto::BarFetch>(m) || std::holds_alternative<proto::BarCommit>(m))
    c.request_add(R::bar);
  else
    c.request_add(R::other);
}

}  // namespace

void ServedAttachment::request_handle(const proto::Decoded& d) {
  // A doorbell's window pull (rule 3) is the one step of a request that needs the link
  // before the device is touched: done first, so that a link lost under it leaves the whole
  // message unperformed (not recorded: a resume sends it again) instead of half performed.
  if (mirror_ && !pushed_ && requests_.rings_doorbell(d.message)) {
    auto pulled = doorbell_prepare();
    if (!pulled && session_->channel().failure()) {
      RPCIE_LOG_INFO("exportd", "attachment {}: link lost before a doorbell's window pull; left for the resume", id_);
      failure_mark();
      return;
    }
    pulled_ = pulled.has_value();
  }
  request_count(slot_.counters, d.message);
  answer_.clear();
  auto sent = requests_.handle(d);
  pulled_ = false;
  // Ids are performed in arrival order; a message that is no request (id 0) is not recorded.
  (void)performed_.record(d.header.request_id, answer_);
  if (!sent) {
    RPCIE_LOG_WARN("exportd", "attachment {}: reply failed: {}", id_, sent.error().describe());
    failure_mark();
  }
}

Result<void> ServedAttachment::doorbell_prepare() {
  if (!mirror_ || pushed_) return {};
  if (std::exchange(pulled_, false)) return {};  // pulled for this message's first doorbell
  const auto t0 = std::chrono::steady_clock::now();
  std::lock_guard g(dma_lock_);  // rule 3: the driver's memory before the doorbell
  auto pulled = window_pull_locked();
  if (!pulled) return fail(EIO, "window pull before a doorbell failed: " + pulled.error().describe());
  latency_record(ExportCounters::Latency::window_pull, t0);
  return {};
}

void ServedAttachment::data_run() {
  thread_name("rpcie-data");
  if (data_nice_) {
    // Once per daemon: every attachment would say the same.
    static std::atomic<bool> said{false};
    if (auto r = thread_responsive(*data_nice_); !r && !said.exchange(true))
      RPCIE_LOG_WARN("exportd",
                     "data threads keep the daemon's nice value: {} (allow it with CAP_SYS_NICE or systemd's "
                     "LimitNICE=, or set data-nice = 0)",
                     r.error().describe());
  }
  data_loop();
  std::lock_guard g(data_end_lock_);
  data_done_ = true;
  data_ended_.notify_all();
}

void ServedAttachment::data_loop() {
  // A failed attachment serves nothing more: the control side parks or ends it, and each
  // request would only wait out its deadline on a dead link.
  bool work_due = true;  // after a resume: device work that waited for the link
  while (!stop_.load() && !failed_.load()) {
    // The Session is used under the link lock (shared): park() takes it away exclusively.
    std::shared_lock link(link_lock_);
    if (!session_) return;
    t_link_holder = this;
    struct Unmark {
      ~Unmark() { t_link_holder = nullptr; }
    } unmark;
    if (std::exchange(work_due, false)) {
      std::lock_guard g(slot_.calls);
      slot_.backend->work_run();
    }
    {
      auto& ch = session_->channel();
      data_doing_.store("waiting for a request", std::memory_order_relaxed);
      // park() and teardown() set stop_ before they wake the channel (Channel::wake()).
      auto ready = ch.message_wait(Deadline::after(kDataIdleSlice), [this] { return stop_.load(); });
      if (!ready) {
        RPCIE_LOG_WARN("exportd", "attachment {}: fabric failed: {}", id_, ready.error().describe());
        failure_mark();
        return;
      }
      if (!*ready) continue;
      auto m = ch.message_recv(Deadline::after(10ms));
      if (!m) {
        if (m.error().code == EPROTO) continue;  // malformed: dropped and counted by the channel
        if (m.error().code == ETIMEDOUT) continue;
        failure_mark();
        return;
      }
      data_doing_.store("performing a request", std::memory_order_relaxed);
      request_handle(**m);
    }
    // The request has been performed (a posted write that started device work included):
    // now the work that is due, here, with no thread hand-off (Backend::work_run). Its DMA
    // fails with EAGAIN on a lost link, and the device keeps it for after the resume.
    data_doing_.store("running device work", std::memory_order_relaxed);
    std::lock_guard g(slot_.calls);
    slot_.backend->work_run();
  }
}

}  // namespace rpcie::dev
