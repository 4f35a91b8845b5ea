// PostedBatch: the posted MMIO writes of one attachment that have not left yet, and the rule
// for when they leave (client.hpp, mmio_write: "sent within 20 us or by the next operation,
// the first few writes of a burst at once").
//
// Writes are coalesced into one mmio_write_batch until the batch is full, another operation
// needs them out, or the oldest has waited kBatchDelay (a driver that writes a doorbell and
// then polls host memory must not wait for more). The first kEagerWrites writes of a burst
// leave at once from the writer's thread, because a batch that waits needs the dispatcher
// thread to send it, and waking that thread costs more than the send (on tcp with the client
// on one CPU, about as long as a whole edu DMA command). Pushed window bytes (window_push)
// wait here too and leave in one message with the writes queued after them.
//
// What a burst is, is measured in the application's time only: the gaps between the last
// batch leaving (or its writer's send ending: write_end()) and the next write, never the
// time a writer spent sending. Otherwise a slow send would itself end the burst, and on a
// fabric whose sends take longer than kBatchDelay / kEagerWrites every write would leave
// alone. A burst ends at a call that waited (a read, interrupt_wait) or a gap of
// kBatchDelay. Within one, each kBatchDelay of those gaps is a window with up to
// kEagerWrites eager writes, unless the window before held more writes than that: a
// stream, whose writes batch. Only the first write of a batch reads the clock (a clock read
// costs ~60 ns on this VM, a third of a queued write); the writes that join it only count.
//
// Thread-safety: every member may be called from any thread; one internal mutex, held only to
// add or take (never while sending). pending() is lock-free, for the dispatcher's loop.
// Times are passed in, so that the rules are testable without a clock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "rpcie/deadline.hpp"
#include "rpcie/protocol.hpp"

namespace rpcie::client {

class PostedBatch {
 public:
  using Clock = Deadline::Clock;
  static constexpr auto kBatchDelay = std::chrono::microseconds(20);
  static constexpr int kEagerWrites = 4;

  // `writes_max`: writes per batch (writes_max_for() of the attachment's channel).
  explicit PostedBatch(std::size_t writes_max = proto::kMaxBatch) : writes_max_(writes_max) {}

  // Writes per mmio_write_batch for a channel that injects messages of up to `inject_size`
  // bytes (Channel::inject_max()): as many as fit in one inject where that is large (shm:
  // 4 KiB, 226 writes, 224 sealed), so that posting never waits for the peer (a larger shm
  // send is segmented and moves only while both ends progress, and the posting thread does
  // not poll); else proto::kMaxBatch (tcp injects only 64 bytes, and its eager sends of a
  // few KiB complete locally).
  static std::size_t writes_max_for(std::size_t inject_size);

  // A push and the writes after it leave in one window_push message, unless that message
  // would not be injected where injects are large (shm: 4 KiB, which a 4 KiB push with its
  // header outgrows; a larger shm send waits for the exporter to copy it out): then pieces of
  // the bytes go ahead, each in a window_push of its own, so that every message fits in
  // `inject` bytes, the last (the rest of the bytes, then the writes) too; the exporter
  // performs them in order. Returns the pieces' sizes, in order; empty: one message (it
  // fits, injects are under kPushSplitInjectMin (tcp: 64 B), or the writes alone fill one).
  static constexpr std::size_t kPushSplitInjectMin = 1024;
  static std::vector<std::size_t> push_pieces_ahead(std::size_t inject, std::size_t length, std::size_t writes);

  // Of the writes that join a batch, every kDueCheckEvery-th reads the clock: a due batch is
  // then sent by its writer, so that a stream of writes needs no dispatcher to send it (on
  // a CPU that the writer shares with the dispatcher, each hand-off preempts the writer).
  static constexpr std::size_t kDueCheckEvery = 16;

  struct Added {
    bool send_now = false;  // the writer sends the batch itself (eager, due, or the batch is full)
    bool wake = false;      // a new batch that waits: the dispatcher must come to send it by `due`
    Clock::time_point due{};
  };
  // Queues one write. `now()` is asked for the first write of a batch and every
  // kDueCheckEvery-th after it; `waited()` (when the last call that waited ended: it ends the
  // burst) only for the first.
  template <class Now, class Waited>
  Added write_add(const proto::MmioWrite& write, Now&& now, Waited&& waited) {
    std::lock_guard g(lock_);
    writes_.push_back(write);
    ++window_.writes;
    Added out;
    if (writes_.size() == 1)
      out = batch_start_locked(now(), waited());
    else if (writes_.size() % kDueCheckEvery == 0)
      out.send_now = now() - since_ >= kBatchDelay;
    out.send_now = out.send_now || writes_.size() >= writes_max_;
    return out;
  }
  // The writer that was told send_now finished sending at `now`: the burst's application time
  // resumes from here.
  void write_end(Clock::time_point now);

  // Queues one write of a burst whose sender sends the batch itself (no eager send, no
  // dispatcher wake-up). true: the batch is full, send it before queueing more.
  bool burst_add(const proto::MmioWrite& write, Clock::time_point now);

  // Takes a copy of `bytes` for window offset `at` when the batch is empty (true); false
  // when writes or bytes wait already (send them first: the push is ordered after them).
  bool push_set(std::span<const std::uint8_t> bytes, std::uint64_t at, Clock::time_point now);

  struct Taken {
    std::vector<proto::MmioWrite> writes;  // in the order they were added
    std::vector<std::uint8_t> push;        // window bytes, sent before the writes; may be empty
    std::uint64_t push_at = 0;
  };
  // Everything waiting, in order, leaving the batch empty; nullopt when empty or, with
  // `only_if_due`, when the oldest entry is younger than kBatchDelay.
  std::optional<Taken> take(Clock::time_point now, bool only_if_due = false);

  // When the waiting entries are due (the oldest's arrival + kBatchDelay); nullopt if empty.
  std::optional<Clock::time_point> due() const;
  bool pending() const noexcept { return pending_.load(std::memory_order_relaxed); }

 private:
  // The first write of a batch, at `now`: moves the burst on (a new burst, a new window, or
  // the same) and decides whether the writer sends it. The first write after pushed window
  // bytes starts the batch too (the doorbell, typically).
  Added batch_start_locked(Clock::time_point now, Clock::time_point waited);
  bool empty_locked() const { return writes_.empty() && push_.empty(); }

  const std::size_t writes_max_;
  mutable std::mutex lock_;
  std::vector<proto::MmioWrite> writes_;
  std::vector<std::uint8_t> push_;
  std::uint64_t push_at_ = 0;
  Clock::time_point since_{};     // arrival of the oldest waiting entry
  Clock::time_point last_end_{};  // the last batch start, take, or writer's send end
  struct Window {
    Clock::time_point start{};  // its first write
    Clock::duration app{};      // application time in it
    int writes = 0;             // writes queued in it
    int eager = 0;              // of them, sent eagerly
    bool stream = false;        // the window before held more than kEagerWrites writes
  } window_;
  std::atomic<bool> pending_{false};
};

}  // namespace rpcie::client
