// Raw-libfabric baseline for rpcie-bench: what raw_setup.cc (opening the fabric, the
// endpoint and the buffers; the address exchange) and raw_loop.cc (the busy-polled loops)
// share. Internal to the raw loop library; see raw_loop.hpp for the contract.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "raw_loop.hpp"

namespace rpcie::bench::raw {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kCqBatch = 64;  // entries per fi_cq_read, like fabtests' bulk reads
// Pre-posted receives: ping-pong needs 1; a sealed stream keeps as many as an rpcie channel
// (ChannelOptions::recv_depth) so no chunk waits in the provider for a buffer.
constexpr std::size_t kRxDepth = 32;
constexpr std::uint64_t kTimeCheckMask = 255;   // clock read every 256 polls
constexpr std::uint64_t kCtrlCheckMask = 1023;  // recv(MSG_DONTWAIT) every 1024 polls
// Same bit pattern as FI_ADDR_UNSPEC, spelled without the header's C-style cast.
constexpr fi_addr_t kAnyAddr = ~fi_addr_t{0};

// Control-socket bytes (raw_loop.hpp describes the protocol).
constexpr char kEndByte = 'E';
constexpr char kAbortByte = 'A';
constexpr char kReadyByte = 'R';

// "what: fi_strerror (ret)" and "what: strerror".
std::string fi_error(const char* what, long ret);
std::string sys_error(const char* what, int e);

// Blocking-socket I/O, but every wait is bounded by the deadline (poll first, then a
// non-blocking syscall), and MSG_NOSIGNAL so a dead peer is an error.
bool write_all(int fd, const void* data, std::size_t len, Clock::time_point deadline, std::string* err);
bool read_all(int fd, void* data, std::size_t len, Clock::time_point deadline, std::string* err);

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

// Per-operation context. FI_CONTEXT mode lets the provider scribble on the
// fi_context, so it must come first and each in-flight op needs its own.
struct OpCtx {
  fi_context fi;
  bool is_rx;
  std::size_t slot;   // rx: index of the receive slot in msg_buf; tx: of its sealed send slot
  bool done = false;  // tx: its completion was reaped (set by poll_cq)
};

struct RawPeer::Impl {
  RawConfig cfg;
  int fd = -1;
  bool server = false;
  bool write_delivery_complete = false;  // RawPeer::write_delivery_complete_set

  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_cq* cq = nullptr;
  fid_av* av = nullptr;
  fid_ep* ep = nullptr;
  fid_mr* rma_mr = nullptr;
  fid_mr* msg_mr = nullptr;

  Buffer rma_buf;  // max_size: RMA source/target
  Buffer msg_buf;  // (1 + kRxDepth) slots of max_size: slot 0 send, rest receive
  // Sealed workloads: slot 0 holds one sealed send slot of seal_slot bytes per tx context.
  std::unique_ptr<Sealer> sealer;
  std::size_t chunk = 0;
  std::size_t seal_slot = 0;
  // The side that receives a sealed transfer: every receive is opened and copied into rma_buf
  // as it completes (before its buffer is posted again); `complete` counts whole transfers.
  struct Stream {
    bool active = false;
    bool cipher = true;  // false: plain_* (the bytes follow the seal's place, not opened)
    std::size_t size = 0;
    std::size_t got = 0;
    std::uint64_t complete = 0;
  } stream;
  std::size_t slot_size = 0;
  void* rma_desc = nullptr;
  void* msg_desc = nullptr;
  std::uint64_t rma_key = 0;
  std::uint64_t rma_base = 0;  // what the peer addresses our buffer by (VA or 0)

  fi_addr_t peer = 0;
  std::uint64_t peer_base = 0;
  std::uint64_t peer_key = 0;
  std::uint64_t peer_len = 0;

  std::vector<OpCtx> tx_ctx;
  std::vector<OpCtx> rx_ctx;
  std::vector<OpCtx*> tx_free;
  std::vector<OpCtx*> rx_pending;  // receive slots that need (re)posting
  std::uint64_t tx_done = 0;       // cumulative; an RMA round waits for all of its own
  // Messages received but not yet consumed by a round_trip loop. A credit count,
  // not a per-round base: the peer may legitimately send round N+1's first message
  // while we are still polling at the tail of round N, and that message must not
  // be lost to round N's bookkeeping.
  std::uint64_t rx_ready = 0;

  ~Impl() {
    // Endpoint first so nothing still references the MRs/CQ/AV when they close.
    close_fid(ep ? &ep->fid : nullptr);
    close_fid(rma_mr ? &rma_mr->fid : nullptr);
    close_fid(msg_mr ? &msg_mr->fid : nullptr);
    close_fid(av ? &av->fid : nullptr);
    close_fid(cq ? &cq->fid : nullptr);
    close_fid(domain ? &domain->fid : nullptr);
    close_fid(fabric ? &fabric->fid : nullptr);
    if (info) fi_freeinfo(info);
  }

