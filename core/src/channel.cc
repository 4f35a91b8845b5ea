#include "rpcie/channel.hpp"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "channel_parts.hpp"
#include "channel_wait.hpp"
#include "local_doorbell.hpp"
#include "rpcie/log.hpp"
#include "rpcie/message_seal.hpp"

namespace rpcie {

namespace {
constexpr std::size_t kCqBatch = 16;
// How long the provider may refuse to take back a receive slot before the channel fails: far
// beyond a full queue draining or rxm connecting (milliseconds), so only a broken provider.
constexpr auto kRecvRefusalMax = std::chrono::seconds(10);
}  // namespace

LogLimiter& channel_refusal_log() {
  static LogLimiter limiter;
  return limiter;
}

Result<std::unique_ptr<Channel>> Channel::create(std::unique_ptr<Fabric> fabric, fi_addr_t peer,
                                                 const ChannelOptions& options) {
  if (!fabric) return fail(EINVAL, "channel needs a fabric");
  if (options.window == 0 || options.recv_depth == 0 || options.send_buffers == 0)
    return fail(EINVAL, "channel window and buffer counts must be positive");
  std::unique_ptr<Channel> c(new Channel());
  c->fabric_ = std::move(fabric);
  c->peer_ = peer;
  c->options_ = options;
  c->max_transfer_ = c->fabric_->max_msg_size();
  c->inject_max_.store(c->fabric_->inject_size(), std::memory_order_relaxed);
  if (options.max_transfer) c->max_transfer_ = std::min(c->max_transfer_, options.max_transfer);
  // The envelope (header, fields, seal) of an rma_put or rma_data rides in the same message.
  constexpr std::size_t kRmaEnvelope = proto::kHeaderSize + 32 + auth::kSealOverhead;
  const std::size_t eager = c->fabric_->adapter().eager_max();
  c->sealed_chunk_ = std::min({proto::kMaxRmaBytes, c->max_transfer_,
                               eager > kRmaEnvelope ? (eager - kRmaEnvelope) / 64 * 64 : proto::kMaxRmaBytes});
  c->delivery_complete_ = options.delivery_complete_force || !c->fabric_->order_saw();

  // One registered block holds every message slot: receives first, then sends.
  std::size_t slots = options.recv_depth + options.send_buffers;
  auto memory = HostBuffer::create(slots * kSlotBytes);
  if (!memory) return tl::unexpected(memory.error());
  c->message_memory_.emplace(std::move(*memory));
  auto region =
      MemoryRegion::create(*c->fabric_, c->message_memory_->data(), c->message_memory_->size(), FI_SEND | FI_RECV);
  if (!region) return tl::unexpected(region.error());
  c->message_region_.emplace(std::move(*region));
  c->last_message_.reserve(proto::kMaxMessage);
  c->recv_done_.assign(options.recv_depth, RecvDone{});

  for (std::size_t i = 0; i < slots + options.window; ++i) {
    auto op = std::make_unique<Op>();
    if (i < slots) op->buffer = c->message_memory_->data() + i * kSlotBytes;
    if (i < options.recv_depth)
      op->kind = Op::Kind::recv;
    else if (i < slots)
      c->send_free_.push_back(op.get());
    else {
      op->kind = Op::Kind::rma;
      c->rma_free_.push_back(op.get());
    }
    c->ops_.push_back(std::move(op));
  }
  std::lock_guard g(c->lock_);
  for (std::size_t i = 0; i < options.recv_depth; ++i) {
    auto r = c->recv_post_locked(*c->ops_[i]);
    if (!r) return tl::unexpected(r.error());
  }
  c->busy_poll_calibrate_locked();
  if (c->fabric_->doorbell()) c->peer_bell_open();
  return c;
}

void Channel::peer_bell_open() {
  // The peer's address as it went into the AV: its doorbell is named after it.
  std::vector<std::uint8_t> address(proto::kMaxFabricAddress);
  std::size_t len = address.size();
  if (fi_av_lookup(fabric_->av(), peer_, address.data(), &len) != 0 || len > address.size()) return;
  address.resize(len);
  auto bell = LocalDoorbell::open(address);
  if (bell)
    peer_bell_ = std::make_unique<LocalDoorbell>(std::move(*bell));
  else  // a peer without one (another build): it finds this side's work at its next poll
    RPCIE_LOG_DEBUG("channel", "peer has no doorbell: {}", bell.error().describe());
}

void Channel::peer_ring() noexcept {
  if (peer_bell_) peer_bell_->ring();
}

Channel::Channel() = default;

Channel::~Channel() {
  // The endpoint goes first: closing it cancels what is posted, so that no operation still
  // references the message region or buffers when they are released; the domain (in
  // ~Fabric) can only close once its regions are.
  if (fabric_) fabric_->ep_close();
  message_region_.reset();
  fabric_.reset();
  message_memory_.reset();
}

Result<void> Channel::recv_post_locked(Op& op) {
  op.kind = Op::Kind::recv;
  op.seq = recv_posted_seq_++;
  std::optional<Deadline::Clock::time_point> first_refusal;
  for (;;) {
    ssize_t rc = fi_recv(fabric_->ep(), op.buffer, kSlotBytes, message_region_->desc(), FI_ADDR_UNSPEC, &op.context);
    if (rc == 0) return {};
    // A receive slot that is not posted would hold up every later message: fail now, or
    // once the provider has refused it for longer than any request may take.
    if (rc != -FI_EAGAIN) {
      fail_locked(Error{ErrorDomain::fabric, static_cast<int>(-rc), "fi_recv"});
      return tl::unexpected(*failure_);
    }
    if (first_refusal && Deadline::Clock::now() - *first_refusal > kRecvRefusalMax) {
      fail_locked(Error{ErrorDomain::fabric, ETIMEDOUT, "fi_recv refused for over 10 s"});
      return tl::unexpected(*failure_);
    }
    RPCIE_TRY(post_retry_locked(first_refusal));
  }
}

void Channel::fail_locked(Error e) {
  if (!failure_) {
    RPCIE_LOG_WARN("channel", "channel failed: {}", e.describe());
    failure_ = std::move(e);
  }
}

void Channel::completion_locked(Op& op, std::size_t length, bool foreign) {
  switch (op.kind) {
    case Op::Kind::recv:
      // rxm reports completions in any order (comp_order NONE: a rendezvous-sized message
      // completes after smaller ones sent later), but with FI_ORDER_SAS messages are matched
      // to receives in posting order. Delivering by posting order restores send order.
      recv_done_[op.seq % recv_done_.size()] = {&op, length, 0, foreign, false};
      break;
    case Op::Kind::send:
      --sends_in_flight_;
      send_free_.push_back(&op);
      if (op.linked) sealed_complete_locked(*std::exchange(op.linked, nullptr));
      break;
    case Op::Kind::rma:
      --rma_in_flight_;
      rma_free_.push_back(&op);
      break;
  }
}

Result<void> Channel::poll_locked() {
  ++stats_.polls;
  auto r = cq_reap_locked();
  if (r && rma_sealed_) sealed_drain_locked();
  return r;
}

void Channel::abort() noexcept {
  aborted_.store(true);  // before wake(): a waiter whose trywait reset the signal sees the flag
  wake();
}

Result<void> Channel::cq_reap_locked() {
  if (!failure_ && aborted_.load(std::memory_order_relaxed))
    fail_locked(Error{ErrorDomain::posix, ECONNABORTED, "the link was given up (lost elsewhere)"});
  if (failure_) return tl::unexpected(*failure_);
  fi_cq_data_entry entries[kCqBatch];
  fi_addr_t sources[kCqBatch];
  const bool source_known = fabric_->source_known();
  for (;;) {
    ssize_t n = source_known ? fi_cq_readfrom(fabric_->cq(), entries, kCqBatch, sources)
                             : fi_cq_read(fabric_->cq(), entries, kCqBatch);
    if (n == -FI_EAGAIN) return {};
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(fabric_->cq(), &err, 0) < 0) {
        fail_locked(Error{ErrorDomain::fabric, FI_EOTHER, "fi_cq_readerr"});
        return tl::unexpected(*failure_);
      }
      auto* op = static_cast<Op*>(err.op_context);
      // A cancelled receive (endpoint closing) is not a peer failure worth logging twice.
      std::string what = std::string("completion error on ") +
                         (op == nullptr                ? "unknown op"
                          : op->kind == Op::Kind::recv ? "receive"
                          : op->kind == Op::Kind::send ? "send"
                          : op->is_write               ? "rma write"
                                                       : "rma read") +
                         ": " + fi_cq_strerror(fabric_->cq(), err.prov_errno, err.err_data, nullptr, 0);
      if (op) {
        if (op->kind != Op::Kind::recv) completion_locked(*op, 0);
      }
      fail_locked(Error{ErrorDomain::fabric, err.err ? err.err : FI_EIO, what});
      return tl::unexpected(*failure_);
    }
    if (n < 0) {
      fail_locked(Error{ErrorDomain::fabric, static_cast<int>(-n), "fi_cq_read"});
      return tl::unexpected(*failure_);
    }
    completions_ += static_cast<std::uint64_t>(n);
    for (ssize_t i = 0; i < n; ++i) {
      // With FI_SOURCE, a receive from anyone but the peer (FI_ADDR_NOTAVAIL: not in our AV)
      // is kept in its place in the posting order but dropped when its turn comes.
      const bool foreign = source_known && (entries[i].flags & FI_RECV) != 0 && sources[i] != peer_;
      completion_locked(*static_cast<Op*>(entries[i].op_context), entries[i].len, foreign);
    }
    if (static_cast<std::size_t>(n) < kCqBatch) return {};
  }
}

