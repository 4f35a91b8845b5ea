// Attachment: life cycle (open, detach), register and config access, interrupts. Contract in
// client.hpp; the parts in attachment_state.hpp.
#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "attachment_state.hpp"
#include "exporter_reply.hpp"
#include "rpcie/client_protocol.hpp"
#include "rpcie/latency_wire.hpp"
#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"

namespace rpcie::client {

namespace {

// The dispatcher's own sends (due batches). Short: it holds the send lock meanwhile, and on
// a dead link a send only ever finds the queue full.
constexpr auto kSendTimeout = std::chrono::milliseconds(500);

Result<void> mmio_check(const ExportDesc& d, std::uint8_t bar, std::uint64_t offset, unsigned width) {
  const BarDesc* b = d.bar_find(bar);
  if (!b) return fail(EINVAL, "BAR " + std::to_string(bar) + " does not exist");
  if (b->kind == pci::BarKind::io) return fail(EINVAL, "BAR " + std::to_string(bar) + " is an I/O BAR");
  if (!pci::access_valid(offset, width, b->size))
    return fail(EINVAL, "MMIO access of width " + std::to_string(width) + " at " + std::to_string(offset) +
                            " is not a naturally aligned 1/2/4/8-byte access inside BAR " + std::to_string(bar));
  return {};
}

}  // namespace

Result<void> status_check(std::int32_t status, const std::string& text, const char* what) {
  if (status == 0) return {};
  return fail(status, std::string(what) + (text.empty() ? std::string(" failed at the device") : ": " + text));
}

// --- State: the glue between the parts ---------------------------------------------------

void Attachment::State::link_fail(const Error& e) {
  router->link_lost(Error{ErrorDomain::posix, EIO, "link to the exporter lost: " + e.describe()});
}

Result<void> Attachment::State::send_kept(const proto::Message& m, std::uint64_t rid, Deadline deadline) {
  // Encoded once, on the stack for the usual small message: the queue keeps its own copy.
  std::uint8_t small[512];
  std::vector<std::uint8_t> large;
  std::span<const std::uint8_t> bytes;
  if (proto::message_encoded_size(m) <= sizeof small) {
    RPCIE_TRY_ASSIGN(const std::size_t n, proto::message_encode(m, rid, small));
    bytes = std::span<const std::uint8_t>(small, n);
  } else {
    RPCIE_TRY_ASSIGN(large, proto::message_encode(m, rid));
    bytes = large;
  }
  // What an answer proved performed goes first: the queue holds only what may need resending.
  resend.performed_through(router->answered());
  if (!resend.keep(rid, bytes)) return fail(EPROTO, "request ids out of order");
  auto sent = session->channel().bytes_send(bytes, deadline);
  if (!sent) link_fail(sent.error());
  return sent;
}

Result<void> Attachment::State::batch_flush(Deadline deadline, bool only_if_due) {
  // Taken within the caller's deadline: the dispatcher may be stuck sending on a dead link.
  std::unique_lock sl(send_lock, std::defer_lock);
  if (!sl.try_lock_until(deadline.when())) return fail(ETIMEDOUT, "deadline passed waiting to send posted writes");
  return batch_send_locked(deadline, only_if_due);
}

Result<void> Attachment::State::batch_send_locked(Deadline deadline, bool only_if_due) {
  auto taken = batch->take(Deadline::Clock::now(), only_if_due);
  if (!taken) return {};
  // Each message is kept before it is sent: a link that is being resumed sends it again.
  const auto posted_send = [&](const proto::Message& m) -> Result<void> {
    auto sent = send_kept(m, router->posted_request_id(), deadline);
    if (!sent && !router->resuming()) return sent;
    posted_unconfirmed.store(true);
    return {};
  };
  if (taken->push.empty())
    return taken->writes.size() == 1 ? posted_send(taken->writes.front())
                                     : posted_send(proto::MmioWriteBatch{std::move(taken->writes)});
  std::span<const std::uint8_t> rest = taken->push;
  std::uint64_t at = taken->push_at;
  for (const std::size_t n :
       PostedBatch::push_pieces_ahead(session->channel().inject_max(), rest.size(), taken->writes.size())) {
    RPCIE_TRY(posted_send(proto::WindowPush{at, rest.first(n), {}}));
    rest = rest.subspan(n);
    at += n;
  }
  return posted_send(proto::WindowPush{at, rest, std::move(taken->writes)});
}

Result<void> Attachment::State::resend_bound(Deadline deadline) {
  if (resend.bytes() <= kResendMax) return {};
  RPCIE_TRY(posted_settle(deadline));
  resend.performed_through(router->answered());
  return {};
}

Result<void> Attachment::State::posted_settle(Deadline deadline) {
  RPCIE_TRY(batch_flush(deadline));
  if (!posted_unconfirmed.load()) return {};
  RPCIE_TRY(request(proto::ConfigRead{0, 2}, deadline));
  return {};
}

Result<const BarDesc*> Attachment::State::bulk_begin(std::uint8_t bar, std::uint64_t offset, std::uint64_t length,
                                                     bool write, Deadline deadline) {
  const BarDesc* b = device.bar_find(bar);
  if (!b) return fail(EINVAL, "BAR " + std::to_string(bar) + " does not exist");
  if (b->kind != pci::BarKind::memory) return fail(EINVAL, "BAR " + std::to_string(bar) + " is not a memory BAR");
  if (offset > b->size || length > b->size - offset) return fail(EINVAL, "range outside BAR " + std::to_string(bar));
  if (write && b->readonly) return fail(EPERM, "BAR " + std::to_string(bar) + " is read-only");
  if (b->direct) RPCIE_TRY(posted_settle(deadline));
  if (auto e = router->error_pending()) return tl::unexpected(*e);
  return b;
}

Result<ReplyRouter::Reply> Attachment::State::request(const proto::Message& m, Deadline deadline, bool across_resume,
                                                      RequestKind kind) {
  const bool observing = kind == RequestKind::observation;
  std::uint64_t rid = 0;
  {
    // The request's id is taken under the send lock, as a batch's is: ids then leave in
    // the order they were given, and as the exporter performs in arrival order, the
    // highest id it performed says which requests it performed (what a client resuming
    // after a lost link needs), and an error for a posted write arrives before the reply
    // of every request with a higher id.
    std::unique_lock sl(send_lock, std::defer_lock);
    if (!sl.try_lock_until(deadline.when())) return fail(ETIMEDOUT, "deadline passed waiting to send a request");
    RPCIE_TRY(batch_send_locked(deadline));
    if (auto e = observing ? router->failure() : router->error_pending()) return tl::unexpected(*e);
    rid = router->request_id();
    auto sent = send_kept(m, rid, deadline);
    // Kept: a link that is being resumed sends it again, and its answer comes then.
    if (!sent && (!across_resume || !router->resuming())) {
      router->request_forget(rid);
      return tl::unexpected(sent.error());
    }
  }
  auto awaited =
      dispatcher->await([&] { return router->reply_arrived(rid) || (!across_resume && router->resuming()); }, deadline);
  if (awaited && !router->reply_arrived(rid)) awaited = fail(ECONNRESET, "link to the exporter lost during a transfer");
  if (!awaited) {
    router->request_forget(rid);
    return tl::unexpected(awaited.error());
  }
  posted_unconfirmed.store(false);
  if (!observing) return router->reply_collect(rid);
  auto reply = router->reply_take(rid);
  if (!reply) return fail(EPROTO, "no reply filed for request " + std::to_string(rid));
  return std::move(*reply);
}

void Attachment::State::threads_stop() {
  resumer.stop();
  if (dispatcher) dispatcher->stop();
  if (lease_keeper) lease_keeper->stop();
}

// --- life cycle -----------------------------------------------------------------------------

Attachment::Attachment(std::unique_ptr<State> state) : s_(std::move(state)) {}

Result<std::unique_ptr<Session>> Attachment::State::session_make(Socket sock, const std::string& what,
                                                                 Deadline deadline) {
  std::vector<LocalRegion> regions;
  if (window.size) regions.push_back({proto::kRegionWindow, window.base, window.size});
  regions.push_back({kStagingRegion, staging->data(), staging->size(), FI_READ | FI_WRITE});
  // The CQ gets a wait fd: the dispatcher thread of an idle attachment then sleeps in
  // poll(2) instead of waking a thousand times a second (which also disturbs whatever else
  // runs on that CPU); callers that wait for a reply spin first. The provider's signalling
  // of the fd costs two system calls per message, about 10 % of an MMIO read round trip on
  // tcp (docs/performance.md).
  SessionOptions so;
  so.provider = options.provider;
  so.cq_wait_fd = true;
  so.channel.yield_when_contended = options.spin_yield;
  so.source_check = true;            // as the exporter: messages from any other address are dropped
  so.data_path = *device.data_path;  // the exporter's decision (attach_reply)
  RPCIE_TRY_ASSIGN(auto made, Session::connect_over(std::move(sock), so, regions, deadline));
  // The exporter's first fabric message (a ping), answered with a pong of the same size,
  // sets up the provider's connection and send buffers on both sides now rather than on
  // the first device accesses (rxm connects on first use and allocates its buffer pools on
  // the first send over the inject size: 10-20 ms each on tcp).
  auto ping = made->channel().message_recv(deadline);
  if (!ping) return fail(ping.error().code, what + ": no fabric traffic from the exporter: " + ping.error().message);
  if (auto* p = std::get_if<proto::Ping>(&(*ping)->message)) {
    std::vector<std::uint8_t> echo(p->data.begin(), p->data.end());
    RPCIE_TRY(made->channel().message_send(proto::Pong{{echo}}, 0, deadline));
  }
  // The exporter's verdict: the device is attached and serving (or why not).
  RPCIE_TRY_ASSIGN(auto verdict, reply_recv(made->bootstrap(), deadline, what + " failed"));
  if (!std::holds_alternative<proto::WriteAck>(verdict.decoded.message))
    return fail(EPROTO, what + ": unexpected " + proto::msg_type_name(verdict.decoded.header.type));
  return made;
}

Result<Attachment::State::SessionParts> Attachment::State::session_parts(Session& made, const std::string& what) {
  SessionParts parts;
  if (window.size) parts.window_mr = &made.region(0);
  if (pushes_to_mirror()) {
    auto offered = made.peer_region(proto::kRegionMirror);
    if (!offered || offered->length < window.size)
      return fail(EPROTO, what + ": the exporter offers no mirror of the DMA window");
    parts.mirror = *offered;
  }
  parts.staging_mr = &made.region(window.size ? 1 : 0);
  return parts;
}

void Attachment::State::session_set(std::unique_ptr<Session> next, const SessionParts& parts) {
  session = std::move(next);
  if (provider.empty()) provider = session->peer().provider;  // read without a lock: set once
  window_mr = parts.window_mr;
  staging_mr = parts.staging_mr;
  mirror = parts.mirror;
}

namespace {

// What this client asks for: the export, its window, and its data path (the mode it wants:
// its choice, else the default of the provider it will use; it insists when it chose).
Result<proto::AttachRequest> attach_request(const std::string& export_name, DmaWindow window,
                                            const ClientOptions& options, const Socket& sock) {
  RPCIE_TRY_ASSIGN(const auto* provider, session_provider_pick(options.provider, sock.peer_address()));
  const DataPath wanted = data_path_wanted(options.data_path, provider->kind(), sock.frame_mac() != nullptr);
  const auto flags =
      static_cast<std::uint8_t>((options.window_push ? proto::kAttachWindowPush : 0) |
                                (options.data_path != DataPathChoice::automatic ? proto::kAttachDataPathInsist : 0));
  return proto::AttachRequest{export_name, window.size, flags, static_cast<std::uint8_t>(wanted)};
}

// The parts that run on their own: the batch, the dispatcher and the lease keeper.
void parts_start(Attachment::State& s, const ClientOptions& options) {
  auto* st = &s;
  s.batch = std::make_unique<PostedBatch>(PostedBatch::writes_max_for(s.session->channel().inject_max()));
  s.inbox = std::make_unique<ChannelInbox>(s.session->channel());
  Dispatcher::Batch batch{[st]() {
                            (void)st->batch_flush(Deadline::after(kSendTimeout), true);
                            return st->batch->due();
                          },
                          [st]() { return st->batch->pending(); }};
  s.dispatcher = std::make_unique<Dispatcher>(*s.inbox, *s.router, std::move(batch), options.receiver_quiet);
  s.lease_keeper = std::make_unique<LeaseKeeper>(s.session->bootstrap(), s.lease, *s.router);
  s.dispatcher->start();
  s.lease_keeper->start();
  s.resumer_start();
}

}  // namespace

Result<std::unique_ptr<Attachment>> Attachment::open(const std::string& host, std::uint16_t port,
                                                     const std::string& export_name, const ClientOptions& options,
                                                     DmaWindow window, Deadline deadline) {
  if ((window.base == nullptr) != (window.size == 0)) return fail(EINVAL, "DMA window: base and size go together");
  RPCIE_TRY_ASSIGN(auto sock, exporter_connect(host, port, options, deadline));
  RPCIE_TRY_ASSIGN(const proto::AttachRequest request, attach_request(export_name, window, options, sock));
  RPCIE_TRY(sock.message_send(request, 1, deadline));
  RPCIE_TRY_ASSIGN(auto m, reply_recv(sock, deadline, "attach " + export_name + " refused"));
  RPCIE_TRY_ASSIGN(auto reply, reply_as<proto::AttachReply>(m, "attach"));
  RPCIE_TRY_ASSIGN(const DataPath mode, data_path_from_wire(reply->data_path));

  auto s = std::make_unique<State>();
  s->host = host;
  s->port = port;
  s->options = options;
  s->window = window;
  s->device = export_desc_from(reply->info);
  s->device.data_path = mode;
  s->id = reply->attachment_id;
  s->lease = std::chrono::milliseconds(std::max<std::uint32_t>(reply->lease_ms, 100));
  s->router = std::make_unique<ReplyRouter>(s->device.vectors, std::to_string(s->id) + " to " + s->device.name,
                                            options.posted_errors == ClientOptions::PostedErrors::counted);
  auto staging = HostBuffer::create(kStagingSize);
  if (!staging) return tl::unexpected(staging.error());
  s->staging.emplace(std::move(*staging));
  const std::string what = "attach " + export_name;
  RPCIE_TRY_ASSIGN(auto session, s->session_make(std::move(sock), what, deadline));
  RPCIE_TRY_ASSIGN(const auto parts, s->session_parts(*session, what));
  s->session_set(std::move(session), parts);
  parts_start(*s, options);
  std::unique_ptr<Attachment> a(new Attachment(std::move(s)));
  RPCIE_LOG_INFO("client", "attached {} on {}:{} (attachment {}, {}, data path {})", export_name, host, port, a->s_->id,
                 a->s_->provider, data_path_name(*a->s_->device.data_path));
  return a;
}

Attachment::~Attachment() {
  if (!s_) return;
  if (s_->detached.load())
    s_->threads_stop();
  else
    (void)detach(Deadline::after(std::chrono::seconds(1)));
}

const ExportDesc& Attachment::device() const noexcept { return s_->device; }
std::uint64_t Attachment::id() const noexcept { return s_->id; }
const std::string& Attachment::provider() const noexcept { return s_->provider; }
DataPath Attachment::data_path() const noexcept { return s_->device.data_path.value_or(DataPath::open); }
std::chrono::milliseconds Attachment::lease() const noexcept { return s_->lease; }

Result<void> Attachment::detach(Deadline deadline) {
  if (s_->detached.exchange(true)) return fail(ENOTCONN, "already detached");
  // Posted writes are performed before the goodbye: it travels on the bootstrap connection,
  // which nothing orders with the fabric.
  (void)s_->posted_settle(deadline);
  s_->threads_stop();
  Result<void> result{};
  {
    std::lock_guard sg(s_->lease_keeper->socket_lock());
    auto& sock = s_->session->bootstrap();
    auto sent = sock.message_send(proto::Goodbye{}, 0, deadline);
    if (!sent) {
      result = tl::unexpected(sent.error());
    } else {
      auto m = sock.message_recv(deadline);
      if (!m)
        result = tl::unexpected(m.error());
      else if (!std::holds_alternative<proto::Goodbye>(m->decoded.message))
        result = fail(EPROTO, std::string("detach: unexpected ") + proto::msg_type_name(m->decoded.header.type));
    }
  }
  // An orderly end, not a failure worth a warning.
  (void)s_->router->fail(Error{ErrorDomain::posix, ENOTCONN, "detached"}, true);
  return result;
}

void Attachment::listen(std::function<void()> listener) { s_->router->listen(std::move(listener)); }

void Attachment::interrupt_watch(bool watching) { s_->dispatcher->watch(watching); }

std::optional<Error> Attachment::failure() const { return s_->router->failure(); }

std::optional<Error> Attachment::link_loss() const { return s_->router->link_loss(); }

AttachmentStats Attachment::stats() const {
  AttachmentStats out;
  {
    std::lock_guard g(s_->stats_lock);
    out = s_->stats;
  }
  out.interrupts = s_->router->interrupts_received();
  out.posted_write_errors = s_->router->posted_write_errors();
  out.resumes = s_->router->resumes();
  const ChannelStats c = channel_stats();
  out.messages_refused = s_->router->messages_refused() + c.messages_forged + c.messages_replayed + c.messages_foreign;
  out.messages_replayed = c.messages_replayed;
  out.heartbeats = s_->lease_keeper->heartbeats();
  out.operations_failed = s_->operations_failed.load(std::memory_order_relaxed);
  out.mmio_writes = s_->mmio_writes.load(std::memory_order_relaxed);
  return out;
}

AttachmentLatency Attachment::latency() const {
  const auto& l = s_->latency;
  return {l.mmio_read.snapshot(), l.config_read.snapshot(), l.config_write.snapshot(),
          l.flush.snapshot(),     l.bar_read.snapshot(),    l.bar_write.snapshot()};
}

Result<DeviceTelemetry> Attachment::device_telemetry(Deadline deadline) {
  if (s_->router->resuming()) return fail(EAGAIN, "device telemetry: the link to the exporter is being resumed");
  RPCIE_TRY_ASSIGN(auto r, s_->request(proto::TelemetryRequest{}, deadline, false, State::RequestKind::observation));
  RPCIE_TRY(status_check(r.status, r.text, "device telemetry"));
  if (!r.telemetry) return fail(EPROTO, "device telemetry: the exporter answered with another message");
  const auto& t = *r.telemetry;
  return DeviceTelemetry{.dma_read_bytes = t.dma_read_bytes,
                         .dma_written_bytes = t.dma_written_bytes,
                         .dma_read = snapshot_of(t.dma_read),
                         .dma_write = snapshot_of(t.dma_write),
                         .window_pull = snapshot_of(t.window_pull),
                         .interrupt = snapshot_of(t.interrupt)};
}

ChannelStats Attachment::channel_stats() const {
  std::shared_lock link(s_->link_lock);  // a resume replaces the Session
  return s_->session->channel().stats();
}

// --- config space and registers -------------------------------------------------------------

Result<std::uint32_t> Attachment::config_read(std::uint16_t offset, unsigned width, Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher);
  OperationTimer timer(s_->latency.config_read, s_->operations_failed);
  if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
    return fail(EINVAL, "config read: bad offset or width");
  RPCIE_TRY_ASSIGN(auto r, s_->request(proto::ConfigRead{offset, static_cast<std::uint8_t>(width)}, deadline));
  RPCIE_TRY(status_check(r.status, r.text, "config read"));
  s_->stats_update([](AttachmentStats& st) { ++st.config_reads; });
  timer.done();
  return static_cast<std::uint32_t>(r.value);
}

