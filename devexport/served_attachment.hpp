// The data path of one attachment, device-server side.
//
// A ServedAttachment owns a Session (fabric endpoint; memory regions offered to the client:
// the BARs that are plain memory and a bounce buffer) and one data thread that performs the
// client's requests in the order they arrive (the ordered queue of ARCHITECTURE.md section
// 1). To the device it is the DmaPort and the IrqSink:
//  - on-demand DMA: one-sided RMA to the client's window through a staging buffer;
//  - mirror DMA: a local copy of the window. Device writes land in it and are recorded as
//    dirty ranges, pushed to the client before the next interrupt or read reply (rule 4);
//    before a doorbell the whole window is pulled (rule 3), unless the client pushes what
//    the device will read (window_push);
//  - interrupts leave as messages behind the DMA writes that came before them.
//
// Life cycle: construct, setup() once (from the connection's thread), teardown() once or
// let the destructor do it. failed() turns true when the fabric fails or a reply or
// interrupt cannot be delivered; the control side then parks the attachment or ends it.
//
// Resumption (docs/reliability.md, "Resumption"): park() keeps an attachment whose link was
// lost: its data thread stops and its Session goes (the client's memory keys with it), while
// the device, the buffers, the mirror with its dirty ranges, the interrupt counts and the
// record of what was performed (PerformedLog) stay. resume() goes on over a new connection of
// the same client. While the link is lost, on-demand DMA fails with EAGAIN (the device keeps
// the transfer; the data thread runs the device's due work again after the resume) and
// interrupts are counted, to be delivered after it (an interrupt carries its count).
// park(), resume() and teardown() are called from the control side's one thread.
//
// Threads and locks: requests run on the data thread; the backend calls the DmaPort and
// IrqSink from the data thread (work that runs inline) or from its own threads. The lock
// order is the link lock (shared by the data thread and by port calls that use the Session,
// exclusive to swap it), then ExportSlot::calls, then the interrupt lock, then the DMA lock
// (staging buffer, mirror and its dirty ranges).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "access_log.hpp"
#include "attachment_requests.hpp"
#include "backend.hpp"
#include "dirty_ranges.hpp"
#include "export_slot.hpp"
#include "performed_log.hpp"
#include "rpcie/channel_stats.hpp"
#include "rpcie/event_fd.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/session.hpp"

namespace rpcie::dev {

class ServedAttachment final : public DmaPort, public IrqSink, private RequestLink {
 public:
  // `window_size`: the client's DMA window (0: none). `pushed`: the client pushes what the
  // device is to read (proto::kAttachWindowPush); meaningful for a mirror only.
  // `access_log`: where every MMIO access performed on the device is recorded (null: none);
  // it must outlive the attachment. `data_nice`: the data thread's nice value (exportd's
  // `data-nice`; rpcie/thread_sched.hpp says why), nullopt: the daemon's own.
  ServedAttachment(ExportSlot& slot, std::uint64_t id, std::uint64_t window_size, bool pushed,
                   AccessLog* access_log = nullptr, std::optional<int> data_nice = std::nullopt);
  ~ServedAttachment() override;
  ServedAttachment(const ServedAttachment&) = delete;
  ServedAttachment& operator=(const ServedAttachment&) = delete;

  // Buffers, the Session handshake on `socket` (hello from the client), the warm-up ping,
  // device attach, data thread. `first`: this attachment is the device's first holder (it
  // attaches the device). On failure has_session() says whether `socket` went into a
  // Session (and is reachable through bootstrap()).
  Result<void> setup(Socket socket, const SessionOptions& options, bool first, Deadline deadline);

  // Ends the attachment: no more requests, device detached (and reset) if `last`, memory
  // keys closed with the session. Idempotent.
  void teardown(bool last);

  // Gives the link up at once: a reply, interrupt or DMA under way on it (which may hold the
  // Channel's lock, retrying a post on a dead connection until its deadline) fails now, so
  // that what the control side does next (counters, park()) is not kept waiting. Idempotent.
  void link_abort();

  // Keeps the attachment after its link was lost: the data thread stops (link_abort() first),
  // the Session is closed. Waits for port calls that use the Session (bounded by their
  // deadlines).
  void park();
  // Goes on over `socket`, a new authenticated connection of the same client, which asked
  // with `request` (request id `rid`): resume_reply with what was performed, the Session
  // handshake with the same regions, the verdict, then the answers the client has not seen
  // and the interrupts raised while parked; the data thread starts again. ENOENT (told to
  // the client) when an answer it has not seen is no longer kept. On an error the
  // attachment stays parked and the caller ends it.
  Result<void> resume(Socket socket, const proto::ResumeRequest& request, std::uint64_t rid,
                      const SessionOptions& options, Deadline deadline);

  // The bootstrap connection, once setup() made the Session.
  Socket& bootstrap() { return session_->bootstrap(); }
  bool has_session() const { return session_ != nullptr; }
  // The data channel's counters so far (all zero before setup() made the Session).
  ChannelStats channel_stats() const { return session_ ? session_->channel().stats() : ChannelStats{}; }
  // Data-path messages dropped so far: from another address, forged or replayed.
  std::uint64_t messages_refused() const {
    const ChannelStats c = channel_stats();
    return c.messages_foreign + c.messages_forged + c.messages_replayed;
  }
  bool failed() const { return failed_.load(); }
  // Readable once failed() has turned true (the control side polls it beside the bootstrap
  // connection, and drains it).
  int failure_fd() const noexcept { return failure_news_.fd(); }
  void failure_drain() const noexcept { failure_news_.drain(); }
  std::uint64_t id() const { return id_; }

