// Sealed RMA: one-sided transfers carried as sealed messages (rpcie/channel.hpp, "Sealed
// RMA"; docs/protocol.md, rma_put / rma_get / rma_data / rma_done).
//
// Initiator: rma_post_sealed() splits a transfer into chunks of at most sealed_chunk(), each an
// rma window slot like a real RMA chunk. A put is encoded straight into a send slot and
// sealed there in place; a get registers where its data goes (Op::dest) and waits for it.
// Target: every poll drains the completed receives in posting order (sealed_drain_locked):
// rma_* messages are served at once, application messages are queued for message_recv().
// Draining never blocks: answers that find no send slot stay queued for the next poll.
#include <cerrno>
#include <cstring>
#include <string>

#include <rdma/fi_errno.h>

#include "channel_parts.hpp"
#include "channel_wait.hpp"

namespace rpcie {

namespace {

// What the queues may hold before draining stops (the peer's sends then wait in the
// provider): far above what a peer that follows the window ever has outstanding.
constexpr std::size_t kInboxMax = 4096;
constexpr std::size_t kDonesMax = 4096;
constexpr std::size_t kServesMax = 1024;

bool type_is_rma(std::uint8_t type) {
  return type >= static_cast<std::uint8_t>(proto::MsgType::rma_put) &&
         type <= static_cast<std::uint8_t>(proto::MsgType::rma_done);
}

constexpr std::size_t kTypeOffset = 5;  // the header's type byte (docs/protocol.md 3)

}  // namespace

Result<void> Channel::rma_seal(std::vector<SealedRegion> regions) {
  std::lock_guard g(lock_);
  if (!seal_) return fail(EINVAL, "sealed RMA needs a sealed channel (seal_set first)");
  if (!sealed_rma_) sealed_rma_ = std::make_unique<Sealed>();
  sealed_rma_->regions = std::move(regions);
  rma_sealed_ = true;
  return {};
}

bool Channel::rma_sealed() const {
  std::lock_guard g(lock_);
  return rma_sealed_;
}

Result<bool> Channel::sealed_try_post_locked(const proto::Message& m, std::uint64_t tag, Op* linked) {
  if (failure_) return tl::unexpected(*failure_);
  const std::size_t size = proto::message_encoded_size(m);
  const std::size_t wire_size = size + auth::kSealOverhead;
  if (wire_size <= fabric_->inject_size() && size <= kInjectStaging) {
    std::uint8_t staging[kInjectStaging + auth::kSealOverhead];
    RPCIE_TRY(proto::message_encode(m, tag, std::span(staging + auth::kSealSequenceBytes, size)));
    (void)seal_->seal(std::span(staging + auth::kSealSequenceBytes, size), staging);
    ssize_t rc = fi_inject(fabric_->ep(), staging, wire_size, peer_);
    if (rc == -FI_EAGAIN) return false;  // the sequence it used is a gap, which open() allows
    if (rc != 0) {
      fail_locked(Error{ErrorDomain::fabric, static_cast<int>(-rc), "fi_inject"});
      return tl::unexpected(*failure_);
    }
    peer_ring();
    ++stats_.messages_sent;
    if (linked) sealed_complete_locked(*linked);  // an injected put is sent once posted
    return true;
  }
  if (send_free_.empty()) return false;
  Op* op = send_free_.back();
  // Encoded after the sequence's place and sealed in place: one copy of the data.
  std::uint8_t* plain = op->buffer + auth::kSealSequenceBytes;
  RPCIE_TRY(proto::message_encode(m, tag, std::span(plain, kSlotBytes - auth::kSealOverhead)));
  (void)seal_->seal(std::span<const std::uint8_t>(plain, size), std::span(op->buffer, kSlotBytes));
  ssize_t rc = fi_send(fabric_->ep(), op->buffer, wire_size, message_region_->desc(), peer_, &op->context);
  if (rc == -FI_EAGAIN) return false;
  if (rc != 0) {
    fail_locked(Error{ErrorDomain::fabric, static_cast<int>(-rc), "fi_send"});
    return tl::unexpected(*failure_);
  }
  peer_ring();
  send_free_.pop_back();
  ++sends_in_flight_;
  op->kind = Op::Kind::send;
  op->linked = linked;
  ++stats_.messages_sent;
  return true;
}

Result<void> Channel::sealed_chunk_post(std::unique_lock<std::mutex>& held, const proto::Message& m, std::uint64_t tag,
                                        Op* linked, Deadline deadline) {
  std::optional<Deadline::Clock::time_point> first_refusal;
  for (;;) {
    RPCIE_TRY_ASSIGN(const bool posted, sealed_try_post_locked(m, tag, linked));
    if (posted) return {};
    if (deadline.expired()) return fail(ETIMEDOUT, "deadline passed posting a sealed RMA message");
    if (!send_free_.empty()) {
      // The provider refused with slots free (its queue is full, or rxm is still connecting):
      // as message_send does. Waiting for a free slot would return at once, a spin with no end.
      RPCIE_TRY(post_retry_locked(first_refusal));
      continue;
    }
    // No send slot: let completions come in (which also serves the peer meanwhile).
    held.unlock();
    auto w = wait_until([this] { return !send_free_.empty(); }, deadline, "a send buffer");
    held.lock();
    if (!w) return w;
  }
}

Result<void> Channel::rma_post_sealed(RmaKind kind, const MemoryRegion& local, std::size_t local_offset,
                                      const RemoteRegion& remote, std::uint64_t remote_offset, std::size_t length,
                                      Deadline deadline, bool delivered) {
  const bool write = kind == RmaKind::write;
  const std::size_t piece = sealed_chunk_;
  const auto region = static_cast<std::uint32_t>(remote.key);
  std::size_t done = 0;
  while (done < length) {
    const std::size_t chunk = std::min(length - done, piece);
    std::unique_lock g(lock_);
    RPCIE_TRY_ASSIGN(Op * op, rma_slot_take(g, chunk, write, deadline));
    op->tag = sealed_rma_->tag_next++;
    op->received = 0;
    std::uint8_t* at = local.bytes() + local_offset + done;
    Result<void> posted;
    if (write) {
      // A posted put completes with its send; an acknowledged one when rma_done says so. Of a
      // delivered write only the last put asks: the peer performs puts in the order they
      // were sent, so its rma_done proves every earlier one of the write in place too (one
      // acknowledgement per write, not one per chunk).
      const bool acked = delivered && done + chunk == length;
      if (acked) sealed_rma_->awaiting.push_back(op);
      const proto::RmaPut put{region, remote_offset + done, acked ? proto::kRmaPutAck : std::uint8_t{0},
                              std::span<const std::uint8_t>(at, chunk)};
      posted = sealed_chunk_post(g, put, op->tag, acked ? nullptr : op, deadline);
    } else {
      op->dest = at;
      sealed_rma_->awaiting.push_back(op);
      posted = sealed_chunk_post(g, proto::RmaGet{region, remote_offset + done, chunk}, op->tag, nullptr, deadline);
    }
    if (!posted) {
      // Not sent: the chunk is not in flight (a failed channel reports the rest).
      std::erase(sealed_rma_->awaiting, op);
      completion_locked(*op, 0);
      return posted;
    }
    rma_count_locked(write, chunk);
    done += chunk;
  }
  return {};
}

void Channel::sealed_complete_locked(Op& op) { completion_locked(op, op.bytes); }

void Channel::sealed_drain_locked() {
  Sealed& s = *sealed_rma_;
  if (s.draining) return;  // reposting a receive can poll, and the poll comes back here
  s.draining = true;
  while (s.inbox.size() < kInboxMax && s.dones.size() < kDonesMax) {
    auto& head = recv_done_[recv_next_seq_ % recv_done_.size()];
    if (head.op == nullptr) break;
    RecvDone done = std::exchange(head, RecvDone{});
    ++recv_next_seq_;
    if (recv_authentic_locked(done)) sealed_message_locked(std::span(done.op->buffer + done.offset, done.length));
    if (!recv_post_locked(*done.op)) break;  // sticky failure: the next poll reports it
  }
  sealed_answer_locked();
  s.draining = false;
}

void Channel::sealed_message_locked(std::span<std::uint8_t> plain) {
  Sealed& s = *sealed_rma_;
  if (plain.size() <= kTypeOffset || !type_is_rma(plain[kTypeOffset])) {
    std::vector<std::uint8_t> copy;
    if (!s.spare.empty()) {
      copy = std::move(s.spare.back());
      s.spare.pop_back();
    }
    copy.assign(plain.begin(), plain.end());
    s.inbox.push_back(std::move(copy));
    return;
  }
  auto d = proto::message_decode(plain);
  if (!d) {
    ++stats_.messages_rejected;
    RPCIE_LOG_LIMITED(channel_refusal_log(), LogLevel::warn, "channel", "dropping a malformed rma message: {}",
                      d.error().describe());
    return;
  }
  const std::uint64_t tag = d->header.request_id;
  if (auto* put = std::get_if<proto::RmaPut>(&d->message))
    sealed_put_serve_locked(tag, *put);
  else if (auto* get = std::get_if<proto::RmaGet>(&d->message))
    sealed_get_serve_locked(tag, *get);
  else if (auto* data = std::get_if<proto::RmaData>(&d->message))
    sealed_data_take_locked(tag, *data);
  else if (auto* done = std::get_if<proto::RmaDone>(&d->message))
    sealed_done_take_locked(tag, *done);
}

void Channel::sealed_refuse_locked(std::uint64_t tag, int code, const char* what) {
  ++stats_.rma_refused;
  RPCIE_LOG_LIMITED(channel_refusal_log(), LogLevel::warn, "channel", "refusing the peer's {}: {}", what,
                    std::strerror(code));
  sealed_rma_->dones.push_back({tag, code});
}

void Channel::sealed_put_serve_locked(std::uint64_t tag, const proto::RmaPut& put) {
  Sealed& s = *sealed_rma_;
  int error = 0;
  std::uint8_t* at = s.region_reach(put.region, put.offset, put.data.size(), true, error);
  if (error) return sealed_refuse_locked(tag, error, "rma_put");
  std::memcpy(at, put.data.data(), put.data.size());
  ++stats_.rma_served;
  if (put.flags & proto::kRmaPutAck) s.dones.push_back({tag, 0});
}

void Channel::sealed_get_serve_locked(std::uint64_t tag, const proto::RmaGet& get) {
  Sealed& s = *sealed_rma_;
  int error = 0;
  const std::uint8_t* at = s.region_reach(get.region, get.offset, get.length, false, error);
  if (error) return sealed_refuse_locked(tag, error, "rma_get");
  if (s.serves.size() >= kServesMax) return sealed_refuse_locked(tag, ENOBUFS, "rma_get");
  s.serves.push_back({tag, at, static_cast<std::size_t>(get.length), 0});
  ++stats_.rma_served;
}

void Channel::sealed_data_take_locked(std::uint64_t tag, const proto::RmaData& data) {
  Sealed& s = *sealed_rma_;
  auto it = std::find_if(s.awaiting.begin(), s.awaiting.end(), [&](Op* o) { return o->tag == tag && !o->is_write; });
  // Data must answer a get of ours, in order and within it: else the peer is broken.
  if (it == s.awaiting.end() || data.position != (*it)->received || data.data.size() > (*it)->bytes - (*it)->received) {
    ++stats_.messages_rejected;
    RPCIE_LOG_LIMITED(channel_refusal_log(), LogLevel::warn, "channel", "dropping rma_data for no read in flight");
    return;
  }
  Op* op = *it;
  std::memcpy(op->dest + op->received, data.data.data(), data.data.size());
  op->received += data.data.size();
  if (op->received == op->bytes) {
    s.awaiting.erase(it);
    sealed_complete_locked(*op);
  }
}

void Channel::sealed_done_take_locked(std::uint64_t tag, const proto::RmaDone& done) {
  Sealed& s = *sealed_rma_;
  auto it = std::find_if(s.awaiting.begin(), s.awaiting.end(), [&](Op* o) { return o->tag == tag; });
  if (done.status != 0) {
    // A put or get of ours that the peer refused (posted puts included, which no longer
    // wait): the transfer did not happen, as after a failed RMA completion.
    if (tag != 0 && tag < s.tag_next) {
      fail_locked(Error{ErrorDomain::posix, done.status, "the peer refused an rma transfer"});
      return;
    }
  } else if (it != s.awaiting.end() && (*it)->is_write) {
    Op* op = *it;
    s.awaiting.erase(it);
    sealed_complete_locked(*op);
    return;
  }
  ++stats_.messages_rejected;
  RPCIE_LOG_LIMITED(channel_refusal_log(), LogLevel::warn, "channel", "dropping rma_done for no transfer in flight");
}

void Channel::sealed_answer_locked() {
  Sealed& s = *sealed_rma_;
  while (!s.dones.empty()) {
    auto posted = sealed_try_post_locked(proto::RmaDone{s.dones.front().status}, s.dones.front().tag, nullptr);
    if (!posted || !*posted) return;
    s.dones.pop_front();
  }
  while (!s.serves.empty()) {
    auto& serve = s.serves.front();
    const std::size_t n = std::min(sealed_chunk_, serve.length - serve.position);
    const proto::RmaData data{serve.position, std::span(serve.base + serve.position, n)};
    auto posted = sealed_try_post_locked(data, serve.tag, nullptr);
    if (!posted || !*posted) return;
    serve.position += n;
    if (serve.position == serve.length) s.serves.pop_front();
  }
}

Result<const proto::Decoded*> Channel::sealed_recv_locked() {
  Sealed& s = *sealed_rma_;
  std::swap(last_message_, s.inbox.front());
  if (s.spare.size() < 64) s.spare.push_back(std::move(s.inbox.front()));
  s.inbox.pop_front();
  return last_message_decode_locked();
}

}  // namespace rpcie