Result<void> Attachment::config_write(std::uint16_t offset, unsigned width, std::uint32_t value, Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher);
  OperationTimer timer(s_->latency.config_write, s_->operations_failed);
  if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
    return fail(EINVAL, "config write: bad offset or width");
  if (width < 4 && (value >> (8 * width)) != 0) return fail(EINVAL, "config write: value wider than the access");
  RPCIE_TRY_ASSIGN(auto r, s_->request(proto::ConfigWrite{offset, static_cast<std::uint8_t>(width), value}, deadline));
  RPCIE_TRY(status_check(r.status, r.text, "config write"));
  s_->stats_update([](AttachmentStats& st) { ++st.config_writes; });
  timer.done();
  return {};
}

Result<std::uint64_t> Attachment::mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width, Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher);
  OperationTimer timer(s_->latency.mmio_read, s_->operations_failed);
  RPCIE_TRY(mmio_check(s_->device, bar, offset, width));
  RPCIE_TRY_ASSIGN(auto r, s_->request(proto::MmioRead{bar, static_cast<std::uint8_t>(width), offset}, deadline));
  RPCIE_TRY(status_check(r.status, r.text, "MMIO read"));
  s_->stats_update([](AttachmentStats& st) { ++st.mmio_reads; });
  timer.done();
  return r.value;
}

