// Client API: see client.hpp for the contract.
#include "rpcie/client.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <sys/prctl.h>

#include "rpcie/log.hpp"
#include "rpcie/memory.hpp"

namespace rpcie::client {

namespace {

constexpr std::uint32_t kStagingRegion = 1;  // the client's staging buffer (local use only)
constexpr std::size_t kStagingSize = 4u << 20;
// Posted writes are coalesced into one mmio_write_batch until the batch is full, another
// operation needs them out, or the oldest has waited this long (a driver that writes a
// doorbell and then polls host memory must not wait for more).
constexpr auto kBatchDelay = std::chrono::microseconds(20);
// ... except the first few of a burst: up to kEagerWrites posted writes per kBatchDelay go
// out at once from the writer's thread (a call that waits, such as a read or
// interrupt_wait(), ends a burst). A batch that waits needs the dispatcher thread to
// send it, and waking that thread costs more than the send (measured on tcp with the client
// on one CPU: ~20 us per edu DMA command, where the whole command takes about as long).
// Writes in small groups (a doorbell, an acknowledge) thus travel at once; long bursts are
// still coalesced.
constexpr int kEagerWrites = 4;
// The dispatcher's own sends (timed batch flushes). Short: it holds the send lock meanwhile,
// and on a dead link a send only ever finds the queue full.
constexpr auto kSendTimeout = std::chrono::milliseconds(500);
// Writes per mmio_write_batch: as many as fit in one fi_inject where the provider's inject
// is large (shm: 4 KiB, 226 writes), so that posting never waits for the peer (a larger
// shm send is segmented and moves only while both ends progress, and the posting thread
// does not poll); else kMaxBatch (tcp injects only 64 bytes, and its eager sends of a few
// KiB complete locally).
std::size_t batch_writes_max(std::size_t inject_size) {
  constexpr std::size_t kEntry = 1 + 1 + 8 + 8, kFixed = proto::kHeaderSize + 2, kWorthIt = 16;
  if (inject_size < kFixed + kWorthIt * kEntry) return proto::kMaxBatch;
  return std::min(proto::kMaxBatch, (inject_size - kFixed) / kEntry);
}
constexpr std::uint64_t kBulkPiece = 256u << 10;  // reads of a bulk transfer in flight at once
// window_push() of up to this many bytes travels inside the posted-write batch (a descriptor,
// a small DMA source: one message with the doorbell that follows); larger ones are one-sided
// writes into the exporter's mirror. Well inside rxm's eager buffer (16 KiB) and
// proto::kMaxPushBytes.
constexpr std::size_t kPushInline = 8u << 10;
// Posts [remote_offset, +length) of `remote` into `local` at local_offset as several reads
// in flight rather than one large one: a read's latency is paid once per piece in flight,
// not per call (measured on tcp: 1 MiB in one read 0.57 of raw, in four 0.7-0.97). The
// caller flushes.
Result<void> rma_read_pieces(Channel& ch, const MemoryRegion& local, std::size_t local_offset,
                             const RemoteRegion& remote, std::uint64_t remote_offset, std::uint64_t length,
                             Deadline deadline) {
  for (std::uint64_t done = 0; done < length; done += kBulkPiece) {
    auto r = ch.rma_read(local, local_offset + done, remote, remote_offset + done, std::min(kBulkPiece, length - done),
                         deadline);
    if (!r) return r;
  }
  return {};
}
// Request ids of posted writes have the top bit set: the exporter answers them only when
// they fail, and such an answer is kept for the caller's next operation.
constexpr std::uint64_t kPostedBit = std::uint64_t{1} << 63;

Error error_from(const proto::ErrorMsg& e, const std::string& context) {
  return Error{ErrorDomain::posix, e.code > 0 ? e.code : EPROTO, context + ": " + std::string(e.text)};
}

// Receives one bootstrap message and turns an error message into an Error.
Result<OwnedMessage> reply_recv(Socket& socket, Deadline deadline, const std::string& context) {
  auto m = socket.message_recv(deadline);
  if (!m) return tl::unexpected(m.error());
  if (auto* e = std::get_if<proto::ErrorMsg>(&m->decoded.message)) return tl::unexpected(error_from(*e, context));
  return m;
}

template <class T>
Result<const T*> reply_as(const OwnedMessage& m, const char* context) {
  auto* p = std::get_if<T>(&m.decoded.message);
  if (!p) return fail(EPROTO, std::string(context) + ": unexpected " + proto::msg_type_name(m.decoded.header.type));
  return p;
}

}  // namespace

ExportDesc ExportDesc::from(const proto::ExportEntry& e) {
  ExportDesc d;
  d.name = std::string(e.name);
  d.backend = std::string(e.backend);
  d.holder = std::string(e.holder);
  d.vendor = e.vendor;
  d.device = e.device;
  d.class_code = e.class_code;
  d.subsystem_vendor = e.subsystem_vendor;
  d.subsystem_device = e.subsystem_device;
  d.revision = e.revision;
  d.attached = e.state == proto::ExportState::attached;
  d.shared = (e.flags & proto::kExportShared) != 0;
  d.mirror = (e.flags & proto::kExportMirror) != 0;
  d.vectors = e.vectors;
  for (const auto& b : e.bars)
    d.bars.push_back({b.bar, b.kind, b.size, (b.flags & proto::kBarFlag64) != 0,
                      (b.flags & proto::kBarFlagReadonly) != 0, (b.flags & proto::kBarFlagDirect) != 0});
  return d;
}

const BarDesc* ExportDesc::bar_find(std::uint8_t bar) const noexcept {
  for (const auto& b : bars)
    if (b.bar == bar) return &b;
  return nullptr;
}

Result<Socket> exporter_connect(const std::string& host, std::uint16_t port, const ClientOptions& options,
                                Deadline deadline) {
  if (!options.key) return fail(EINVAL, "no key given");
  const std::string name = options.name.empty() ? host_name() : options.name;
  if (!auth::client_name_valid(name)) return fail(EINVAL, "client name '" + name + "' is not valid");
  auto sock = Socket::connect(host, port, deadline);
  if (!sock) return tl::unexpected(sock.error());
  const auth::Nonce mine = auth::nonce_random();
  auto sent = sock->message_send(proto::AuthHello{name, mine}, 0, deadline);
  if (!sent) return tl::unexpected(sent.error());
  auto challenge_msg = reply_recv(*sock, deadline, "exporter refused");
  if (!challenge_msg) return tl::unexpected(challenge_msg.error());
  auto challenge = reply_as<proto::AuthChallenge>(*challenge_msg, "authentication");
  if (!challenge) return tl::unexpected(challenge.error());
  auth::Nonce theirs{};
  std::copy((*challenge)->nonce.begin(), (*challenge)->nonce.end(), theirs.begin());
  auth::Proof server_proof{};
  std::copy((*challenge)->proof.begin(), (*challenge)->proof.end(), server_proof.begin());
  // The exporter proves the key first: a client never hands its proof to an impostor.
  if (!auth::proof_verify(*options.key, auth::Role::server, name, mine, theirs, server_proof))
    return fail(EACCES, "authentication failed: " + host + " did not prove the key for client '" + name +
                            "' (wrong key, or the exporter does not know this client)");
  auto proof = auth::proof_compute(*options.key, auth::Role::client, name, mine, theirs);
  sent = sock->message_send(proto::AuthProof{proof}, 0, deadline);
  if (!sent) return tl::unexpected(sent.error());
  auto ok = reply_recv(*sock, deadline, "authentication failed");
  if (!ok) return tl::unexpected(ok.error());
  auto ok_msg = reply_as<proto::AuthOk>(*ok, "authentication");
  if (!ok_msg) return tl::unexpected(ok_msg.error());
  sock->frame_mac_set(auth::FrameMac(auth::session_key_derive(*options.key, name, mine, theirs), auth::Role::client));
  return sock;
}

Result<std::vector<ExportDesc>> exports_list(const std::string& host, std::uint16_t port, const ClientOptions& options,
                                             Deadline deadline) {
  auto sock = exporter_connect(host, port, options, deadline);
  if (!sock) return tl::unexpected(sock.error());
  auto sent = sock->message_send(proto::ListRequest{}, 1, deadline);
  if (!sent) return tl::unexpected(sent.error());
  auto m = reply_recv(*sock, deadline, "list refused");
  if (!m) return tl::unexpected(m.error());
  auto list = reply_as<proto::ListReply>(*m, "list");
  if (!list) return tl::unexpected(list.error());
  std::vector<ExportDesc> out;
  for (const auto& e : (*list)->exports) out.push_back(ExportDesc::from(e));
  (void)sock->message_send(proto::Goodbye{}, 2, Deadline::after(std::chrono::milliseconds(200)).min(deadline));
  return out;
}

// --- Attachment ---------------------------------------------------------------------

struct Attachment::State {
  ExportDesc device;
  std::uint64_t id = 0;
  std::chrono::milliseconds lease{5000};
  std::string provider;
  std::unique_ptr<Session> session;
  std::optional<HostBuffer> staging;
  const MemoryRegion* window_mr = nullptr;
  const MemoryRegion* staging_mr = nullptr;
  std::optional<RemoteRegion> mirror;  // the exporter's mirror, where window_push() writes
  std::mutex staging_lock;             // one bulk transfer through the staging buffer at a time
  std::mutex socket_lock;              // the bootstrap socket: heartbeats vs detach