Result<Channel::Op*> Channel::slot_take(std::unique_lock<std::mutex>& held, std::vector<Op*>& pool, Deadline deadline,
                                        const char* what) {
  // The pool is re-checked under the lock after every wait: another thread may have taken
  // the slot that freed up.
  while (pool.empty()) {
    held.unlock();
    auto w = wait_until([&pool] { return !pool.empty(); }, deadline, what);
    held.lock();
    if (!w) return tl::unexpected(w.error());
  }
  Op* op = pool.back();
  pool.pop_back();
  return op;
}

bool Channel::recv_authentic_locked(RecvDone& head) {
  if (head.opened) return true;
  if (!head.foreign && !seal_) {
    head.opened = true;
    head.length = std::min(head.length, proto::kMaxMessage);
    return true;
  }
  if (!head.foreign) {
    auto plain = seal_->open(std::span(head.op->buffer, std::min(head.length, kSlotBytes)));
    if (plain) {
      head.opened = true;
      head.offset = static_cast<std::size_t>(plain->data() - head.op->buffer);
      head.length = plain->size();
      return true;
    }
    if (plain.error() == auth::SealRefusal::replayed)
      ++stats_.messages_replayed;
    else
      ++stats_.messages_forged;
    RPCIE_LOG_LIMITED(channel_refusal_log(), LogLevel::warn, "channel",
                      "dropping a message from the peer's address: {}", auth::seal_refusal_name(plain.error()));
  } else {
    ++stats_.messages_foreign;
    RPCIE_LOG_LIMITED(channel_refusal_log(), LogLevel::warn, "channel",
                      "dropping a message from an address other than the peer's");
  }
  return false;
}

