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
// interrupt cannot be delivered; the control side then ends the attachment.
//
// Threads and locks: requests run on the data thread; the backend calls the DmaPort and
// IrqSink from the data thread (work that runs inline) or from its own threads. The lock
// order is ExportSlot::calls, then the interrupt lock, then the DMA lock (staging buffer,
// mirror and its dirty ranges).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "access_log.hpp"
#include "attachment_requests.hpp"
#include "backend.hpp"
#include "dirty_ranges.hpp"
#include "export_slot.hpp"
#include "rpcie/channel_stats.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/session.hpp"

namespace rpcie::dev {

class ServedAttachment final : public DmaPort, public IrqSink, private RequestLink {
 public:
  // `window_size`: the client's DMA window (0: none). `pushed`: the client pushes what the
  // device is to read (proto::kAttachWindowPush); meaningful for a mirror only.
  // `access_log`: where every MMIO access performed on the device is recorded (null: none);
  // it must outlive the attachment.
  ServedAttachment(ExportSlot& slot, std::uint64_t id, std::uint64_t window_size, bool pushed,
                   AccessLog* access_log = nullptr);
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
  std::uint64_t id() const { return id_; }

  // DmaPort
  std::uint64_t window_size() const noexcept override { return window_size_; }
  Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline deadline) override;
  Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline deadline) override;

  // IrqSink
  void irq_raise(std::uint16_t vector) override;

 private:
  bool window_contains(std::uint64_t iova, std::size_t length) const;
  Result<void> mirror_push(Deadline deadline);
  Result<void> mirror_push_locked(Deadline deadline);
  Result<void> window_pull_locked();
  // RequestLink: what the requests (requests_) need from this data path.
  Result<void> reply_send(const proto::Message& m, std::uint64_t rid) override;
  Result<void> error_send(int code, const std::string& text, std::uint64_t rid) override;
  Result<void> doorbell_prepare() override;
  Result<void> window_fill(std::uint64_t iova, std::span<const std::uint8_t> bytes) override;
  void request_handle(const proto::Decoded& d);
  void data_run();
  void data_loop();
  // Joins the data thread, reporting every kTeardownReport what it is still doing.
  void data_thread_end();

  ExportSlot& slot_;
  std::uint64_t id_;
  std::uint64_t window_size_;
  bool mirror_;
  bool pushed_;
  AttachmentRequests requests_;
  std::unique_ptr<Session> session_;
  std::optional<HostBuffer> bounce_;
  std::optional<HostBuffer> local_;  // staging (on-demand) or mirror
  const MemoryRegion* local_mr_ = nullptr;
  RemoteRegion window_{};
  std::mutex dma_lock_;  // staging / mirror and its dirty ranges
  DirtyRanges dirty_;
  std::mutex irq_lock_;
  std::vector<std::uint64_t> irq_counts_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  // What the data thread is doing (a static string), for teardown's report when it is slow;
  // stored relaxed: three stores per request on the data path, read only for a log line.
  std::atomic<const char*> data_doing_{"not started"};
  std::mutex data_end_lock_;
  std::condition_variable data_ended_;
  bool data_done_ = false;  // data_run returned (data_end_lock_)
  std::thread data_thread_;
};

}  // namespace rpcie::dev