  // Replies and interrupts, filled by whoever receives.
  mutable std::mutex lock;
  // Three condition variables on `lock`, so that a reply wakes only the threads that wait
  // for one: every wake-up of a thread that does not care costs a context switch on the
  // caller's CPU, on the latency path of every request.
  std::condition_variable changed;        // replies, interrupts, failure: callers in await()
  std::condition_variable dispatcher_cv;  // posted writes queued, stop
  std::condition_variable heartbeat_cv;   // stop
  int waiters = 0;                        // callers asleep on `changed` (under lock)
  struct Reply {
    std::int32_t status = 0;
    std::uint64_t value = 0;
    std::string text;
  };
  std::map<std::uint64_t, Reply> replies;  // arrived, not yet collected
  std::vector<std::uint64_t> irq_counts;   // by vector
  std::optional<Error> failed;             // sticky: link lost, detached, ...
  std::optional<Error> posted_error;       // a posted write failed at the device: next op reports it
  AttachmentStats stats;
  std::uint64_t next_request = 1;
  bool detached = false;
  bool posted_unconfirmed = false;  // posted writes sent since the last reply proved them performed

  // Posted writes not yet sent (see kBatchDelay), after the window bytes of a window_push()
  // (then they leave as one window_push message).
  std::size_t batch_max = proto::kMaxBatch;  // batch_writes_max() of this attachment's fabric
  std::mutex batch_lock;
  std::timed_mutex send_lock;  // batches leave in the order they were taken
  proto::MmioWriteBatch batch;
  std::vector<std::uint8_t> batch_push;  // window bytes, for the mirror at batch_push_at
  std::uint64_t batch_push_at = 0;
  bool batch_empty() const { return batch.writes.empty() && batch_push.empty(); }
  Deadline::Clock::time_point batch_since{};
  Deadline::Clock::time_point eager_since{};  // start of the current kEagerWrites window
  int eager_sent = 0;                         // writes sent eagerly in that window
  std::atomic<bool> batch_pending{false};

