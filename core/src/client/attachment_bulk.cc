// Attachment: memory-BAR transfers (through the staging buffer, the exporter's bounce buffer,
// or zero-copy from the DMA window) and streaming DMA (window_push). Contract in client.hpp.
#include <algorithm>
#include <cstring>

#include "attachment_state.hpp"

namespace rpcie::client {

namespace {

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
  for (std::uint64_t done = 0; done < length; done += kBulkPiece)
    RPCIE_TRY(ch.rma_read(local, local_offset + done, remote, remote_offset + done, std::min(kBulkPiece, length - done),
                          deadline));
  return {};
}

// Writes [local_offset, +length) of `local` one-sided into the exporter's `remote` at
// remote_offset and returns once the write is proven performed there, over this link. A write
// that merely completed locally can die with the link after the call said it was done; the
// resumed link then performs every later request (a flush, a doorbell) without it, and the
// bytes are lost with no error (this side keeps no copy to send again). Proven over the same
// link, a lost one fails this step instead (ECONNRESET), and bulk_run sends it again:
//  - sealed data path: an acknowledged put (the exporter's sealed rma_done for the write);
//  - where every write is delivery-complete (no FI_ORDER_SAW: shm): its completion;
//  - else (tcp, verbs): the reply to a request sent after it, which FI_ORDER_SAW orders
//    behind it — not FI_DELIVERY_COMPLETE, whose acknowledgement is the provider's own and
//    unauthenticated: libfabric 1.17's tcp provider crashes on one it did not expect, so a
//    replayed write on an open tcp fabric brought hostd down (integration/datapath-replay).
// The caller holds the link (bulk_run).
Result<void> write_proven(Attachment::State& s, const MemoryRegion& local, std::size_t local_offset,
                          const RemoteRegion& remote, std::uint64_t remote_offset, std::uint64_t length,
                          Deadline deadline) {
  auto& ch = s.session->channel();
  const auto completion = ch.rma_sealed() ? WriteCompletion::delivered : WriteCompletion::posted;
  RPCIE_TRY(ch.rma_write(local, local_offset, remote, remote_offset, length, deadline, completion));
  RPCIE_TRY(ch.rma_flush(deadline));
  if (ch.rma_sealed() || ch.delivery_complete()) return {};
  RPCIE_TRY(s.request(proto::ConfigRead{0, 2}, deadline, false));
  return {};
}

}  // namespace

Result<void> Attachment::window_push(std::uint64_t window_offset, std::uint64_t length, Deadline deadline) {
  // Up to kPushInline the push only joins the batch (posted); beyond, this thread waits for
  // its one-sided write to be taken, which is a call like a bulk transfer.
  // The window and whether the exporter has a mirror of it stay what they were at attach
  // (a resume brings new keys, not a new window): read without the link lock.
  const bool mirrored = s_->pushes_to_mirror();
  Dispatcher::Call call(*s_->dispatcher, !(mirrored && length > kPushInline));
  if (s_->window.size == 0) return fail(EINVAL, "this attachment has no DMA window");
  if (window_offset > s_->window.size || length > s_->window.size - window_offset)
    return fail(EINVAL, "window push: range outside the DMA window");
  if (auto e = s_->router->error_pending()) return tl::unexpected(*e);
  if (!mirrored || length == 0) return {};  // the exporter reads the window itself
  s_->stats_update([&](AttachmentStats& st) { st.window_bytes_pushed += length; });
  const auto* bytes = static_cast<const std::uint8_t*>(s_->window.base) + window_offset;
  // Earlier posted writes (and bytes) leave first: one of them may start DMA that must read
  // the old bytes. The bytes are copied now: the device reads them as they are at this call.
  // They leave with the next posted write (the doorbell), any other operation, or the
  // dispatcher's batch timer: no send and no thread wake-up of their own.
  while (length <= kPushInline) {
    if (s_->batch->push_set({bytes, static_cast<std::size_t>(length)}, window_offset, Deadline::Clock::now()))
      return {};
    RPCIE_TRY(s_->batch_flush(deadline));
  }
  // A one-sided write lands in the mirror when the provider delivers it, not when the
  // exporter has handled the messages before it: a doorbell sent earlier whose DMA reads the
  // same range would find these bytes instead of the ones pushed for it. So every earlier
  // posted write is performed first (a round trip, only when one is unconfirmed).
  RPCIE_TRY(s_->posted_settle(deadline));
  // Proven in the mirror before this returns, so the doorbell that follows finds the bytes
  // there, and a lost link cannot take them after this call said they were taken: the
  // doorbell would be sent again after the resume, the bytes would not.
  const auto attempt = [&]() -> Result<void> {
    return write_proven(*s_, *s_->window_mr, window_offset, *s_->mirror, window_offset, length, deadline);
  };
  return s_->bulk_run(attempt, deadline);
}

