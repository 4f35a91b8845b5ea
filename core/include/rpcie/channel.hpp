// rpcie::Channel — messages and one-sided RMA to one peer over one Fabric.
//
// Ownership: a Channel owns its Fabric (endpoint, CQ, AV) and its message buffers; memory
// regions registered on channel.fabric() must be destroyed before the Channel.
//
// Thread-safety: all members may be called from any thread; an internal mutex serialises
// CQ polling and posting. Typical use is one application thread plus, on a side that is
// only an RMA target, one ProgressThread.
//
// Progress: providers here (tcp, rxm, shm) progress data only when the CQ is polled. The
// thread that waits for something polls the CQ itself (no hand-off on the latency path):
// it spins while completions keep coming (within `spin`) and then sleeps on the CQ wait fd
// (FabricOptions::cq_wait_fd), or, without one, backs off from 1 us to `backoff_max` — to
// `backoff_warm` only while the channel is warm (a message within `warm`), because a driver's
// bursts come tens of milliseconds apart and each would otherwise find its peer asleep for
// up to backoff_max (1 ms: a hundred shm round trips) before the first message is seen.
// Spinning is budgeted per process, across all Channels: at most the process's CPUs less one
// threads spin at once (RPCIE_SPIN_THREADS=N sets another number; 0: none); a waiter that
// finds the budget spent sleeps as an idle one does. So a daemon with many attachments does
// not have a spinning thread per busy attachment taking the CPUs its work needs. With
// ChannelOptions::yield_when_contended (the daemons), a spinner that keeps being preempted
// yields its CPU after each poll until it is left alone for 2 ms, and such spinners may
// take one thread per CPU (RPCIE_SPIN_THREADS, when set, is the number for both kinds).
//
// Ordering:
//  - Messages are delivered in send order (FI_ORDER_SAS, which every adapter requires).
//  - message_send_after_writes(): the message is handled at the peer only after every RMA
//    write posted earlier on this channel is visible there. With FI_ORDER_SAW granted it
//    is sent at once; otherwise writes are posted with FI_DELIVERY_COMPLETE and the send
//    waits for their completions first.
//  - RMA operations of one call are split into chunks of at most max_transfer bytes (the
//    provider's max_msg_size unless set lower); rma_flush() waits for all of them.
//
// Completion of writes — what rma_flush() promises:
//  - WriteCompletion::posted (default): like a PCIe posted write. The write is complete when
//    the provider has taken it (transmit complete); if the link dies before the target
//    performs it, it is lost and the channel fails: the next operation returns the error,
//    never a silent success. A later message_send_after_writes() is ordered behind it, and
//    a reply to that message proves delivery (as an MMIO read flushes posted writes) — on
//    this channel only: a link resumed over a new channel cannot tell what the old one lost.
//  - WriteCompletion::delivered: the write completes only once it is visible at the target
//    (FI_DELIVERY_COMPLETE). For data whose loss must be reported at flush time, and for
//    every write whose completion is reported to someone while a lost link may be resumed.
//  Without FI_ORDER_SAW every write is delivered-complete.
//
// Flow control: at most `window` RMA chunks and `send_buffers` messages are in flight; a
// post that finds the window full polls the CQ until a slot frees or the deadline passes.
//
// Authentication (seal_set): on a channel of an authenticated attachment every message is
// sealed (auth::MessageSeal: AEAD with a sequence number) on send and opened on receipt. A
// message that fails to open — forged, altered, replayed, reordered, or from another
// address — is dropped before anyone sees it: counted (ChannelStats), logged at a bounded
// rate, and the channel goes on. One-sided RMA is not covered (docs/security.md 5) unless
// it is sealed too:
//
// Sealed RMA (rma_seal; the sealed data path, data_path.hpp): rma_write, rma_read and
// rma_flush keep their contract, but nothing is registered for remote access and no fi_write
// or fi_read is posted. A write travels as sealed rma_put messages, a read as an rma_get
// answered by sealed rma_data messages; the peer's Channel serves them against its region
// table (SealedRegion: by key, with the access it grants, bounds checked) whenever it polls
// (any wait, progress() or a ProgressThread), out of band of the application's messages,
// which it keeps in their order in a queue of its own. Posted writes complete when sent;
// delivered writes when the peer's rma_done says they are in place. Writes and messages are
// one ordered stream, so message_send_after_writes() needs no flush. A refusal by the peer
// (no such region, no access, out of bounds) fails the channel, as a failed RMA completion
// does. Chunks are as large as the provider sends eagerly (sealed_chunk(): under
// ProviderAdapter::eager_max, at most proto::kMaxRmaBytes), so that no chunk waits for a
// rendezvous. Measured (rpcie-bench --device, sealed bar_write of 1 MiB): 16 KiB chunks
// (rxm's default) 0.96 GB/s; 60 KiB chunks eagerly (FI_OFI_RXM_BUFFER_SIZE=65600)
// 1.38-1.44 GB/s; 60 KiB chunks by rendezvous 0.18-0.78 GB/s. Larger rxm buffers cost
// memory per endpoint, so the default stays (providers/tcp/README.md).
//
// Errors: every wait takes a Deadline and fails with ETIMEDOUT when it passes. A failed
// completion (peer gone, key revoked, ...) makes the channel fail: that call and every later
// one return the error (EIO-class) — an operation is never reported complete when it was not.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <rdma/fabric.h>