  // The receive role: whoever holds it takes messages off the channel.
  std::mutex receiver;
  // API calls in progress, and when the last one started or ended: the dispatcher keeps
  // off the channel (and the CPU) while the application drives it.
  std::atomic<int> busy{0};
  std::atomic<Deadline::Clock::rep> last_call{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> dispatcher_on_fd{false};   // the dispatcher is inside message_wait()
  std::atomic<bool> dispatcher_parked{false};  // the dispatcher waits for the application to go quiet
  std::chrono::microseconds quiet{2000};       // ClientOptions::receiver_quiet
  std::thread dispatcher;
  std::thread heartbeat;

  std::uint64_t request_id() {
    std::lock_guard g(lock);
    return next_request++;
  }
  void fail_with(Error e) {
    {
      std::lock_guard g(lock);
      if (failed) return;
      RPCIE_LOG_WARN("client", "attachment {} to {} failed: {}", id, device.name, e.describe());
      failed = std::move(e);
      changed.notify_all();
    }
    listener_call();
  }

  // Attachment::listen(): called outside `lock`, under listener_lock (which listen() takes
  // too, so that no call is running once a listener has been replaced).
  std::mutex listener_lock;
  std::function<void()> listener;
  void listener_call() {
    std::lock_guard l(listener_lock);
    if (listener) listener();
  }
  // Error for the next operation: a failure, or a posted write the device refused.
  std::optional<Error> error_pending() {
    std::lock_guard g(lock);
    if (failed) return failed;
    if (posted_error) return std::exchange(posted_error, std::nullopt);
    return std::nullopt;
  }

  // Takes one decoded message and files it. Called with the receive role held.
  void message_file(const proto::Decoded& d) {
    if (message_store(d)) listener_call();
  }
  // Files the message under `lock`; true when it was an interrupt.
  bool message_store(const proto::Decoded& d) {
    std::lock_guard g(lock);
    bool interrupt = false;
    const auto rid = d.header.request_id;
    std::visit(
        [&](const auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, proto::ReadReply>) {
            replies[rid] = Reply{m.status, m.value, {}};
          } else if constexpr (std::is_same_v<M, proto::WriteAck>) {
            replies[rid] = Reply{m.status, 0, {}};
          } else if constexpr (std::is_same_v<M, proto::ErrorMsg>) {
            // Either the answer to a request that waits, or a posted write that failed at
            // the device: nobody waits for that one, the next operation reports it.
            const int code = m.code > 0 ? m.code : EPROTO;
            if ((rid & kPostedBit) != 0) {
              if (!posted_error)
                posted_error =
                    Error{ErrorDomain::posix, code, "posted write failed at the device: " + std::string(m.text)};
            } else {
              replies[rid] = Reply{code, 0, std::string(m.text)};
            }
          } else if constexpr (std::is_same_v<M, proto::Interrupt>) {
            if (m.vector < irq_counts.size()) {
              irq_counts[m.vector] = std::max(irq_counts[m.vector], m.count);
              ++stats.interrupts;
              interrupt = true;
            }
          } else {
            RPCIE_LOG_ONCE(LogLevel::warn, "client", "ignoring unexpected {} from the exporter",
                           proto::msg_type_name(d.header.type));
          }
        },
        d.message);
    // The thread that receives files its own reply; only callers that found the receive
    // role taken sleep on `changed` and need waking.
    if (waiters > 0) changed.notify_all();
    return interrupt;
  }

  // Receives while waiting for `done` (under `lock`), taking the receive role when free.
  template <class Done>
  Result<void> await(Done&& done, Deadline deadline) {
    for (;;) {
      {
        std::lock_guard g(lock);
        if (done()) return {};
        if (failed) return tl::unexpected(*failed);
      }
      if (deadline.expired()) return fail(ETIMEDOUT, "deadline passed waiting for the exporter");
      std::unique_lock role(receiver, std::try_to_lock);
      if (role.owns_lock()) {
        // Short slices, so that a failure noticed elsewhere (heartbeat) ends the wait.
        auto m = session->channel().message_recv(deadline.min(Deadline::after(std::chrono::milliseconds(50))));
        if (m) {
          message_file(**m);
        } else if (m.error().code == EPROTO) {
          continue;  // a malformed message was dropped; keep going
        } else if (m.error().code != ETIMEDOUT) {
          fail_with(Error{ErrorDomain::posix, EIO, "link to the exporter lost: " + m.error().describe()});
        }
        continue;
      }
      // Someone else receives: wait for them to file our reply or hand over the role.
      std::unique_lock g(lock);
      ++waiters;
      changed.wait_until(g, std::min(deadline.when(), Deadline::Clock::now() + std::chrono::milliseconds(5)));
      --waiters;
    }
  }

  // Sends the posted writes collected so far, in order. The batch is swapped out under
  // batch_lock (held only for that, so writers are never stuck behind a send) and sent under
  // send_lock, which keeps the batches in the order they were taken.
  Result<void> batch_flush(Deadline deadline, bool only_if_due = false) {
    // Taken within the caller's deadline: the dispatcher may be stuck sending on a dead link.
    std::unique_lock sl(send_lock, std::defer_lock);
    if (!sl.try_lock_until(deadline.when())) return fail(ETIMEDOUT, "deadline passed waiting to send posted writes");
    proto::MmioWriteBatch out;
    std::vector<std::uint8_t> push;
    std::uint64_t push_at = 0;
    {
      std::lock_guard b(batch_lock);
      if (batch_empty()) return {};
      if (only_if_due && Deadline::Clock::now() - batch_since < kBatchDelay) return {};
      std::swap(out, batch);
      std::swap(push, batch_push);
      push_at = batch_push_at;
      batch.writes.reserve(batch_max);
      batch_pending.store(false, std::memory_order_relaxed);
    }
    const auto rid = request_id() | kPostedBit;
    auto& ch = session->channel();
    auto sent = !push.empty() ? ch.message_send(proto::WindowPush{push_at, push, std::move(out.writes)}, rid, deadline)
                : out.writes.size() == 1 ? ch.message_send(out.writes.front(), rid, deadline)
                                         : ch.message_send(out, rid, deadline);
    if (!sent) {
      fail_with(Error{ErrorDomain::posix, EIO, "link to the exporter lost: " + sent.error().describe()});
      return sent;
    }
    std::lock_guard g(lock);
    posted_unconfirmed = true;
    return {};
  }