namespace {

// A BAR that is not plain memory goes through the exporter's bounce buffer: `step(part, len,
// bounce)` moves [part, part + len) of the staging buffer's first `n` bytes, one bounce-buffer
// load at a time.
template <class Step>
Result<void> bounce_walk(Attachment::State& s, std::size_t n, Step&& step) {
  RPCIE_TRY_ASSIGN(const auto bounce, s.session->peer_region(proto::kRegionBounce));
  const std::size_t chunk = std::min<std::size_t>(n, bounce.length);
  for (std::size_t part = 0; part < n; part += chunk) RPCIE_TRY(step(part, std::min(chunk, n - part), bounce));
  return {};
}

// Writes land in the bounce buffer, then a request commits them to the BAR.
Result<void> bounce_write(Attachment::State& s, std::uint8_t bar, std::uint64_t offset, std::size_t n,
                          Deadline deadline) {
  auto& ch = s.session->channel();
  return bounce_walk(s, n, [&](std::size_t part, std::size_t len, const RemoteRegion& bounce) -> Result<void> {
    // The commit is ordered behind the write: its reply proves the write in the bounce buffer.
    RPCIE_TRY(ch.rma_write(*s.staging_mr, part, bounce, 0, len, deadline));
    RPCIE_TRY(ch.rma_flush(deadline));
    RPCIE_TRY_ASSIGN(auto r, s.request(proto::BarCommit{bar, offset + part, len, 0}, deadline, false));
    return status_check(r.status, r.text, "BAR write");
  });
}

// The exporter fetches each load into the bounce buffer on request, then it is read.
Result<void> bounce_read(Attachment::State& s, std::uint8_t bar, std::uint64_t offset, std::size_t n,
                         Deadline deadline) {
  auto& ch = s.session->channel();
  return bounce_walk(s, n, [&](std::size_t part, std::size_t len, const RemoteRegion& bounce) -> Result<void> {
    proto::BarFetch f;
    f.bar = bar;
    f.offset = offset + part;
    f.length = len;
    RPCIE_TRY_ASSIGN(auto r, s.request(f, deadline, false));
    RPCIE_TRY(status_check(r.status, r.text, "BAR read"));
    RPCIE_TRY(ch.rma_read(*s.staging_mr, part, bounce, 0, len, deadline));
    return ch.rma_flush(deadline);
  });
}

}  // namespace

Result<void> Attachment::bar_write(std::uint8_t bar, std::uint64_t offset, std::span<const std::uint8_t> bytes,
                                   Deadline deadline) {
  return bar_write_fill(
      bar, offset, bytes.size(),
      [&](std::uint64_t at, std::span<std::uint8_t> piece) -> Result<void> {
        std::memcpy(piece.data(), bytes.data() + at, piece.size());
        return {};
      },
      deadline);
}