#include "rpcie/channel_stats.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/fabric.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/message_seal.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

class LocalDoorbell;

enum class WriteCompletion { posted, delivered };

// A local region the peer may reach by sealed RMA (rma_seal). The memory must outlive the
// Channel (or the next rma_seal).
struct SealedRegion {
  std::uint64_t key = 0;  // what the peer names it by (its RegionDescriptor.key)
  std::uint8_t* base = nullptr;
  std::size_t length = 0;
  bool remote_read = false;   // the peer may rma_read it
  bool remote_write = false;  // the peer may rma_write it
};

// A peer's region as this side addresses it.
struct RemoteRegion {
  std::uint64_t address = 0;  // base for offset 0 (VA or 0, as the peer's mr_mode says)
  std::uint64_t length = 0;
  std::uint64_t key = 0;
  static RemoteRegion from(const proto::RegionDescriptor& d) noexcept { return {d.address, d.length, d.key}; }
};

struct ChannelOptions {
  std::size_t window = 64;        // RMA chunks in flight
  std::size_t recv_depth = 32;    // receive buffers kept posted
  std::size_t send_buffers = 16;  // message sends in flight (inject-sized sends need none)
  std::size_t max_transfer = 0;   // split RMA above this size; 0: provider's max_msg_size
  // Order write-then-message by delivery-complete writes even when the provider grants
  // FI_ORDER_SAW (the path efa takes); for tests and for providers whose SAW is suspect.
  bool delivery_complete_force = false;
  std::chrono::microseconds spin{2000};
  std::chrono::microseconds backoff_max{1000};
  // After a message, for `warm`, idle sleeps last at most `backoff_warm` (a thread sleeping
  // without a wait fd wakes ~20,000 times a second then: a few percent of a core, only while
  // the peer is in use).
  std::chrono::microseconds backoff_warm{50};
  std::chrono::milliseconds warm{100};
  // A spinning waiter that keeps being preempted yields its CPU after each poll
  // (SpinYield, core/src/spin_yield.hpp): for a daemon, whose spinning threads wait on
  // behalf of the threads that want their CPU (the programs it serves, its other
  // attachments). An application's threads compete with each other instead: there, yielding
  // made a waiter queue behind its own process's other thread (docs/performance.md).
  // Yielding spinners count against a budget of the process's CPUs, not its CPUs less one.
  bool yield_when_contended = false;
};

// How long a background receiver (message_wait(.., spin = false)) keeps polling after activity.
inline constexpr std::chrono::microseconds kBackgroundSpin{50};

class Channel {
 public:
  static Result<std::unique_ptr<Channel>> create(std::unique_ptr<Fabric> fabric, fi_addr_t peer,
                                                 const ChannelOptions& options = {});
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  Fabric& fabric() const noexcept { return *fabric_; }
  fi_addr_t peer() const noexcept { return peer_; }
  std::size_t max_transfer() const noexcept { return max_transfer_; }
  // Bytes of one sealed RMA chunk (rma_put / rma_data) on this channel.
  std::size_t sealed_chunk() const noexcept { return sealed_chunk_; }
  // True when write-then-message ordering waits for delivery-complete writes (no SAW).
  bool delivery_complete() const noexcept { return delivery_complete_ && !rma_sealed_; }
  // True when an RMA read posted after RMA writes is performed at the target after them
  // (Fabric::order_raw), so that its completion proves them there.
  bool order_raw() const noexcept;