  static void close_fid(fid* f) {
    if (f) fi_close(f);
  }

  std::size_t inject_size() const { return info->tx_attr->inject_size; }
  unsigned char* tx_slot() const { return static_cast<unsigned char*>(msg_buf.get()); }
  unsigned char* rx_slot(std::size_t i) const { return tx_slot() + (1 + i) * slot_size; }

  // open(): the fabric objects, the endpoint, the registered buffers, the operation
  // contexts (raw_setup.cc).
  bool setup(std::string* err);
  bool fabric_open(std::string* err);
  bool endpoint_open(std::string* err);
  bool buffers_register(std::string* err);
  void contexts_init();
  bool register_mr(void* buf, std::size_t len, std::uint64_t access, std::uint64_t key, fid_mr** mr, std::string* err);
  bool exchange(Clock::time_point deadline, std::string* err);
  // The loops (raw_loop.cc).
  bool post_rx(OpCtx* c, std::string* err);
  long poll_cq(std::string* err);
  bool stream_receive(unsigned char* sealed, std::size_t len, std::string* err);

  // Bounded busy-wait bookkeeping shared by every loop.
  struct Wait {
    Clock::time_point deadline;
    std::uint64_t n = 0;
  };
  Wait start_wait() const {
    return Wait{
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg.timeout_sec)), 0};
  }
  enum class Step { go, end_of_round, fail };
  Step step(Wait* w, bool expect_end, bool* peer_failed, std::string* err);

  bool post_send(std::size_t len, Wait* w, bool* peer_failed, std::string* err);
  bool drain_tx(Wait* w, bool* peer_failed, std::string* err);
  void send_abort() const {
    char b = kAbortByte;
    (void)::send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // One run() or serve(): where its error goes, whether the peer is the side that failed,
  // and its bounded wait.
  struct Call {
    Call(const Impl& m, std::string* sink) : err(sink != nullptr ? sink : &own), wait(m.start_wait()) {}
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    std::string own;  // the sink when the caller passed none
    std::string* err;
    bool peer_failed = false;
    Wait wait;
  };
  // After a failed call: tells the peer to stop waiting, unless it is the side that failed.
  void call_abort(const Call& c) const {
    if (!c.peer_failed) send_abort();
  }
  // The workloads' two halves: seconds (< 0 on failure) for the initiator, success for the target.
  // Messages: `len` bytes out, then wait for the reply (samples: seconds of each, or null).
  double messages_run(Call& c, std::size_t len, std::size_t iterations, std::vector<double>* samples);
  double rma_run(Call& c, bool is_write, std::size_t size, std::size_t iterations, std::size_t window,
                 std::vector<double>* samples);
  // What the target does to the initiator's buffer before each reply.
  enum class Before { nothing, read, write_proven };
  // Answers each message with `reply_len` bytes, after `before` on `rma_len` bytes of the
  // initiator's buffer.
  bool messages_serve(Call& c, std::size_t reply_len, Before before, std::size_t rma_len, std::size_t iterations);
  // Posts one RMA write or read of `size` bytes of rma_buf to the peer's buffer.
  ssize_t rma_post(bool is_write, std::size_t size, OpCtx* op);
  // Posts an RMA write of `size` bytes at `local` to the peer's buffer at offset `at`,
  // FI_DELIVERY_COMPLETE when `delivered`.
  ssize_t rma_write_post(void* local, std::size_t size, std::size_t at, bool delivered, OpCtx* op);
  // One fi_read (or write) of `len` bytes between rma_buf and the peer's buffer, both at
  // offset `at`, waited for (a write until transmit- or, `delivered`, delivery-complete).
  bool rma_once(Call& c, bool write, std::size_t at, std::size_t len, bool delivered = false);
  bool rma_serve(Call& c);
  // Sealed and plain workloads: `size` bytes of rma_buf sealed and sent in chunks, at most
  // `window` sends in flight (0 or more than the contexts: all of them); the initiator's and
  // the target's halves.
  // `cipher` false: copied instead of sealed (plain_*).
  bool sealed_send(Call& c, std::size_t size, std::size_t window, bool cipher);
  double sealed_run(Call& c, Workload w, std::size_t size, std::size_t iterations, std::size_t window,
                    std::vector<double>* samples);
  bool sealed_serve(Call& c, Workload w, std::size_t size, std::size_t iterations, std::size_t window);
  // A sealer is set and `size` fits the buffers; else false + *c.err.
  bool sealed_ready(Call& c, std::size_t size) const;
  // Waits for one more whole transfer into the stream.
  bool stream_wait(Call& c);
};

}  // namespace rpcie::bench::raw