Result<void> Attachment::bar_write_fill(std::uint8_t bar, std::uint64_t offset, std::uint64_t length,
                                        const std::function<Result<void>(std::uint64_t, std::span<std::uint8_t>)>& fill,
                                        Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher);
  OperationTimer timer(s_->latency.bar_write, s_->operations_failed);
  RPCIE_TRY_ASSIGN(const BarDesc* b, s_->bulk_begin(bar, offset, length, true, deadline));
  std::lock_guard sg(s_->staging_lock);
  for (std::uint64_t done = 0; done < length;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(length - done, kStagingSize));
    // Filled once, outside the attempt: a source such as a pipe cannot be read twice, and a
    // resumed link's retry sends what the staging buffer still holds.
    RPCIE_TRY(fill(done, std::span<std::uint8_t>(s_->staging->data(), n)));
    const std::uint64_t at = offset + done;
    const auto attempt = [&]() -> Result<void> {
      if (!b->direct) return bounce_write(*s_, bar, at, n, deadline);
      RPCIE_TRY_ASSIGN(auto remote, s_->session->peer_region(bar));
      return write_proven(*s_, *s_->staging_mr, 0, remote, at, n, deadline);
    };
    RPCIE_TRY(s_->bulk_run(attempt, deadline));
    done += n;
  }
  s_->stats_update([&](AttachmentStats& st) { st.bar_bytes_written += length; });
  timer.done();
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
  Dispatcher::Call call(*s_->dispatcher);
  OperationTimer timer(s_->latency.bar_read, s_->operations_failed);
  RPCIE_TRY_ASSIGN(const BarDesc* b, s_->bulk_begin(bar, offset, length, false, deadline));
  std::lock_guard sg(s_->staging_lock);
  const auto attempt = [&]() -> Result<void> {
    auto& ch = s_->session->channel();
    for (std::uint64_t done = 0; done < length;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(length - done, kStagingSize));
      if (b->direct) {
        RPCIE_TRY_ASSIGN(auto remote, s_->session->peer_region(bar));
        RPCIE_TRY(rma_read_pieces(ch, *s_->staging_mr, 0, remote, offset + done, n, deadline));
        RPCIE_TRY(ch.rma_flush(deadline));
      } else {
        RPCIE_TRY(bounce_read(*s_, bar, offset + done, n, deadline));
      }
      take(done, std::span<const std::uint8_t>(s_->staging->data(), n));
      done += n;
    }
    return {};
  };
  RPCIE_TRY(s_->bulk_run(attempt, deadline));
  s_->stats_update([&](AttachmentStats& st) { st.bar_bytes_read += length; });
  timer.done();
  return {};
}

// Direct BAR <-> window transfer: the part the zero-copy variants share.
Result<void> Attachment::window_transfer(bool write, std::uint8_t bar, std::uint64_t offset,
                                         std::uint64_t window_offset, std::uint64_t length, Deadline deadline) {
  Dispatcher::Call call(*s_->dispatcher);
  OperationTimer timer(write ? s_->latency.bar_write : s_->latency.bar_read, s_->operations_failed);
  if (s_->window.size == 0) return fail(EINVAL, "this attachment has no DMA window");
  RPCIE_TRY_ASSIGN(const BarDesc* b, s_->bulk_begin(bar, offset, length, write, deadline));
  if (!b->direct) return fail(EOPNOTSUPP, "BAR " + std::to_string(bar) + " is not plain memory");
  const auto attempt = [&]() -> Result<void> {
    RPCIE_TRY_ASSIGN(auto remote, s_->session->peer_region(bar));
    if (write) return write_proven(*s_, *s_->window_mr, window_offset, remote, offset, length, deadline);
    auto& ch = s_->session->channel();
    RPCIE_TRY(rma_read_pieces(ch, *s_->window_mr, window_offset, remote, offset, length, deadline));
    return ch.rma_flush(deadline);
  };
  RPCIE_TRY(s_->bulk_run(attempt, deadline));
  s_->stats_update([&](AttachmentStats& st) { (write ? st.bar_bytes_written : st.bar_bytes_read) += length; });
  timer.done();
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

}  // namespace rpcie::client