  // Everything posted before is performed at the device (rule 2: a non-posted request
  // does not pass posted writes); for transfers that bypass the ordered queue (one-sided
  // RMA to a direct BAR).
  Result<void> posted_settle(Deadline deadline) {
    auto f = batch_flush(deadline);
    if (!f) return f;
    {
      std::lock_guard g(lock);
      if (!posted_unconfirmed) return {};
    }
    auto r = request(proto::ConfigRead{0, 2}, deadline);
    if (!r) return tl::unexpected(r.error());
    return {};
  }

  // Start of every bulk transfer: range checks, earlier posted writes settled where the
  // transfer bypasses the ordered queue (direct BARs), a pending error reported.
  Result<const BarDesc*> bulk_begin(std::uint8_t bar, std::uint64_t offset, std::uint64_t length, bool write,
                                    Deadline deadline) {
    const BarDesc* b = device.bar_find(bar);
    if (!b) return fail(EINVAL, "BAR " + std::to_string(bar) + " does not exist");
    if (b->kind != pci::BarKind::memory) return fail(EINVAL, "BAR " + std::to_string(bar) + " is not a memory BAR");
    if (offset > b->size || length > b->size - offset) return fail(EINVAL, "range outside BAR " + std::to_string(bar));
    if (write && b->readonly) return fail(EPERM, "BAR " + std::to_string(bar) + " is read-only");
    if (b->direct) {
      auto settled = posted_settle(deadline);
      if (!settled) return tl::unexpected(settled.error());
    }
    if (auto e = error_pending()) return tl::unexpected(*e);
    return b;
  }

  Result<Reply> request(const proto::Message& m, Deadline deadline) {
    auto f = batch_flush(deadline);
    if (!f) return tl::unexpected(f.error());
    if (auto e = error_pending()) return tl::unexpected(*e);
    const auto rid = request_id();
    auto sent = session->channel().message_send(m, rid, deadline);
    if (!sent) {
      fail_with(Error{ErrorDomain::posix, EIO, "link to the exporter lost: " + sent.error().describe()});
      return tl::unexpected(sent.error());
    }
    auto w = await([&] { return replies.count(rid) != 0; }, deadline);
    if (!w) return tl::unexpected(w.error());
    std::lock_guard g(lock);
    Reply r = std::move(replies[rid]);
    replies.erase(rid);
    posted_unconfirmed = false;
    // An error for a posted write sent before this request arrived before its reply: the
    // posted write failed, and this call is "the next access" that reports it.
    if (posted_error) return tl::unexpected(*std::exchange(posted_error, std::nullopt));
    return r;
  }

