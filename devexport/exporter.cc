// rpcie-exportd's control side: accept, authenticate, list, attach (claim, lease, detach).
// See exporter.hpp for the contract; the data path of an attachment is ServedAttachment.
#include "exporter.hpp"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "access_log.hpp"
#include "export_metrics.hpp"
#include "export_table.hpp"
#include "preauth_gate.hpp"
#include "resume_board.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/fd.hpp"
#include "rpcie/handshake.hpp"
#include "rpcie/log.hpp"
#include "rpcie/thread_sched.hpp"
#include "served_attachment.hpp"

namespace rpcie::dev {

namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kWindowMax = 4ULL << 30;
constexpr std::uint64_t kMirrorMax = 1ULL << 30;
// How often a waiting thread (the accept loop, a connection not attached, a parked
// attachment) looks at the stop flag. A served attachment sleeps till news (serve_wait).
constexpr auto kIdleSlice = 200ms;

}  // namespace

struct Exporter::Impl {
  ExporterConfig config;
  std::optional<Listener> listener;
  auth::ServerKeys keys;
  std::unique_ptr<PreauthGate> preauth;
  std::atomic<std::size_t> authenticated{0};  // connections past their handshake
  struct Counters {
    std::atomic<std::uint64_t> accepted{0}, refused_preauth{0}, refused_busy{0}, auth_failed{0}, frames_dropped{0},
        messages_refused{0}, frames_malformed{0};
  } counters;
  // Events a peer can cause at will: logged at a bounded rate, with the count left out.
  LogLimiter refused_log, auth_failed_log, malformed_log;
  std::unique_ptr<AccessLog> access_log;  // null without --access-log; outlives every attachment
  ExportTable exports;
  std::atomic<std::uint64_t> next_attachment{1};
  const std::atomic<bool>* stop = nullptr;

  ResumeBoard resumes;  // attachments as resumption sees them

  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Connection> connections;

  bool stopping() const { return stop != nullptr && stop->load(); }

  // How serving an attachment ended: a goodbye (answered with request id `rid` once the
  // device is reset), a lost link (the attachment may be resumed), or an end for good.
  struct ServeEnd {
    enum class Kind { goodbye, link_lost, over } kind;
    std::uint64_t rid = 0;
  };