bool Channel::message_ready_locked() {
  if (rma_sealed_) return !sealed_rma_->inbox.empty();
  // Foreign and (on a sealed channel) unauthentic receives at the head are dropped here,
  // so that "ready" means an authentic message from the peer is next.
  for (;;) {
    auto& head = recv_done_[recv_next_seq_ % recv_done_.size()];
    if (head.op == nullptr) return false;
    if (recv_authentic_locked(head)) return true;
    Op* op = std::exchange(head, RecvDone{}).op;
    ++recv_next_seq_;
    if (!recv_post_locked(*op)) return false;  // the failure is sticky: the next poll reports it
  }
}

Result<const proto::Decoded*> Channel::message_recv(Deadline deadline) {
  auto next_ready = [this] { return message_ready_locked(); };
  std::unique_lock g(lock_);
  while (!next_ready()) {  // re-checked under the lock: another thread may have taken it
    g.unlock();
    auto w = wait_until(next_ready, deadline, "a message");
    g.lock();
    if (!w) return tl::unexpected(w.error());
  }
  if (rma_sealed_) return sealed_recv_locked();
  const RecvDone done = std::exchange(recv_done_[recv_next_seq_ % recv_done_.size()], RecvDone{});
  Op* op = done.op;
  ++recv_next_seq_;
  last_message_.assign(op->buffer + done.offset, op->buffer + done.offset + done.length);
  auto repost = recv_post_locked(*op);
  if (!repost) return tl::unexpected(repost.error());
  return last_message_decode_locked();
}