  // Seals every message from now on (both directions). Call before the first message is
  // sent or received; the peer must do the same with the matching keys.
  void seal_set(std::unique_ptr<auth::MessageSeal> seal);
  bool sealed() const;
  // Carries RMA as sealed messages from now on, both as initiator and as target of the
  // regions given (Sealed RMA above). Needs seal_set() first (EINVAL otherwise); both sides
  // must do it before the first RMA. Calling it again replaces the region table.
  Result<void> rma_seal(std::vector<SealedRegion> regions);
  bool rma_sealed() const;

  // Sends one message. Returns once it is posted (its bytes are copied); delivery order is
  // send order.
  Result<void> message_send(const proto::Message& message, std::uint64_t request_id, Deadline deadline);
  // Sends `message` so that the peer handles it only after all earlier RMA writes are visible.
  Result<void> message_send_after_writes(const proto::Message& message, std::uint64_t request_id, Deadline deadline);
  // Sends bytes that are already one encoded message (forwarding, and tests that must put
  // malformed input on the wire). At most proto::kMaxMessage bytes.
  Result<void> bytes_send(std::span<const std::uint8_t> bytes, Deadline deadline);
  // The largest message (encoded, before sealing) that bytes_send() injects: it needs no send
  // buffer, and the provider moves it without the peer's help (shm: a larger one waits for
  // the peer to copy it).
  std::size_t inject_max() const;
  // Waits for the next message. The returned pointer is valid until the next
  // message_recv() on this channel. A message that fails to decode is dropped, counted and
  // reported as EPROTO; the channel stays usable.
  Result<const proto::Decoded*> message_recv(Deadline deadline);

  // One-sided transfers between local [local_offset, +length) and the peer's region at
  // remote_offset. Bounds are checked against both regions (EINVAL). Returns once every
  // chunk is posted; use rma_flush() to wait for completion.
  Result<void> rma_write(const MemoryRegion& local, std::size_t local_offset, const RemoteRegion& remote,
                         std::uint64_t remote_offset, std::size_t length, Deadline deadline,
                         WriteCompletion completion = WriteCompletion::posted);
  Result<void> rma_read(const MemoryRegion& local, std::size_t local_offset, const RemoteRegion& remote,
                        std::uint64_t remote_offset, std::size_t length, Deadline deadline);
  // Waits until every RMA chunk posted so far has completed.
  Result<void> rma_flush(Deadline deadline);

  // Waits until a message is ready for message_recv() (true), the deadline passes, or
  // `cancel` returns true (false; it is asked after every poll, so keep it cheap).
  // Progresses the CQ meanwhile, with the same spin-then-sleep policy as progress_idle(), so
  // a dispatcher thread can use it as its progress loop and stand aside while another
  // thread receives.
  // `spin` false: busy-poll only briefly after activity (kBackgroundSpin, enough for the
  // provider to finish moving a message: tcp needs several polls), then sleep on the wait
  // fd — for a background receiver on the compute side, whose full spin would take the CPU
  // from the application it serves (measured: an interrupt reached a poll() on the same
  // core ~2 ms late, one scheduler slice, while the receiver spun).
  Result<bool> message_wait(Deadline deadline, const std::function<bool()>& cancel = {}, bool spin = true);

  // Wakes a thread sleeping on the CQ wait fd in message_wait() / progress_idle(), so that
  // it re-checks its cancel condition now (fi_cq_signal). No effect without a wait fd.
  // Set the condition first (a seq_cst store, or one under a lock the condition takes): a
  // waiter about to sleep may have reset the signal, and then finds only the condition.
  void wake() noexcept;

  // One non-blocking pass over the CQ. Error if the channel has failed.
  Result<void> progress();
  // Progress for a side that waits for nothing in particular (ProgressThread): polls, and if
  // idle, sleeps on the wait fd (or backs off) until `deadline`, or until work appears.
  Result<void> progress_idle(Deadline deadline);