  // DmaPort
  std::uint64_t window_size() const noexcept override { return window_size_; }
  Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline deadline) override;
  Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline deadline) override;

  // IrqSink
  void irq_raise(std::uint16_t vector) override;

 private:
  bool window_contains(std::uint64_t iova, std::size_t length) const;
  // The Session for a port call, held (link lock, shared) until the lock is dropped; waits
  // while the attachment is parked, until `deadline`.
  // The link lock (shared) for a port call; not locked again (empty) on the data thread,
  // which holds it already.
  std::shared_lock<std::shared_mutex> link_share();
  // A failed on-demand transfer: EAGAIN (try again after the resume) when the link is lost,
  // EIO otherwise.
  Result<void> dma_failed(const char* what, const Error& e);
  // Sends interrupt `vector`'s count (irq lock held) behind the device's writes (rule 4).
  Result<void> irq_send_locked(std::uint16_t vector, Deadline deadline);
  // The Session handshake over `socket`, the warm-up ping and the client's window.
  Result<std::unique_ptr<Session>> session_open(Socket socket, const SessionOptions& options, Deadline deadline,
                                                RemoteRegion& window);
  void data_start();
  Result<void> mirror_push(Deadline deadline);
  Result<void> mirror_push_locked(Deadline deadline);
  Result<void> window_pull_locked();
  // Writes into the client's window are proven there before they count (resumption): how
  // they are posted, and the wait that proves those posted so far (served_attachment.cc).
  WriteCompletion window_write_completion() const;
  Result<void> window_writes_prove(std::size_t local_at, std::uint64_t iova, Deadline deadline);
  // RequestLink: what the requests (requests_) need from this data path.
  Result<void> reply_send(const proto::Message& m, std::uint64_t rid) override;
  Result<void> error_send(int code, const std::string& text, std::uint64_t rid) override;
  Result<void> doorbell_prepare() override;
  Result<void> window_fill(std::uint64_t iova, std::span<const std::uint8_t> bytes) override;
  proto::TelemetryReply telemetry() const override { return activity_.telemetry(); }
  // A device transfer or interrupt that took from `since` until now, and a transfer's bytes:
  // recorded for the export (slot_.counters) and for this attachment (activity_).
  void latency_record(ExportCounters::Latency op, std::chrono::steady_clock::time_point since) noexcept;
  void dma_bytes_add(bool written, std::uint64_t bytes) noexcept;
  // Keeps the encoded answer to request `rid` (answer_) for the PerformedLog.
  void answer_keep(const proto::Message& m, std::uint64_t rid);
  void request_handle(const proto::Decoded& d);
  void data_run();
  void data_loop();
  // failed() turns true, and the control side hears of it.
  void failure_mark() noexcept {
    failed_.store(true);
    failure_news_.post();
  }
  // Joins the data thread, reporting every kTeardownReport what it is still doing.
  void data_thread_end();

  ExportSlot& slot_;
  DeviceActivity activity_;  // this attachment's alone; the export's add up all of its own
  std::uint64_t id_;
  std::uint64_t window_size_;
  bool mirror_;
  bool pushed_;
  AttachmentRequests requests_;
  std::vector<LocalRegion> regions_;  // offered to the client, at setup and at every resume
  std::shared_mutex link_lock_;       // session_, window_ and local_mr_ against their swap
  std::unique_ptr<Session> session_;
  std::optional<HostBuffer> bounce_;
  std::optional<HostBuffer> local_;  // staging (on-demand) or mirror
  const MemoryRegion* local_mr_ = nullptr;
  RemoteRegion window_{};
  std::mutex dma_lock_;  // staging / mirror and its dirty ranges
  DirtyRanges dirty_;
  std::mutex irq_lock_;
  std::vector<std::uint64_t> irq_counts_;  // raised, per vector
  // What the data thread performed, and the answers (only it records; park() and resume()
  // read it while it is stopped).
  PerformedLog performed_;
  std::vector<std::uint8_t> answer_;  // the encoded answer to the request being performed
  std::mutex park_lock_;
  std::condition_variable park_changed_;
  bool parked_ = false;              // park_lock_
  bool pulled_ = false;              // data thread: the window was pulled for the message being performed
  std::atomic<bool> ending_{false};  // teardown began: port calls fail at once
  std::atomic<bool> stop_{false};    // the data thread is to stop (park or teardown)
  std::atomic<bool> failed_{false};
  EventFd failure_news_;  // posted when failed_ turns true
  // What the data thread is doing (a static string), for teardown's report when it is slow;
  // stored relaxed: three stores per request on the data path, read only for a log line.
  std::atomic<const char*> data_doing_{"not started"};
  std::mutex data_end_lock_;
  std::condition_variable data_ended_;
  bool data_done_ = false;  // data_run returned (data_end_lock_)
  const std::optional<int> data_nice_;
  std::thread data_thread_;
};

}  // namespace rpcie::dev