Result<const proto::Decoded*> Channel::last_message_decode_locked() {
  auto d = proto::message_decode(last_message_);
  if (d && d->header.flags != 0) d = fail(EPROTO, "header flags are for the bootstrap connection only");
  if (!d) {
    // Whatever the decoder's reason (EMSGSIZE, EPROTONOSUPPORT, ...), to the caller this is
    // one dropped message: EPROTO, with the reason in the text.
    ++stats_.messages_rejected;
    RPCIE_LOG_ONCE(LogLevel::warn, "channel", "dropping malformed message: {}", d.error().describe());
    return fail(EPROTO, "malformed message dropped: " + d.error().message);
  }
  ++stats_.messages_received;
  last_decoded_ = std::move(*d);
  return &last_decoded_;
}

Result<void> Channel::message_send(const proto::Message& message, std::uint64_t request_id, Deadline deadline) {
  std::uint8_t staging[kInjectStaging];
  std::size_t size = proto::message_encoded_size(message);
  if (size <= sizeof staging) {
    auto n = proto::message_encode(message, request_id, staging);
    if (!n) return tl::unexpected(n.error());
    return bytes_send(std::span(staging, *n), deadline);
  }
  auto bytes = proto::message_encode(message, request_id);
  if (!bytes) return tl::unexpected(bytes.error());
  return bytes_send(*bytes, deadline);
}

Result<void> Channel::bytes_send(std::span<const std::uint8_t> bytes, Deadline deadline) {
  if (bytes.size() > proto::kMaxMessage) return fail(EMSGSIZE, "message over the protocol's cap");
  std::unique_lock g(lock_);
  const std::size_t wire_size = bytes.size() + (seal_ ? auth::kSealOverhead : 0);
  const bool inject = bytes.size() <= inject_max_.load(std::memory_order_relaxed);
  if (failure_) return tl::unexpected(*failure_);
  Op* op = nullptr;
  const std::uint8_t* wire = bytes.data();
  if (!inject) {
    // Non-inject sends need their bytes until completion: copy into a registered slot.
    auto slot = slot_take(g, send_free_, deadline, "a send buffer");
    if (!slot) return tl::unexpected(slot.error());
    op = *slot;
    ++sends_in_flight_;
    op->kind = Op::Kind::send;
    wire = op->buffer;
    if (seal_)
      (void)seal_->seal(bytes, std::span(op->buffer, kSlotBytes));
    else
      std::memcpy(op->buffer, bytes.data(), bytes.size());
  } else if (seal_) {
    // Sealed under the lock that also posts: sequence order is send order.
    (void)seal_->seal(bytes, seal_staging_);
    wire = seal_staging_.data();
  }
  std::optional<Deadline::Clock::time_point> first_refusal;
  for (;;) {
    // fi_inject: small messages need no buffer to hold and no completion to reap.
    ssize_t rc = inject ? fi_inject(fabric_->ep(), wire, wire_size, peer_)
                        : fi_send(fabric_->ep(), op->buffer, wire_size, message_region_->desc(), peer_, &op->context);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN || deadline.expired()) {
      if (op) completion_locked(*op, 0);
      if (rc == -FI_EAGAIN) return fail(ETIMEDOUT, "deadline passed posting a message");
      fail_locked(Error{ErrorDomain::fabric, static_cast<int>(-rc), inject ? "fi_inject" : "fi_send"});
      return tl::unexpected(*failure_);
    }
    RPCIE_TRY(post_retry_locked(first_refusal));
  }
  peer_ring();
  ++stats_.messages_sent;
  return {};
}

Result<void> Channel::message_send_after_writes(const proto::Message& message, std::uint64_t request_id,
                                                Deadline deadline) {
  if (delivery_complete()) {
    // No send-after-write ordering: the writes were posted with FI_DELIVERY_COMPLETE, so
    // their completions mean "visible at the target".
    auto f = rma_flush(deadline);
    if (!f) return f;
  }
  return message_send(message, request_id, deadline);
}

Result<void> Channel::rma_write(const MemoryRegion& local, std::size_t local_offset, const RemoteRegion& remote,
                                std::uint64_t remote_offset, std::size_t length, Deadline deadline,
                                WriteCompletion completion) {
  return rma_post(RmaKind::write, local, local_offset, remote, remote_offset, length, deadline,
                  delivery_complete() || completion == WriteCompletion::delivered);
}

Result<void> Channel::rma_read(const MemoryRegion& local, std::size_t local_offset, const RemoteRegion& remote,
                               std::uint64_t remote_offset, std::size_t length, Deadline deadline) {
  return rma_post(RmaKind::read, local, local_offset, remote, remote_offset, length, deadline, false);
}