  std::size_t rma_in_flight() const;
  ChannelStats stats() const;
  // The sticky error, if the channel has failed.
  std::optional<Error> failure() const;
  // Gives the channel up (its owner found the link lost elsewhere, e.g. a heartbeat): every
  // call in progress or to come fails with ECONNABORTED at its next poll or retry instead of
  // waiting out its deadline on a link the provider has not yet seen die. Thread-safe,
  // lock-free (a sender may hold the channel's lock while it retries).
  void abort() noexcept;

 private:
  struct Op;
  struct Sealed;
  struct RecvDone;
  enum class RmaKind { write, read };
  Channel();
  Result<void> rma_post(RmaKind kind, const MemoryRegion& local, std::size_t local_offset, const RemoteRegion& remote,
                        std::uint64_t remote_offset, std::size_t length, Deadline deadline, bool delivered);
  Result<void> recv_post_locked(Op& op);
  // One rma window slot for a chunk (waits for one until the deadline), counted in flight.
  Result<Op*> rma_slot_take(std::unique_lock<std::mutex>& held, std::size_t chunk, bool write, Deadline deadline);
  void rma_count_locked(bool write, std::size_t chunk);  // a chunk posted: ChannelStats
  Result<Op*> slot_take(std::unique_lock<std::mutex>& held, std::vector<Op*>& pool, Deadline deadline,
                        const char* what);
  Result<void> poll_locked();  // reaps the CQ, then (sealed RMA) serves what arrived
  // Between tries of a post the provider refused (-FI_EAGAIN): polls, and once the refusals
  // have lasted past a spin, sleeps a little (channel_wait.cc). `first_refusal` is set at the
  // first retry: a post that is taken at once reads no clock (a clock read costs ~50 ns here,
  // a tenth of shm's round trip, and every message posts a send and a receive).
  Result<void> post_retry_locked(std::optional<Deadline::Clock::time_point>& first_refusal);
  Result<void> cq_reap_locked();
  Result<const proto::Decoded*> last_message_decode_locked();
  bool message_ready_locked();
  bool recv_authentic_locked(RecvDone& head);
  // Sealed RMA (channel_rma_sealed.cc).
  Result<void> rma_post_sealed(RmaKind kind, const MemoryRegion& local, std::size_t local_offset,
                               const RemoteRegion& remote, std::uint64_t remote_offset, std::size_t length,
                               Deadline deadline, bool delivered);
  Result<void> sealed_chunk_post(std::unique_lock<std::mutex>& held, const proto::Message& m, std::uint64_t tag,
                                 Op* linked, Deadline deadline);
  Result<bool> sealed_try_post_locked(const proto::Message& m, std::uint64_t tag, Op* linked);
  void sealed_drain_locked();
  void sealed_message_locked(std::span<std::uint8_t> plain);
  // The peer's rma_* messages, one kind each (channel_rma_sealed.cc).
  void sealed_put_serve_locked(std::uint64_t tag, const proto::RmaPut& put);
  void sealed_get_serve_locked(std::uint64_t tag, const proto::RmaGet& get);
  void sealed_data_take_locked(std::uint64_t tag, const proto::RmaData& data);
  void sealed_done_take_locked(std::uint64_t tag, const proto::RmaDone& done);
  void sealed_refuse_locked(std::uint64_t tag, int code, const char* what);
  void sealed_answer_locked();
  void sealed_complete_locked(Op& op);
  Result<const proto::Decoded*> sealed_recv_locked();
  void completion_locked(Op& op, std::size_t length, bool foreign = false);
  void fail_locked(Error e);
  void busy_poll_calibrate_locked();
  template <class Ready>
  Result<void> wait_until(Ready&& ready, Deadline deadline, const char* what);
  // `recheck` (takes the lock itself): whether the wait is over after all, asked after the
  // CQ's trywait and before sleeping on its fd.
  bool idle_sleep(Deadline deadline, int& idle_round, const std::function<bool()>& recheck);
  // The longest sleep on the CQ wait fd: every event a waiter waits for signals the fd
  // (a completion, the peer's traffic, wake()), so this only bounds what a lost one costs:
  // kWaitFdSliceBusyMs within kWaitFdBusyWindow of the channel's last activity (warm_until_),
  // kWaitFdSliceMaxMs once it has been quiet that long (an idle attachment's wake-ups).
  static constexpr int kWaitFdSliceMaxMs = 1000;
  static constexpr int kWaitFdSliceBusyMs = 50;
  static constexpr auto kWaitFdBusyWindow = std::chrono::seconds(2);
  template <class Ready>
  // `spin_for`: how long activity keeps the thread busy-polling (options_.spin unless given;
  // zero never spins).
  Result<bool> poll_until(Ready&& ready, Deadline deadline, Deadline::Clock::time_point spin_end, bool carry = false,
                          std::optional<std::chrono::microseconds> spin_for = std::nullopt);