  // Marks an API call in progress (RAII). A posted call (mmio_write) receives nothing, so
  // it does not start the quiet period: once it returns, the dispatcher is back on duty at
  // once — an application that writes a doorbell and then sleeps in poll() on its events
  // file relies on the dispatcher to receive the interrupt.
  struct Call {
    explicit Call(State& st, bool posted_only = false) : s(st), posted(posted_only) {
      s.busy.fetch_add(1, std::memory_order_relaxed);
      if (!posted) s.last_call.store(Deadline::Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      // A dispatcher asleep on the CQ wait fd would wake for every completion of this call
      // (and take this thread's CPU each time): move it to its condition variable now. Not
      // for a posted call: it completes nothing the dispatcher would wake for, and a woken
      // dispatcher spins (the wake-up counts as activity) on the CPU the caller needs.
      if (!posted && s.dispatcher_on_fd.load(std::memory_order_relaxed)) s.session->channel().wake();
    }
    ~Call() {
      if (!posted) s.last_call.store(Deadline::Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      // Only a posted call after a quiet spell wakes a parked dispatcher: waking it at the
      // end of every call would cost a context switch per MMIO read.
      if (s.busy.fetch_sub(1, std::memory_order_acq_rel) == 1 && posted &&
          s.dispatcher_parked.load(std::memory_order_acquire) && !s.app_active()) {
        std::lock_guard g(s.lock);  // the dispatcher checks its predicate under it: no lost wake-up
        s.dispatcher_cv.notify_one();
      }
    }
    State& s;
    bool posted;
  };

  bool app_active() const {
    if (busy.load(std::memory_order_relaxed) > 0) return true;
    const Deadline::Clock::time_point last{Deadline::Clock::duration(last_call.load(std::memory_order_relaxed))};
    return Deadline::Clock::now() - last < quiet;
  }

  void dispatcher_run() {
    // Progress and interrupt counting while the application leaves the channel alone. It
    // stands aside while calls are in progress or were made within `quiet` (a
    // caller that waits receives itself; posted writes need nobody): two threads spinning
    // on one CQ would only take turns on the lock and, with two cores, the CPU.
    ::prctl(PR_SET_TIMERSLACK, 1000UL);  // wake within ~1 us of kBatchDelay, not the default 50 us
    while (!stop.load()) {
      Deadline::Clock::time_point batch_due = Deadline::Clock::time_point::max();
      if (batch_pending.load(std::memory_order_relaxed)) {
        (void)batch_flush(Deadline::after(kSendTimeout), true);
        std::lock_guard b(batch_lock);
        if (!batch_empty()) batch_due = batch_since + kBatchDelay;
      }
      const bool batch_tracked = batch_due != Deadline::Clock::time_point::max();
      if (app_active() || batch_tracked) {
        std::unique_lock g(lock);
        dispatcher_parked.store(true, std::memory_order_release);
        dispatcher_cv.wait_until(g, std::min(batch_due, Deadline::Clock::now() + quiet), [&] {
          return stop.load() || (!batch_tracked && batch_pending.load(std::memory_order_relaxed)) ||
                 (!batch_tracked && !app_active());
        });
        dispatcher_parked.store(false, std::memory_order_relaxed);
        continue;
      }
      dispatcher_on_fd.store(true, std::memory_order_relaxed);
      auto ready = app_active() ? Result<bool>(false)
                                : session->channel().message_wait(
                                      Deadline::after(std::chrono::milliseconds(20)),
                                      [this] {
                                        return busy.load(std::memory_order_relaxed) > 0 ||
                                               batch_pending.load(std::memory_order_relaxed);
                                      },
                                      false);  // background: spins only briefly
      dispatcher_on_fd.store(false, std::memory_order_relaxed);
      if (!ready) {
        fail_with(Error{ErrorDomain::posix, EIO, "link to the exporter lost: " + ready.error().describe()});
        std::unique_lock g(lock);
        dispatcher_cv.wait_for(g, std::chrono::milliseconds(50), [&] { return stop.load(); });
        continue;
      }
      if (!*ready) continue;
      std::unique_lock role(receiver, std::try_to_lock);
      if (!role.owns_lock()) continue;
      // Drain what is there without waiting.
      for (int i = 0; i < 64 && busy.load(std::memory_order_relaxed) == 0; ++i) {
        auto m = session->channel().message_recv(Deadline::after(std::chrono::microseconds(0)));
        if (!m) break;
        message_file(**m);
      }
      role.unlock();
      std::lock_guard g(lock);
      if (waiters > 0) changed.notify_all();  // a caller that found the role taken may take it now
    }
  }

  void heartbeat_run() {
    std::uint64_t seq = 0;
    const auto every = std::max(lease / 3, std::chrono::milliseconds(50));
    while (!stop.load()) {
      {
        std::unique_lock g(lock);
        heartbeat_cv.wait_for(g, every, [&] { return stop.load(); });
        if (stop.load() || failed) return;
      }
      std::lock_guard sg(socket_lock);
      if (stop.load()) return;
      auto& sock = session->bootstrap();
      auto deadline = Deadline::after(lease);
      auto sent = sock.message_send(proto::Heartbeat{++seq}, 0, deadline);
      auto echo = sent ? sock.message_recv(deadline) : Result<OwnedMessage>(tl::unexpected(sent.error()));
      if (!echo || !std::holds_alternative<proto::Heartbeat>(echo->decoded.message)) {
        std::string why = !echo ? echo.error().describe()
                                : std::string("unexpected ") + proto::msg_type_name(echo->decoded.header.type);
        fail_with(Error{ErrorDomain::posix, ENOTCONN, "exporter lost (heartbeat): " + why});
        return;
      }
      std::lock_guard g(lock);
      ++stats.heartbeats;
    }
  }

  void threads_stop() {
    {
      std::lock_guard g(lock);
      stop.store(true);
      changed.notify_all();
      dispatcher_cv.notify_all();
      heartbeat_cv.notify_all();
    }
    if (dispatcher.joinable()) dispatcher.join();
    if (heartbeat.joinable()) heartbeat.join();
  }
};

Attachment::Attachment(std::unique_ptr<State> state) : s_(std::move(state)) {}

Result<std::unique_ptr<Attachment>> Attachment::open(const std::string& host, std::uint16_t port,
                                                     const std::string& export_name, const ClientOptions& options,
                                                     DmaWindow window, Deadline deadline) {
  if ((window.base == nullptr) != (window.size == 0)) return fail(EINVAL, "DMA window: base and size go together");
  auto sock = exporter_connect(host, port, options, deadline);
  if (!sock) return tl::unexpected(sock.error());
  auto sent = sock->message_send(
      proto::AttachRequest{export_name, window.size, options.window_push ? proto::kAttachWindowPush : std::uint8_t{0}},
      1, deadline);
  if (!sent) return tl::unexpected(sent.error());
  auto m = reply_recv(*sock, deadline, "attach " + export_name + " refused");
  if (!m) return tl::unexpected(m.error());
  auto reply = reply_as<proto::AttachReply>(*m, "attach");
  if (!reply) return tl::unexpected(reply.error());

  auto s = std::make_unique<State>();
  s->device = ExportDesc::from((*reply)->info);
  s->id = (*reply)->attachment_id;
  s->lease = std::chrono::milliseconds(std::max<std::uint32_t>((*reply)->lease_ms, 100));
  s->irq_counts.assign(s->device.vectors, 0);
  s->quiet = options.receiver_quiet;
  auto staging = HostBuffer::create(kStagingSize);
  if (!staging) return tl::unexpected(staging.error());
  s->staging.emplace(std::move(*staging));

  std::vector<LocalRegion> regions;
  if (window.size) regions.push_back({proto::kRegionWindow, window.base, window.size});
  regions.push_back({kStagingRegion, s->staging->data(), s->staging->size(), FI_READ | FI_WRITE});
  // The CQ gets a wait fd: the dispatcher thread of an idle attachment then sleeps in
  // poll(2) instead of waking a thousand times a second (which also disturbs whatever else
  // runs on that CPU); callers that wait for a reply spin first. The provider's signalling
  // of the fd costs two system calls per message, about 10 % of an MMIO read round trip on
  // tcp (docs/performance.md).
  SessionOptions so = options.session;
  so.cq_wait_fd = true;
  auto session = Session::connect_over(std::move(*sock), so, regions, deadline);
  if (!session) return tl::unexpected(session.error());
  s->session = std::move(*session);
  s->provider = s->session->peer().provider;
  // The exporter's first fabric message (a ping), answered with a pong of the same size,
  // sets up the provider's connection and send buffers on both sides now rather than on
  // the first device accesses (rxm connects on first use and allocates its buffer pools on
  // the first send over the inject size: 10-20 ms each on tcp).
  auto ping = s->session->channel().message_recv(deadline);
  if (!ping)
    return fail(ping.error().code,
                "attach " + export_name + ": no fabric traffic from the exporter: " + ping.error().message);
  if (auto* p = std::get_if<proto::Ping>(&(*ping)->message)) {
    std::vector<std::uint8_t> echo(p->data.begin(), p->data.end());
    auto pong = s->session->channel().message_send(proto::Pong{{echo}}, 0, deadline);
    if (!pong) return tl::unexpected(pong.error());
  }
  // The exporter's verdict: the device is attached and serving (or why not).
  auto verdict = reply_recv(s->session->bootstrap(), deadline, "attach " + export_name + " failed");
  if (!verdict) return tl::unexpected(verdict.error());
  if (!std::holds_alternative<proto::WriteAck>(verdict->decoded.message))
    return fail(EPROTO, std::string("attach: unexpected ") + proto::msg_type_name(verdict->decoded.header.type));
  if (window.size) s->window_mr = &s->session->region(0);
  if (window.size && options.window_push && s->device.mirror) {
    auto mirror = s->session->peer_region(proto::kRegionMirror);
    if (!mirror || mirror->length < window.size)
      return fail(EPROTO, "attach " + export_name + ": the exporter offers no mirror of the DMA window");
    s->mirror = *mirror;
  }
  s->staging_mr = &s->session->region(window.size ? 1 : 0);
  s->batch_max = batch_writes_max(s->session->channel().fabric().inject_size());

  std::unique_ptr<Attachment> a(new Attachment(std::move(s)));
  State* st = a->s_.get();
  st->dispatcher = std::thread([st] { st->dispatcher_run(); });
  st->heartbeat = std::thread([st] { st->heartbeat_run(); });
  RPCIE_LOG_INFO("client", "attached {} on {}:{} (attachment {}, {})", export_name, host, port, st->id, st->provider);
  return a;
}

Attachment::~Attachment() {
  if (!s_) return;
  bool detached;
  {
    std::lock_guard g(s_->lock);
    detached = s_->detached;
  }
  if (detached)
    s_->threads_stop();
  else
    (void)detach(Deadline::after(std::chrono::seconds(1)));
}

const ExportDesc& Attachment::device() const noexcept { return s_->device; }
std::uint64_t Attachment::id() const noexcept { return s_->id; }
const std::string& Attachment::provider() const noexcept { return s_->provider; }
std::chrono::milliseconds Attachment::lease() const noexcept { return s_->lease; }

namespace {
Result<void> status_check(std::int32_t status, const std::string& text, const char* what) {
  if (status == 0) return {};
  return fail(status, std::string(what) + (text.empty() ? std::string(" failed at the device") : ": " + text));
}
}  // namespace

Result<std::uint32_t> Attachment::config_read(std::uint16_t offset, unsigned width, Deadline deadline) {
  State::Call call(*s_);
  if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
    return fail(EINVAL, "config read: bad offset or width");
  auto r = s_->request(proto::ConfigRead{offset, static_cast<std::uint8_t>(width)}, deadline);
  if (!r) return tl::unexpected(r.error());
  auto st = status_check(r->status, r->text, "config read");
  if (!st) return tl::unexpected(st.error());
  std::lock_guard g(s_->lock);
  ++s_->stats.config_reads;
  return static_cast<std::uint32_t>(r->value);
}

Result<void> Attachment::config_write(std::uint16_t offset, unsigned width, std::uint32_t value, Deadline deadline) {
  State::Call call(*s_);
  if (!pci::access_valid(offset, width, pci::kConfigSpaceSize, pci::kConfigWidthMax))
    return fail(EINVAL, "config write: bad offset or width");
  if (width < 4 && (value >> (8 * width)) != 0) return fail(EINVAL, "config write: value wider than the access");
  auto r = s_->request(proto::ConfigWrite{offset, static_cast<std::uint8_t>(width), value}, deadline);
  if (!r) return tl::unexpected(r.error());
  auto st = status_check(r->status, r->text, "config write");
  if (!st) return st;
  std::lock_guard g(s_->lock);
  ++s_->stats.config_writes;
  return {};
}

namespace {
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

Result<std::uint64_t> Attachment::mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width, Deadline deadline) {
  State::Call call(*s_);
  auto ok = mmio_check(s_->device, bar, offset, width);
  if (!ok) return tl::unexpected(ok.error());
  auto r = s_->request(proto::MmioRead{bar, static_cast<std::uint8_t>(width), offset}, deadline);
  if (!r) return tl::unexpected(r.error());
  auto st = status_check(r->status, r->text, "MMIO read");
  if (!st) return tl::unexpected(st.error());
  std::lock_guard g(s_->lock);
  ++s_->stats.mmio_reads;
  return r->value;
}

Result<void> Attachment::mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value,
                                    Deadline deadline) {
  State::Call call(*s_, true);
  auto ok = mmio_check(s_->device, bar, offset, width);
  if (!ok) return ok;
  if (width < 8 && (value >> (8 * width)) != 0) return fail(EINVAL, "MMIO write: value wider than the access");
  if (auto e = s_->error_pending()) return tl::unexpected(*e);
  {
    std::lock_guard g(s_->lock);
    ++s_->stats.mmio_writes;
  }
  bool send_now = false;
  {
    std::lock_guard b(s_->batch_lock);
    s_->batch.writes.push_back({bar, static_cast<std::uint8_t>(width), offset, value});
    // The first write after pushed window bytes sends them too (the doorbell, typically).
    if (s_->batch.writes.size() == 1) {
      const auto now = Deadline::Clock::now();
      // A call that waited (it set last_call) ends a burst: the writes after it (the
      // acknowledge after an interrupt, the next doorbell) leave at once again. Counted per
      // kBatchDelay alone, a driver that rings a doorbell every few microseconds and waits
      // for each (shm: 5 us per edu command) had every fifth doorbell wait for the dispatcher.
      const Deadline::Clock::time_point waited{
          Deadline::Clock::duration(s_->last_call.load(std::memory_order_relaxed))};
      if (now - s_->eager_since > kBatchDelay || waited > s_->eager_since) {
        s_->eager_since = now;
        s_->eager_sent = 0;
      }
      s_->batch_since = now;
      s_->batch_pending.store(true, std::memory_order_relaxed);
      // Sent below through the batch, so that a write another thread queued meanwhile
      // leaves with it, in order.
      send_now = s_->eager_sent++ < kEagerWrites;
      if (!send_now) {
        // The dispatcher sends it if nothing else does first: parked on its condition
        // variable or asleep on the CQ wait fd (whose message_wait then ends at once).
        s_->dispatcher_cv.notify_one();
        if (s_->dispatcher_on_fd.load(std::memory_order_relaxed)) s_->session->channel().wake();
      }
    }
    send_now = send_now || s_->batch.writes.size() >= s_->batch_max;
  }
  if (send_now) return s_->batch_flush(deadline);
  return {};
}

Result<void> Attachment::window_push(std::uint64_t window_offset, std::uint64_t length, Deadline deadline) {
  // Up to kPushInline the push only joins the batch (posted); beyond, this thread waits for
  // its one-sided write to be taken, which is a call like a bulk transfer.
  State::Call call(*s_, !(s_->mirror && length > kPushInline));
  if (!s_->window_mr) return fail(EINVAL, "this attachment has no DMA window");
  if (window_offset > s_->window_mr->length() || length > s_->window_mr->length() - window_offset)
    return fail(EINVAL, "window push: range outside the DMA window");
  if (auto e = s_->error_pending()) return tl::unexpected(*e);
  if (!s_->mirror || length == 0) return {};  // the exporter reads the window itself
  {
    std::lock_guard g(s_->lock);
    s_->stats.window_bytes_pushed += length;
  }
  const auto* bytes = static_cast<const std::uint8_t*>(s_->window_mr->base()) + window_offset;
  // Earlier posted writes (and bytes) leave first: one of them may start DMA that must read
  // the old bytes.
  while (length <= kPushInline) {
    {
      std::lock_guard b(s_->batch_lock);
      if (s_->batch_empty()) {
        // Copied now: the device reads the bytes as they are at this call. They leave with
        // the next posted write (the doorbell), any other operation, or the background
        // thread's batch timer — no send and no thread wake-up of their own.
        s_->batch_push.assign(bytes, bytes + length);
        s_->batch_push_at = window_offset;
        s_->batch_since = Deadline::Clock::now();
        s_->batch_pending.store(true, std::memory_order_relaxed);
        return {};
      }
    }
    auto f = s_->batch_flush(deadline);
    if (!f) return f;
  }
  auto f = s_->batch_flush(deadline);
  if (!f) return f;
  // Later messages are ordered behind the write (FI_ORDER_SAW, or a delivery-complete write
  // where the provider lacks it), so the doorbell that follows finds the bytes in the mirror.
  auto& ch = s_->session->channel();
  auto r = ch.rma_write(*s_->window_mr, window_offset, *s_->mirror, window_offset, length, deadline);
  if (r) r = ch.rma_flush(deadline);
  if (!r) {
    s_->fail_with(Error{ErrorDomain::posix, EIO, "link to the exporter lost: " + r.error().describe()});
    return r;
  }
  std::lock_guard g(s_->lock);
  s_->posted_unconfirmed = true;
  return {};
}

Result<void> Attachment::flush(Deadline deadline) {
  // A config read of the vendor ID is the cheapest non-posted request: its reply proves
  // every earlier write performed (rule 2).
  State::Call call(*s_);
  auto r = s_->request(proto::ConfigRead{0, 2}, deadline);
  if (!r) return tl::unexpected(r.error());
  return {};
}

Result<void> Attachment::bar_write(std::uint8_t bar, std::uint64_t offset, std::span<const std::uint8_t> bytes,
                                   Deadline deadline) {
  State::Call call(*s_);
  auto b = s_->bulk_begin(bar, offset, bytes.size(), true, deadline);
  if (!b) return tl::unexpected(b.error());
  std::lock_guard sg(s_->staging_lock);
  auto& ch = s_->session->channel();
  for (std::size_t done = 0; done < bytes.size();) {
    const std::size_t n = std::min(bytes.size() - done, kStagingSize);
    std::memcpy(s_->staging->data(), bytes.data() + done, n);
    if ((*b)->direct) {
      auto remote = s_->session->peer_region(bar);
      if (!remote) return tl::unexpected(remote.error());
      auto w = ch.rma_write(*s_->staging_mr, 0, *remote, offset + done, n, deadline);
      if (w) w = ch.rma_flush(deadline);
      if (!w) return tl::unexpected(w.error());
    } else {
      auto bounce = s_->session->peer_region(proto::kRegionBounce);
      if (!bounce) return tl::unexpected(bounce.error());
      const std::size_t chunk = std::min<std::size_t>(n, bounce->length);
      for (std::size_t part = 0; part < n; part += chunk) {
        const std::size_t len = std::min(chunk, n - part);
        auto w = ch.rma_write(*s_->staging_mr, part, *bounce, 0, len, deadline, WriteCompletion::delivered);
        if (w) w = ch.rma_flush(deadline);
        if (!w) return tl::unexpected(w.error());
        auto r = s_->request(proto::BarCommit{bar, offset + done + part, len, 0}, deadline);
        if (!r) return tl::unexpected(r.error());
        auto st = status_check(r->status, r->text, "BAR write");
        if (!st) return st;
      }
    }
    done += n;
  }
  std::lock_guard g(s_->lock);
  s_->stats.bar_bytes_written += bytes.size();
  return {};
}

Result<void> Attachment::bar_read(std::uint8_t bar, std::uint64_t offset, std::span<std::uint8_t> bytes,
                                  Deadline deadline) {
  return bar_read_visit(
      bar, offset, bytes.size(),
      [&](std::uint64_t at, std::span<const std::uint8_t> piece) {
        std::memcpy(bytes.data() + at, piece.data(), piece.size());
      },
      deadline);
}

Result<void> Attachment::bar_read_visit(std::uint8_t bar, std::uint64_t offset, std::uint64_t length,
                                        const std::function<void(std::uint64_t, std::span<const std::uint8_t>)>& take,
                                        Deadline deadline) {
  State::Call call(*s_);
  auto b = s_->bulk_begin(bar, offset, length, false, deadline);
  if (!b) return tl::unexpected(b.error());
  std::lock_guard sg(s_->staging_lock);
  auto& ch = s_->session->channel();
  for (std::uint64_t done = 0; done < length;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(length - done, kStagingSize));
    if ((*b)->direct) {
      auto remote = s_->session->peer_region(bar);
      if (!remote) return tl::unexpected(remote.error());
      auto r = rma_read_pieces(ch, *s_->staging_mr, 0, *remote, offset + done, n, deadline);
      if (r) r = ch.rma_flush(deadline);
      if (!r) return tl::unexpected(r.error());
    } else {
      auto bounce = s_->session->peer_region(proto::kRegionBounce);
      if (!bounce) return tl::unexpected(bounce.error());
      const std::size_t chunk = std::min<std::size_t>(n, bounce->length);
      for (std::size_t part = 0; part < n; part += chunk) {
        const std::size_t len = std::min(chunk, n - part);
        proto::BarFetch f;
        f.bar = bar;
        f.offset = offset + done + part;
        f.length = len;
        auto rep = s_->request(f, deadline);
        if (!rep) return tl::unexpected(rep.error());
        auto st = status_check(rep->status, rep->text, "BAR read");
        if (!st) return st;
        auto r = ch.rma_read(*s_->staging_mr, part, *bounce, 0, len, deadline);
        if (r) r = ch.rma_flush(deadline);
        if (!r) return tl::unexpected(r.error());
      }
    }
    take(done, std::span<const std::uint8_t>(s_->staging->data(), n));
    done += n;
  }
  std::lock_guard g(s_->lock);
  s_->stats.bar_bytes_read += length;
  return {};
}

// Direct BAR <-> window transfer: the part the zero-copy variants share.
Result<void> Attachment::window_transfer(bool write, std::uint8_t bar, std::uint64_t offset,
                                         std::uint64_t window_offset, std::uint64_t length, Deadline deadline) {
  State::Call call(*s_);
  if (!s_->window_mr) return fail(EINVAL, "this attachment has no DMA window");
  auto b = s_->bulk_begin(bar, offset, length, write, deadline);
  if (!b) return tl::unexpected(b.error());
  if (!(*b)->direct) return fail(EOPNOTSUPP, "BAR " + std::to_string(bar) + " is not plain memory");
  auto remote = s_->session->peer_region(bar);
  if (!remote) return tl::unexpected(remote.error());
  auto& ch = s_->session->channel();
  Result<void> r{};
  if (write) {
    r = ch.rma_write(*s_->window_mr, window_offset, *remote, offset, length, deadline);
  } else {
    r = rma_read_pieces(ch, *s_->window_mr, window_offset, *remote, offset, length, deadline);
  }
  if (r) r = ch.rma_flush(deadline);
  if (!r) return r;
  std::lock_guard g(s_->lock);
  (write ? s_->stats.bar_bytes_written : s_->stats.bar_bytes_read) += length;
  return {};
}

Result<void> Attachment::bar_write_from_window(std::uint8_t bar, std::uint64_t offset, std::uint64_t window_offset,
                                               std::uint64_t length, Deadline deadline) {
  return window_transfer(true, bar, offset, window_offset, length, deadline);
}

Result<void> Attachment::bar_read_into_window(std::uint8_t bar, std::uint64_t offset, std::uint64_t window_offset,
                                              std::uint64_t length, Deadline deadline) {
  return window_transfer(false, bar, offset, window_offset, length, deadline);
}

std::uint64_t Attachment::interrupt_count(std::uint16_t vector) const {
  std::lock_guard g(s_->lock);
  return vector < s_->irq_counts.size() ? s_->irq_counts[vector] : 0;
}

Result<std::uint64_t> Attachment::interrupt_wait(std::uint16_t vector, std::uint64_t seen, Deadline deadline) {
  State::Call call(*s_);
  if (vector >= s_->device.vectors)
    return fail(EINVAL, "vector " + std::to_string(vector) + " does not exist (the device has " +
                            std::to_string(s_->device.vectors) + ")");
  auto f = s_->batch_flush(deadline);  // a doorbell may still sit in the batch
  if (!f) return tl::unexpected(f.error());
  auto w = s_->await([&] { return s_->irq_counts[vector] > seen; }, deadline);
  if (!w) return tl::unexpected(w.error());
  return interrupt_count(vector);
}

Result<void> Attachment::detach(Deadline deadline) {
  {
    std::lock_guard g(s_->lock);
    if (s_->detached) return fail(ENOTCONN, "already detached");
    s_->detached = true;
  }
  // Posted writes are performed before the goodbye: it travels on the bootstrap connection,
  // which nothing orders with the fabric.
  (void)s_->posted_settle(deadline);
  s_->threads_stop();
  std::lock_guard sg(s_->socket_lock);
  auto& sock = s_->session->bootstrap();
  Result<void> result{};
  auto sent = sock.message_send(proto::Goodbye{}, 0, deadline);
  if (!sent)
    result = tl::unexpected(sent.error());
  else {
    auto m = sock.message_recv(deadline);
    if (!m)
      result = tl::unexpected(m.error());
    else if (!std::holds_alternative<proto::Goodbye>(m->decoded.message))
      result = fail(EPROTO, std::string("detach: unexpected ") + proto::msg_type_name(m->decoded.header.type));
  }
  {
    std::lock_guard g(s_->lock);  // an orderly end, not a failure worth a warning
    if (!s_->failed) s_->failed = Error{ErrorDomain::posix, ENOTCONN, "detached"};
    s_->changed.notify_all();
  }
  return result;
}

void Attachment::listen(std::function<void()> listener) {
  std::lock_guard l(s_->listener_lock);
  s_->listener = std::move(listener);
}

std::optional<Error> Attachment::failure() const {
  std::lock_guard g(s_->lock);
  return s_->failed;
}

AttachmentStats Attachment::stats() const {
  std::lock_guard g(s_->lock);
  return s_->stats;
}

ChannelStats Attachment::channel_stats() const { return s_->session->channel().stats(); }

}  // namespace rpcie::client