Result<void> Attachment::mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value,
                                    Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher, true);
  RPCIE_TRY(mmio_check(s_->device, bar, offset, width));
  if (width < 8 && (value >> (8 * width)) != 0) return fail(EINVAL, "MMIO write: value wider than the access");
  if (auto e = s_->router->error_pending()) return tl::unexpected(*e);
  s_->mmio_writes.fetch_add(1, std::memory_order_relaxed);
  const auto added = s_->batch->write_add(
      {bar, static_cast<std::uint8_t>(width), offset, value}, [] { return Deadline::Clock::now(); },
      [this] { return s_->dispatcher->last_wait(); });
  // A batch that waits is sent by the dispatcher if nothing else sends it first.
  if (added.wake) s_->dispatcher->batch_waiting(added.due);
  if (!added.send_now) return s_->resend_bound(deadline);
  auto sent = s_->batch_flush(deadline);
  s_->batch->write_end(Deadline::Clock::now());
  if (sent) sent = s_->resend_bound(deadline);
  return sent;
}

Result<void> Attachment::mmio_write_burst(std::span<const PostedWrite> writes, Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher, true);
  for (const auto& w : writes) {
    RPCIE_TRY(mmio_check(s_->device, w.bar, w.offset, w.width));
    if (w.width < 8 && (w.value >> (8 * w.width)) != 0) return fail(EINVAL, "MMIO write: value wider than the access");
  }
  if (auto e = s_->router->error_pending()) return tl::unexpected(*e);
  s_->mmio_writes.fetch_add(writes.size(), std::memory_order_relaxed);
  for (const auto& w : writes)
    if (s_->batch->burst_add({w.bar, static_cast<std::uint8_t>(w.width), w.offset, w.value}, Deadline::Clock::now()))
      RPCIE_TRY(s_->batch_flush(deadline));
  RPCIE_TRY(s_->batch_flush(deadline));
  return s_->resend_bound(deadline);
}