  std::unique_ptr<Fabric> fabric_;
  fi_addr_t peer_ = FI_ADDR_UNSPEC;
  // The peer's doorbell (Fabric::doorbell), rung after each post; null where it has none.
  std::unique_ptr<LocalDoorbell> peer_bell_;
  void peer_bell_open();
  void peer_ring() noexcept;
  ChannelOptions options_;
  std::size_t max_transfer_ = 0;
  std::size_t sealed_chunk_ = proto::kMaxRmaBytes;
  bool delivery_complete_ = false;

  mutable std::mutex lock_;
  std::optional<HostBuffer> message_memory_;
  std::optional<MemoryRegion> message_region_;
  std::vector<std::unique_ptr<Op>> ops_;  // owns every Op; contexts point into them
  std::vector<Op*> send_free_;
  std::vector<Op*> rma_free_;
  // Completed receives by posting order (ring of recv_depth), delivered in that order.
  std::vector<RecvDone> recv_done_;
  std::uint64_t recv_posted_seq_ = 0;
  std::uint64_t recv_next_seq_ = 0;
  std::vector<std::uint8_t> last_message_;
  proto::Decoded last_decoded_;
  std::size_t rma_in_flight_ = 0;
  std::size_t sends_in_flight_ = 0;
  std::optional<Error> failure_;
  std::atomic<bool> aborted_{false};         // abort(): failure_ is set at the next poll
  std::unique_ptr<auth::MessageSeal> seal_;  // set: every message sealed / opened
  std::unique_ptr<Sealed> sealed_rma_;       // set (with rma_sealed_): RMA as sealed messages
  bool rma_sealed_ = false;
  // Where bytes_send() seals a message it injects (under lock_, which it holds until posted):
  // as large as the provider injects, up to kSealStagingMax, so that sealing costs no inject.
  std::vector<std::uint8_t> seal_staging_;
  // inject_max(): set at create() and by seal_set(); read without the lock (per push).
  std::atomic<std::size_t> inject_max_{0};
  ChannelStats stats_;
  std::uint64_t completions_ = 0;  // CQ entries seen: activity for the spin heuristic
  Deadline::Clock::duration busy_poll_ = std::chrono::microseconds(2);  // a poll slower moved data
  // End of the spin window when progress_idle() last returned (steady_clock ticks).
  std::atomic<Deadline::Clock::rep> activity_until_{0};
  // The idle back-off level when progress_idle() / message_wait() last returned: a thread
  // that calls them in slices continues its back-off instead of restarting it at 1 us.
  std::atomic<int> idle_round_{0};
  // Until when idle sleeps are capped at options_.backoff_warm (steady_clock ticks): the last
  // message or completion seen + options_.warm.
  std::atomic<Deadline::Clock::rep> warm_until_{0};
  void warm_extend(Deadline::Clock::time_point now) noexcept {
    warm_until_.store((now + options_.warm).time_since_epoch().count(), std::memory_order_relaxed);
  }
};

// Drives a Channel's progress from a thread of its own, for a side that is only the target
// of one-sided RMA (nobody else polls its CQ). It spins while data moves (completions, or
// polls in which the provider did work) and, once idle for `spin`, sleeps on the CQ wait fd
// if the fabric has one (FabricOptions::cq_wait_fd) or backs off up to `backoff_max`.
// Stops and joins on destruction (within ~50 ms). The Channel must outlive it.
class ProgressThread {
 public:
  explicit ProgressThread(Channel& channel);
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace rpcie