Result<void> Channel::rma_post(RmaKind kind, const MemoryRegion& local, std::size_t local_offset,
                               const RemoteRegion& remote, std::uint64_t remote_offset, std::size_t length,
                               Deadline deadline, bool delivered) {
  if (local_offset > local.length() || length > local.length() - local_offset)
    return fail(EINVAL, "rma range outside the local region");
  if (remote_offset > remote.length || length > remote.length - remote_offset)
    return fail(EINVAL, "rma range outside the remote region");
  if (rma_sealed_)
    return rma_post_sealed(kind, local, local_offset, remote, remote_offset, length, deadline, delivered);
  const bool write = kind == RmaKind::write;
  std::size_t done = 0;
  while (done < length) {
    std::size_t chunk = std::min(length - done, max_transfer_);
    std::unique_lock g(lock_);
    RPCIE_TRY_ASSIGN(Op * op, rma_slot_take(g, chunk, write, deadline));
    iovec iov{local.bytes() + local_offset + done, chunk};
    void* desc = local.desc();
    fi_rma_iov rma_iov{remote.address + remote_offset + done, chunk, remote.key};
    fi_msg_rma msg{};
    msg.msg_iov = &iov;
    msg.desc = &desc;
    msg.iov_count = 1;
    msg.addr = peer_;
    msg.rma_iov = &rma_iov;
    msg.rma_iov_count = 1;
    msg.context = &op->context;
    const std::uint64_t flags = FI_COMPLETION | (delivered ? FI_DELIVERY_COMPLETE : 0);
    std::optional<Deadline::Clock::time_point> first_refusal;
    for (;;) {
      ssize_t rc = write ? fi_writemsg(fabric_->ep(), &msg, flags) : fi_readmsg(fabric_->ep(), &msg, flags);
      if (rc == 0) break;
      if (rc != -FI_EAGAIN) {
        completion_locked(*op, 0);
        fail_locked(Error{ErrorDomain::fabric, static_cast<int>(-rc), write ? "fi_writemsg" : "fi_readmsg"});
        return tl::unexpected(*failure_);
      }
      RPCIE_TRY(post_retry_locked(first_refusal));
      if (deadline.expired()) {
        completion_locked(*op, 0);
        return fail(ETIMEDOUT, "deadline passed posting rma");
      }
    }
    peer_ring();
    rma_count_locked(write, chunk);
    done += chunk;
  }
  return {};
}

Result<Channel::Op*> Channel::rma_slot_take(std::unique_lock<std::mutex>& held, std::size_t chunk, bool write,
                                            Deadline deadline) {
  if (failure_) return tl::unexpected(*failure_);
  RPCIE_TRY_ASSIGN(Op * op, slot_take(held, rma_free_, deadline, "an rma window slot"));
  ++rma_in_flight_;
  op->bytes = chunk;
  op->is_write = write;
  return op;
}

void Channel::rma_count_locked(bool write, std::size_t chunk) {
  if (write) {
    ++stats_.rma_writes;
    stats_.bytes_written += chunk;
  } else {
    ++stats_.rma_reads;
    stats_.bytes_read += chunk;
  }
}

Result<void> Channel::rma_flush(Deadline deadline) {
  return wait_until([this] { return rma_in_flight_ == 0; }, deadline, "rma completions");
}

void Channel::seal_set(std::unique_ptr<auth::MessageSeal> seal) {
  std::lock_guard g(lock_);
  seal_ = std::move(seal);
  // A sealed message is injected when it fits both the provider's inject size and the
  // staging buffer it is sealed into.
  const std::size_t inject = fabric_->inject_size();
  seal_staging_.assign(seal_ ? std::min(inject, kSealStagingMax) : 0, 0);
  const std::size_t wire = seal_ ? seal_staging_.size() : inject;
  const std::size_t overhead = seal_ ? auth::kSealOverhead : 0;
  inject_max_.store(wire > overhead ? wire - overhead : 0, std::memory_order_relaxed);
}

bool Channel::sealed() const {
  std::lock_guard g(lock_);
  return seal_ != nullptr;
}

bool Channel::order_raw() const noexcept { return fabric_->order_raw(); }

std::size_t Channel::inject_max() const { return inject_max_.load(std::memory_order_relaxed); }

std::size_t Channel::rma_in_flight() const {
  std::lock_guard g(lock_);
  return rma_in_flight_;
}

ChannelStats Channel::stats() const {
  std::lock_guard g(lock_);
  return stats_;
}

std::optional<Error> Channel::failure() const {
  std::lock_guard g(lock_);
  return failure_;
}

}  // namespace rpcie
