// Attachment::State: what one attachment is made of, shared by the files that implement the
// client API (attachment.cc: life cycle and register access; attachment_bulk.cc: memory-BAR
// transfers and streaming DMA). Internal to core.
//
// Parts: the Session (bootstrap socket + fabric channel), the ReplyRouter (replies,
// interrupts, the sticky failure), the PostedBatch (posted writes not yet sent), the
// Dispatcher (who receives, and its background thread) and the LeaseKeeper (heartbeats).
// The state itself holds the glue: sending a batch, a request and its reply, the start of a
// bulk transfer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>

#include "dispatcher.hpp"
#include "lease_keeper.hpp"
#include "operation_timer.hpp"
#include "posted_batch.hpp"
#include "reply_router.hpp"
#include "resend_queue.hpp"
#include "rpcie/client.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/session.hpp"
#include "send_lock.hpp"
#include "worker.hpp"

namespace rpcie::client {

// The staging buffer: registered memory that bulk transfers of callers' buffers go through.
inline constexpr std::uint32_t kStagingRegion = 1;  // local use only
inline constexpr std::size_t kStagingSize = 4u << 20;
// The most bytes of sent messages kept for a resume before posted writes are settled.
inline constexpr std::size_t kResendMax = 1u << 20;

// The Channel as the Dispatcher's Inbox. A resume replaces the channel (channel_set) while
// it holds the dispatcher's receive role; the lock keeps the dispatcher's background wait,
// which runs without the role, off a channel being replaced.
class ChannelInbox final : public Inbox {
 public:
  explicit ChannelInbox(Channel& channel) : channel_(&channel) {}
  Result<const proto::Decoded*> message_recv(Deadline deadline) override {
    std::shared_lock g(lock_);
    return channel_->message_recv(deadline);
  }
  Result<bool> message_wait(Deadline deadline, const std::function<bool()>& cancel) override {
    std::shared_lock g(lock_);
    return channel_->message_wait(deadline, cancel, false);  // background: spins only briefly
  }
  void wake() noexcept override {
    std::shared_lock g(lock_);
    channel_->wake();
  }
  void channel_set(Channel& channel) {
    std::unique_lock g(lock_);
    channel_ = &channel;
  }

 private:
  std::shared_mutex lock_;
  Channel* channel_;
};

struct Attachment::State {
  ExportDesc device;
  std::uint64_t id = 0;
  std::chrono::milliseconds lease{5000};
  std::string provider;
  // Where it is attached and how: what a resume connects with.
  std::string host;
  std::uint16_t port = 0;
  ClientOptions options;
  DmaWindow window;
  // The Session. Replaced only by a resume, which then holds the send lock, the receive role
  // and link_lock (exclusive); users under none of the first two hold link_lock shared.
  std::unique_ptr<Session> session;
  std::shared_timed_mutex link_lock;
  std::optional<HostBuffer> staging;
  const MemoryRegion* window_mr = nullptr;
  const MemoryRegion* staging_mr = nullptr;
  std::optional<RemoteRegion> mirror;  // the exporter's mirror, where window_push() writes
  std::mutex staging_lock;             // one bulk transfer through the staging buffer at a time

  std::unique_ptr<ReplyRouter> router;
  std::unique_ptr<PostedBatch> batch;
  // Batches and requests leave in the order of their ids (taken under it).
  SendLock send_lock;
  // Posted writes sent since the last reply proved them performed.
  std::atomic<bool> posted_unconfirmed{false};
  // Data-path messages sent and not yet proven performed: what a resume sends again.
  ResendQueue resend;
  Worker resumer;              // the resume's thread, asleep until a link is lost
  bool resume_wanted = false;  // resumer.lock()
  std::atomic<bool> detached{false};
  std::unique_ptr<ChannelInbox> inbox;
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<LeaseKeeper> lease_keeper;