  // Serves one attachment until goodbye, lease lapse, connection loss (its own, or the
  // client's word: a resume_request for it on a new connection) or shutdown.
  ServeEnd attachment_serve(ServedAttachment& a, ExportSlot& slot, const std::string& client,
                            const ResumeBoard::Entry& entry) {
    auto last_heard = Deadline::Clock::now();
    const auto lease = config.lease;
    for (;;) {
      if (entry.asked()) {
        RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: the client lost its link and asks to resume", a.id(),
                       slot.config.spec.name, client);
        return {ServeEnd::Kind::link_lost};
      }
      if (stopping()) {
        RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: ending (shutdown)", a.id(), slot.config.spec.name,
                       client);
        return {ServeEnd::Kind::over};
      }
      if (a.failed()) {
        RPCIE_LOG_WARN("exportd", "attachment {} of {} by {}: fabric failure", a.id(), slot.config.spec.name, client);
        return {ServeEnd::Kind::link_lost};
      }
      if (Deadline::Clock::now() - last_heard > lease) {
        RPCIE_LOG_WARN("exportd", "attachment {} of {} by {}: lease lapsed (no heartbeat for {} ms)", a.id(),
                       slot.config.spec.name, client, lease.count());
        slot.counters.lease_lapses.fetch_add(1, std::memory_order_relaxed);
        return {ServeEnd::Kind::over};
      }
      auto& sock = a.bootstrap();
      if (!serve_wait(sock, a, entry, last_heard + lease)) continue;
      auto m = sock.message_recv(Deadline::after(lease));
      if (!m) {
        RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: connection lost ({})", a.id(), slot.config.spec.name,
                       client, m.error().describe());
        return {ServeEnd::Kind::link_lost};
      }
      last_heard = Deadline::Clock::now();
      const auto rid = m->decoded.header.request_id;
      if (auto* hb = std::get_if<proto::Heartbeat>(&m->decoded.message)) {
        (void)sock.message_send(proto::Heartbeat{hb->sequence}, rid, Deadline::after(lease));
      } else if (std::holds_alternative<proto::Goodbye>(m->decoded.message)) {
        RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: detached", a.id(), slot.config.spec.name, client);
        return {ServeEnd::Kind::goodbye, rid};
      } else {
        (void)sock.message_send(
            proto::ErrorMsg{EPROTO, std::string("unexpected ") + proto::msg_type_name(m->decoded.header.type)}, rid,
            Deadline::after(lease));
      }
    }
  }

  // Sleeps until the client speaks on the bootstrap connection (true), or until `lapse` or
  // news (false: the caller looks at its conditions again). News comes on file descriptors
  // polled beside the connection: a resume handed over or shutdown (the entry's), the data
  // thread's failure (the attachment's). An idle attachment so wakes only for its heartbeats.
  static bool serve_wait(Socket& sock, const ServedAttachment& a, const ResumeBoard::Entry& entry,
                         Deadline::Clock::time_point lapse) {
    pollfd p[3] = {{sock.fd(), POLLIN, 0}, {entry.news_fd(), POLLIN, 0}, {a.failure_fd(), POLLIN, 0}};
    // Just past the lapse, so that the check after it finds the lease over.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(lapse - Deadline::Clock::now()).count() + 1;
    if (::poll(p, 3, static_cast<int>(std::clamp<long long>(ms, 0, 60'000))) <= 0) return false;  // or EINTR
    if (p[1].revents != 0) entry.news_drain();
    if (p[2].revents != 0) a.failure_drain();
    return p[0].revents != 0;
  }

  SessionOptions session_options(DataPath mode) const {
    SessionOptions so;
    so.provider = config.provider;
    so.data_path = mode;
    // An idle attachment sleeps on the CQ wait fd; a busy one spins (Channel). Without the
    // fd an idle attachment would wake a thousand times a second: the provider's signal fd
    // costs less (two system calls per message, within the noise of the device bench),
    // and an exporter serves many attachments (docs/performance.md, "idle CPU").
    so.cq_wait_fd = true;
    so.source_check = true;
    // A data thread waits on behalf of its clients; while other threads keep wanting its
    // CPU (another attachment's, the compute side's on a shared host) it lets them run.
    so.channel.yield_when_contended = true;
    return so;
  }

  // Releases the client's claim and tears the attachment down; the last holder's teardown
  // resets the device before anyone may claim it again (ExportTable::claim waits for it).
  void attachment_end(ServedAttachment& a, ExportSlot& slot, const std::string& client) {
    const bool last = exports.release(slot, client);
    a.teardown(last);
    if (last) exports.reset_done(slot);
  }

  // Claims the export, sets the attachment up and serves it to its end. An error means the
  // attach was refused before the connection went into the attachment (the caller answers
  // it); once it has, failures are logged here and the result is success.
  Result<void> attach(Socket& sock, const proto::AttachRequest& req, std::uint64_t rid, const std::string& client) {
    const std::shared_ptr<ExportSlot> slot = exports.find(req.export_name);  // alive till the end
    if (!slot) return fail(ENOENT, "no export named '" + std::string(req.export_name) + "'");
    auto r = attach_slot(sock, *slot, req, rid, client);
    if (!r) slot->counters.refusal_add(ExportCounters::refusal_of(r.error().code));
    return r;
  }

  Result<void> attach_slot(Socket& sock, ExportSlot& slot_ref, const proto::AttachRequest& req, std::uint64_t rid,
                           const std::string& client) {
    ExportSlot* slot = &slot_ref;
    if (slot->backend->uses_dma() && req.window_size == 0)
      return fail(EINVAL, "export '" + slot->config.spec.name + "' does DMA: attach with a DMA window");
    if (req.window_size > (slot->config.dma == DmaMode::mirror ? kMirrorMax : kWindowMax))
      return fail(EINVAL, "DMA window of " + std::to_string(req.window_size) + " bytes is too large");
    RPCIE_TRY_ASSIGN(const DataPath wanted, data_path_from_wire(req.data_path));
    // The export's policy wins; a client that insists on the other mode is refused.
    RPCIE_TRY_ASSIGN(const DataPath mode, data_path_decide(slot->config.data_path.value_or(DataPathChoice::automatic),
                                                           wanted, (req.flags & proto::kAttachDataPathInsist) != 0,
                                                           sock.frame_mac() != nullptr, slot->config.spec.name));
    const Deadline claim_deadline = Deadline::after(config.handshake_timeout);
    resumes.end_parked(*slot, client, claim_deadline);
    RPCIE_TRY_ASSIGN(const bool first, exports.claim(*slot, client, claim_deadline));
    const std::uint64_t id = next_attachment.fetch_add(1);
    const bool pushed = (req.flags & proto::kAttachWindowPush) != 0;
    auto a = std::make_unique<ServedAttachment>(*slot, id, req.window_size, pushed, access_log.get(), config.data_nice);
    std::string holder;  // the reply's entry points into it
    proto::AttachReply reply;
    reply.info = exports.entry(*slot, holder);
    reply.lease_ms = static_cast<std::uint32_t>(config.lease.count());
    reply.attachment_id = id;
    reply.data_path = static_cast<std::uint8_t>(mode);
    auto sent = sock.message_send(reply, rid, Deadline::after(config.handshake_timeout));
    auto up = sent ? a->setup(std::move(sock), session_options(mode), first, Deadline::after(config.handshake_timeout))
                   : sent;
    // The client waits for this verdict after the hello exchange: a failure after hello_ack
    // (its window too small, the device refusing to attach) reaches it as an error now
    // rather than as a dead attachment later.
    if (a->has_session()) {
      proto::Message verdict = up ? proto::Message(proto::WriteAck{0})
                                  : proto::Message(proto::ErrorMsg{up.error().to_errno(), up.error().message});
      auto v = a->bootstrap().message_send(verdict, rid, Deadline::after(config.handshake_timeout));
      if (up && !v) up = v;
    }
    if (!up) {
      slot->counters.refusal_add(ExportCounters::Refusal::setup_failed);
      attachment_end(*a, *slot, client);
      RPCIE_LOG_WARN("exportd", "attach of {} by {} failed: {}", slot->config.spec.name, client, up.error().describe());
      return {};  // the connection is gone with the socket
    }
    RPCIE_LOG_INFO("exportd", "attachment {}: {} attached {} (window {} bytes, dma {}, data path {})", id, client,
                   slot->config.spec.name, req.window_size,
                   slot->config.dma == DmaMode::on_demand ? "on-demand"
                   : pushed                               ? "mirror, client pushes"
                                                          : "mirror",
                   data_path_name(mode));
    slot->counters.attaches.fetch_add(1, std::memory_order_relaxed);
    ResumeBoard::Entry entry(resumes, *slot, client, id);  // unlisted last, once the device is reset
    ServeEnd end = attachment_serve(*a, *slot, client, entry);
    while (end.kind == ServeEnd::Kind::link_lost) {
      // First the link goes: a reply retrying its post on the dead connection holds the
      // Channel's lock, which the counters take, until its deadline (2 s) — as long as a
      // short lease, and the client's resume would wait for the park meanwhile.
      a->link_abort();
      session_account(*a, *slot, nullptr);  // the Session goes with the park
      if (!attachment_resume(*a, *slot, client, entry, mode)) break;
      slot->counters.resumes.fetch_add(1, std::memory_order_relaxed);
      end = attachment_serve(*a, *slot, client, entry);
    }
    entry.close();
    // The reply to goodbye goes out once the device is reset and the keys are closed, so
    // that a client that re-attaches right after finds the export free.
    std::optional<Socket> keep;
    if (a->has_session()) {
      keep.emplace(std::move(a->bootstrap()));
      session_account(*a, *slot, &*keep);
    }
    attachment_end(*a, *slot, client);
    if (end.kind == ServeEnd::Kind::goodbye && keep)
      (void)keep->message_send(proto::Goodbye{}, end.rid, Deadline::after(1s));
    return {};
  }

  // Adds what the attachment's Session refused to the counters, and logs it (the exporter's
  // only record of an attachment's refusals by kind): once per Session, before it goes.
  // `bootstrap`: its bootstrap connection, if moved out of it already.
  void session_account(ServedAttachment& a, ExportSlot& slot, Socket* bootstrap) {
    if (!a.has_session()) return;
    const std::uint64_t dropped = (bootstrap ? *bootstrap : a.bootstrap()).frames_dropped();
    counters.frames_dropped.fetch_add(dropped);
    counters.messages_refused.fetch_add(a.messages_refused());
    slot.counters.frames_dropped.fetch_add(dropped, std::memory_order_relaxed);
    slot.counters.messages_refused.fetch_add(a.messages_refused(), std::memory_order_relaxed);
    const ChannelStats cs = a.channel_stats();
    RPCIE_LOG_INFO("exportd", "attachment {}: data-path messages refused: {} foreign, {} forged, {} replayed", a.id(),
                   cs.messages_foreign, cs.messages_forged, cs.messages_replayed);
  }

  // Parks `a` after its link was lost and waits, for the lease, for a resume_request of the
  // same client (ResumeBoard::hand_over). True when the attachment goes on over the new link.
  bool attachment_resume(ServedAttachment& a, ExportSlot& slot, const std::string& client, ResumeBoard::Entry& entry,
                         DataPath mode) {
    const auto until = Deadline::Clock::now() + config.lease;
    entry.park_begin();
    a.park();
    RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: kept for {} ms for the client to resume it", a.id(),
                   slot.config.spec.name, client, config.lease.count());
    const char* why = "";
    auto resume = entry.wait(
        until, [this] { return stopping(); }, kIdleSlice, why);
    if (!resume) {
      RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: not resumed ({})", a.id(), slot.config.spec.name, client,
                     why);
      return false;
    }
    auto r = a.resume(std::move(resume->socket), resume->request, resume->rid, session_options(mode),
                      Deadline::after(config.handshake_timeout));
    if (!r) {
      RPCIE_LOG_WARN("exportd", "attachment {} of {} by {}: resume failed: {}", a.id(), slot.config.spec.name, client,
                     r.error().describe());
      return false;
    }
    RPCIE_LOG_INFO("exportd", "attachment {} of {} by {}: resumed", a.id(), slot.config.spec.name, client);
    return true;
  }

  // Authenticates the connection (it holds `ticket`, a pre-authentication place, until
  // then, and must be done by `deadline`), then serves it.
  void connection_serve(Socket sock, PreauthGate::Ticket ticket, const std::string& peer, Deadline deadline) {
    auto client = auth::handshake_server(sock, keys, deadline);
    ticket.reset();
    if (!client) {
      counters.auth_failed.fetch_add(1);
      counters.frames_dropped.fetch_add(sock.frames_dropped());
      RPCIE_LOG_LIMITED(auth_failed_log, LogLevel::warn, "exportd", "{}: {}", peer, client.error().describe());
      return;
    }
    RPCIE_LOG_DEBUG("exportd", "{}: authenticated as {}", peer, *client);
    if (authenticated.fetch_add(1) >= kMaxConnections) {
      authenticated.fetch_sub(1);
      counters.refused_busy.fetch_add(1);
      RPCIE_LOG_LIMITED(refused_log, LogLevel::warn, "exportd",
                        "{} ({}): refused: {} authenticated connections already", *client, peer, kMaxConnections);
      (void)sock.message_send(proto::ErrorMsg{EBUSY, "too many connections"}, 0, Deadline::after(100ms));
      return;
    }
    authenticated_serve(sock, peer, *client);
    authenticated.fetch_sub(1);
  }

  void authenticated_serve(Socket& sock, const std::string& peer, const std::string& client) {
    struct DropCount {  // the socket's bad-MAC count, whichever way the connection ends
      Impl& im;
      Socket& sock;
      ~DropCount() {
        if (sock.valid()) im.counters.frames_dropped.fetch_add(sock.frames_dropped());
      }
    } drop_count{*this, sock};
    auto last_heard = Deadline::Clock::now();
    while (!stopping() && sock.valid()) {
      if (Deadline::Clock::now() - last_heard > config.lease) return;  // idle unattached connection
      if (!fd_wait(sock.fd(), POLLIN, Deadline::after(kIdleSlice), "waiting for a request")) continue;
      auto m = sock.message_recv(Deadline::after(config.handshake_timeout));
      if (!m) {
        if (m.error().code == EPROTO || m.error().code == EMSGSIZE || m.error().code == EPROTONOSUPPORT) {
          counters.frames_malformed.fetch_add(1);
          RPCIE_LOG_LIMITED(malformed_log, LogLevel::warn, "exportd", "{} ({}): closing after a malformed frame: {}",
                            client, peer, m.error().describe());
        }
        return;
      }
      last_heard = Deadline::Clock::now();
      const auto rid = m->decoded.header.request_id;
      const auto deadline = Deadline::after(config.handshake_timeout);
      if (std::holds_alternative<proto::ListRequest>(m->decoded.message)) {
        ExportTable::ListStorage storage;
        (void)sock.message_send(exports.list(storage), rid, deadline);
      } else if (auto* req = std::get_if<proto::AttachRequest>(&m->decoded.message)) {
        auto r = attach(sock, *req, rid, client);
        if (r) return;  // the attachment took the connection and has ended
        RPCIE_LOG_INFO("exportd", "{} ({}): attach refused: {}", client, peer, r.error().message);
        (void)sock.message_send(proto::ErrorMsg{r.error().to_errno(), r.error().message}, rid, deadline);
      } else if (auto* hb = std::get_if<proto::Heartbeat>(&m->decoded.message)) {
        (void)sock.message_send(proto::Heartbeat{hb->sequence}, rid, deadline);
      } else if (auto* resume = std::get_if<proto::ResumeRequest>(&m->decoded.message)) {
        // The parked attachment answers it and goes on over this connection.
        if (resumes.hand_over(sock, *resume, rid, client)) return;
        (void)sock.message_send(
            proto::ErrorMsg{ENOENT, "no attachment " + std::to_string(resume->attachment_id) +
                                        " of this client to resume (its lease lapsed, or the exporter restarted)"},
            rid, deadline);
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

  // Over a cap: one error frame if the socket takes it at once (it always does, a new
  // connection's send buffer is empty), then closed by the caller.
  void preauth_refuse(Socket& s, const std::string& peer, PreauthGate::Refusal why) {
    counters.refused_preauth.fetch_add(1);
    const bool address = why == PreauthGate::Refusal::address;
    RPCIE_LOG_LIMITED(refused_log, LogLevel::warn, "exportd", "{}: refused: {} unauthenticated connections {}", peer,
                      address ? preauth->per_address() : preauth->total(), address ? "from this address" : "in all");
    const std::string text =
        address ? "too many unauthenticated connections from this address" : "too many unauthenticated connections";
    (void)s.message_send(proto::ErrorMsg{EBUSY, text}, 0, Deadline::after(0ms));
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

namespace {

// `r`'s error with its origin ("FILE:LINE: ", or the flag) in front.
template <class T>
Result<T> at(const std::string& origin, Result<T> r) {
  if (r) return r;
  return tl::unexpected(Error{r.error().domain, r.error().code, origin + ": " + r.error().message});
}

// The backend of export `e`, checked against the exporter's rules for it.
Result<std::unique_ptr<Backend>> export_backend_create(const ExportConfig& e) {
  RPCIE_TRY_ASSIGN(auto b, at(e.origin, backend_create(e.spec)));
  if (e.shared && b->uses_dma())
    return fail(EINVAL, e.origin + ": export '" + e.spec.name + "': a device that does DMA cannot be shared");
  return b;
}

// `e` as the table lists it: its data-path policy resolved against the exporter's.
ExportConfig export_listed(const ExporterConfig& config, const ExportConfig& e) {
  ExportConfig listed = e;
  listed.data_path = export_data_path_policy(config, e);
  return listed;
}

}  // namespace

Result<std::unique_ptr<Exporter>> Exporter::create(const ExporterConfig& config) {
  RPCIE_TRY(config_check(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->preauth = std::make_unique<PreauthGate>(config.preauth_per_address, config.preauth_max);
  if (!config.psk_file.empty()) {
    RPCIE_TRY_ASSIGN(auto k, at(config.psk_file_origin, auth::key_load(config.psk_file)));
    impl->keys.shared.emplace(std::move(k));
  }
  for (const auto& c : config.clients) {
    auto k = auth::key_load(c.psk_file);
    if (!k) return fail(k.error().code, c.origin + ": client '" + c.name + "': " + k.error().message);
    impl->keys.clients.insert_or_assign(c.name, std::move(*k));
  }
  // One key nobody has, for every name without one (handshake.hpp): made here, once.
  RPCIE_TRY(impl->keys.decoy_make());
  RPCIE_LOG_DEBUG("exportd", "decoy key made: every client name without a key is answered with it");
  if (!config.access_log.empty()) {
    RPCIE_TRY_ASSIGN(impl->access_log, at(config.access_log_origin, AccessLog::open(config.access_log)));
  }
  for (const auto& e : config.exports) {
    RPCIE_TRY_ASSIGN(auto b, export_backend_create(e));
    impl->exports.add(export_listed(config, e), std::move(b));
  }
  RPCIE_TRY_ASSIGN(
      Listener l,
      at(config.listen_origin, Listener::open(config.listen_host == "0.0.0.0" ? "" : config.listen_host, config.port)));
  impl->listener.emplace(std::move(l));
  return std::unique_ptr<Exporter>(new Exporter(std::move(impl)));
}

Exporter::Stats Exporter::stats() const noexcept {
  const auto& c = impl_->counters;
  return Stats{c.accepted.load(),       c.refused_preauth.load(),  c.refused_busy.load(),    c.auth_failed.load(),
               c.frames_dropped.load(), c.frames_malformed.load(), c.messages_refused.load()};
}

std::string Exporter::metrics_text() const { return export_metrics_text(impl_->exports, stats()); }

Result<ExportTable::ReloadOutcome> Exporter::reload(const ExporterConfig& config) {
  RPCIE_TRY(config_check(config));
  // Keys are loaded at start only. An allow list naming a client without a key of its own
  // here would let any holder of the shared key take that name (config_check's rule).
  for (const auto& e : config.exports) {
    for (std::size_t i = 0; i < e.allow.size(); ++i) {
      if (impl_->keys.clients.contains(e.allow[i])) continue;
      const std::string& where = i < e.allow_origin.size() ? e.allow_origin[i] : e.origin;
      return fail(EINVAL, where + ": export '" + e.spec.name + "': allow names client '" + e.allow[i] +
                              "', whose key was not loaded at start (new [[client]] keys need a restart)");
    }
  }
  const auto running = impl_->exports.configured();
  std::vector<ExportTable::Wanted> wanted;
  for (const auto& e : config.exports) {
    ExportTable::Wanted w{export_listed(config, e), nullptr};
    const bool same = std::any_of(running.begin(), running.end(),
                                  [&](const auto& r) { return export_config_same(r.config, w.config); });
    // A backend for what is new or changed only: one that runs keeps its device.
    if (!same) {
      RPCIE_TRY_ASSIGN(w.backend, export_backend_create(e));
    }
    wanted.push_back(std::move(w));
  }
  return impl_->exports.reload(std::move(wanted));
}

ExportTable::Counts Exporter::counts() const { return impl_->exports.counts(); }

void Exporter::run(const std::atomic<bool>& stop, const std::function<void()>& tick) {
  Impl& im = *impl_;
  im.stop = &stop;
  RPCIE_LOG_INFO("exportd", "serving {} export(s) on {}:{}", im.exports.counts().exports, im.config.listen_host,
                 port());
  while (!stop.load()) {
    if (tick) tick();
    im.connections_reap(false);
    auto s = im.listener->accept(Deadline::after(kIdleSlice));
    if (!s) {
      if (s.error().code != ETIMEDOUT) {
        // Out of descriptors and the like: the pending connection stays readable, so back
        // off instead of spinning on it (and say so once).
        RPCIE_LOG_ONCE(LogLevel::warn, "exportd", "accept failed: {} (retrying)", s.error().describe());
        std::this_thread::sleep_for(100ms);
      }
      continue;
    }
    im.counters.accepted.fetch_add(1);
    const Deadline deadline = Deadline::after(im.config.preauth_timeout);  // from the accept
    std::string peer = s->peer_address();
    auto admission = im.preauth->admit(peer);
    if (!admission.ticket) {
      im.preauth_refuse(*s, peer, admission.why);
      continue;  // closed here: never left to wait
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    try {
      im.connections.push_back({std::thread([&im, done, deadline, peer, sock = std::move(*s),
                                             ticket = std::move(*admission.ticket)]() mutable {
                                  thread_name("rpcie-conn");
                                  im.connection_serve(std::move(sock), std::move(ticket), peer, deadline);
                                  done->store(true);
                                }),
                                done});
    } catch (const std::system_error& e) {
      // No thread to be had (TasksMax, memory): the closure, and with it the connection and
      // its place at the gate, is gone already; the daemon and its attachments go on.
      im.counters.refused_preauth.fetch_add(1);
      RPCIE_LOG_LIMITED(im.refused_log, LogLevel::warn, "exportd", "{}: refused: no thread for it ({})", peer,
                        e.what());
    }
  }
  im.resumes.wake_all();  // attachments served or parked end now, not at their next look
  im.connections_reap(true);
  const Stats st = stats();
  RPCIE_LOG_INFO("exportd",
                 "stopped: {} connections accepted, {} refused over the pre-authentication caps, {} refused as too "
                 "many, {} failed authentications, {} bootstrap frames dropped for a bad MAC, {} closed for a "
                 "malformed frame, {} data-path messages refused (foreign, forged or replayed)",
                 st.accepted, st.refused_preauth, st.refused_busy, st.auth_failed, st.frames_dropped,
                 st.frames_malformed, st.messages_refused);
}

}  // namespace rpcie::dev