Result<void> Attachment::flush(Deadline deadline) {
  // A config read of the vendor ID is the cheapest non-posted request: its reply proves
  // every earlier write performed (rule 2).
  Dispatcher::Call call(*s_->dispatcher);
  OperationTimer timer(s_->latency.flush, s_->operations_failed);
  RPCIE_TRY(s_->request(proto::ConfigRead{0, 2}, deadline));
  timer.done();
  return {};
}

// --- interrupts -------------------------------------------------------------------------------

std::uint64_t Attachment::interrupt_count(std::uint16_t vector) const { return s_->router->interrupt_count(vector); }

Deadline::Clock::time_point Attachment::interrupt_arrived() const { return s_->router->interrupt_arrived(); }

Result<std::uint64_t> Attachment::interrupt_wait(std::uint16_t vector, std::uint64_t seen, Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher);
  if (vector >= s_->device.vectors)
    return fail(EINVAL, "vector " + std::to_string(vector) + " does not exist (the device has " +
                            std::to_string(s_->device.vectors) + ")");
  RPCIE_TRY(s_->batch_flush(deadline));  // a doorbell may still sit in the batch
  RPCIE_TRY(s_->dispatcher->await([&] { return s_->router->interrupt_count(vector) > seen; }, deadline));
  return interrupt_count(vector);
}

}  // namespace rpcie::client