  mutable std::mutex stats_lock;
  AttachmentStats stats;  // without interrupts and heartbeats: their parts count those
  // Lock-free, beside the locked stats: the calls' latencies and failures (client.hpp).
  struct Latency {
    LatencyHistogram mmio_read, config_read, config_write, flush, bar_read, bar_write;
  } latency;
  std::atomic<std::uint64_t> operations_failed{0};
  std::atomic<std::uint64_t> mmio_writes{0};  // counted by every posted write: no lock
  template <class Change>
  void stats_update(Change&& change) {
    std::lock_guard g(stats_lock);
    change(stats);
  }

  // The link to the exporter is gone: a resume starts (ReplyRouter::link_lost), or the
  // attachment fails.
  void link_fail(const Error& e);
  // Sends data-path message `m` with id `rid` and keeps it for a resume (send_lock held).
  Result<void> send_kept(const proto::Message& m, std::uint64_t rid, Deadline deadline);
  // Posted writes have no answers that would prove them performed: past kResendMax bytes
  // kept, a request's reply does (a round trip per that many bytes of posted writes).
  Result<void> resend_bound(Deadline deadline);
  // A bulk transfer `attempt` (taking link_lock shared): retried whole, once the link is
  // resumed, when it failed because the link was lost. Memory-BAR transfers are idempotent.
  Result<void> bulk_run(const std::function<Result<void>()>& attempt, Deadline deadline);
  // attachment_resume.cc: starts the resume's thread; the ReplyRouter's resumer wakes it.
  void resumer_start();
  void resume_run();
  Result<void> resume_once(Deadline deadline);
  // Sends the posted writes collected so far, in order (`only_if_due`: only when the oldest
  // has waited PostedBatch::kBatchDelay). Batches are taken under the batch's own lock (so
  // writers are never stuck behind a send) and sent under send_lock, which keeps them in
  // the order they were taken.
  Result<void> batch_flush(Deadline deadline, bool only_if_due = false);
  Result<void> batch_send_locked(Deadline deadline, bool only_if_due = false);  // send_lock held
  // Everything posted before is performed at the device (rule 2: a non-posted request does
  // not pass posted writes); for transfers that bypass the ordered queue.
  Result<void> posted_settle(Deadline deadline);
  // Sends a request after the posted writes and waits for its reply, across a resume of the
  // link unless `across_resume` is false (a bulk transfer's step, which holds link_lock: it
  // fails with ECONNRESET instead, and bulk_run retries the transfer once resumed).
  // An `observation` (device_telemetry) is no operation of the device: a posted write's error
  // is left for the next operation instead of reported by it.
  enum class RequestKind { operation, observation };
  Result<ReplyRouter::Reply> request(const proto::Message& m, Deadline deadline, bool across_resume = true,
                                     RequestKind kind = RequestKind::operation);
  // Start of every bulk transfer: range checks, earlier posted writes settled where the
  // transfer bypasses the ordered queue (direct BARs), a pending error reported.
  Result<const BarDesc*> bulk_begin(std::uint8_t bar, std::uint64_t offset, std::uint64_t length, bool write,
                                    Deadline deadline);
  void threads_stop();
  // window_push() writes into the exporter's mirror (streaming DMA): fixed at attach.
  bool pushes_to_mirror() const { return window.size && options.window_push && device.mirror; }

  // The Session over an authenticated socket that was answered (attach or resume): the
  // handshake with this client's regions (its window, the staging buffer), the first fabric
  // traffic and the exporter's verdict. `what` starts its errors.
  Result<std::unique_ptr<Session>> session_make(Socket sock, const std::string& what, Deadline deadline);
  // What points into a Session: checked before it is made the attachment's (session_set).
  struct SessionParts {
    const MemoryRegion* window_mr = nullptr;
    const MemoryRegion* staging_mr = nullptr;
    std::optional<RemoteRegion> mirror;
  };
  Result<SessionParts> session_parts(Session& made, const std::string& what);
  void session_set(std::unique_ptr<Session> next, const SessionParts& parts);
};

// A device-side status as an error ("what: text").
Result<void> status_check(std::int32_t status, const std::string& text, const char* what);

}  // namespace rpcie::client
