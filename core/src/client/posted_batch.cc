#include "posted_batch.hpp"

#include <algorithm>
#include <utility>

namespace rpcie::client {

namespace {

// Sizes of the encoding, from the encoder itself: a write's entry, and what a
// mmio_write_batch and a window_push carry besides their writes (and the push's bytes).
struct EncodedSizes {
  std::size_t entry;
  std::size_t batch_fixed;
  std::size_t push_fixed;
};

const EncodedSizes& encoded_sizes() {
  static const EncodedSizes sizes = [] {
    static const std::uint8_t kByte[1] = {0};
    const proto::MmioWrite w{};
    const std::size_t one = proto::message_encoded_size(proto::MmioWriteBatch{{w}});
    const std::size_t entry = proto::message_encoded_size(proto::MmioWriteBatch{{w, w}}) - one;
    return EncodedSizes{entry, one - entry, proto::message_encoded_size(proto::WindowPush{0, kByte, {}}) - 1};
  }();
  return sizes;
}

}  // namespace

std::size_t PostedBatch::writes_max_for(std::size_t inject_size) {
  constexpr std::size_t kWorthIt = 16;
  const auto& z = encoded_sizes();
  if (inject_size < z.batch_fixed + kWorthIt * z.entry) return proto::kMaxBatch;
  return std::min(proto::kMaxBatch, (inject_size - z.batch_fixed) / z.entry);
}

std::vector<std::size_t> PostedBatch::push_pieces_ahead(std::size_t inject, std::size_t length, std::size_t writes) {
  const auto& z = encoded_sizes();
  const std::size_t with_writes = z.push_fixed + writes * z.entry;
  if (inject < kPushSplitInjectMin || with_writes + length <= inject || with_writes >= inject) return {};
  const std::size_t piece = inject - z.push_fixed;  // a piece alone
  std::vector<std::size_t> out;
  for (std::size_t ahead = length - (inject - with_writes); ahead > 0;) {
    out.push_back(std::min(piece, ahead));
    ahead -= out.back();
  }
  return out;
}

PostedBatch::Added PostedBatch::batch_start_locked(Clock::time_point now, Clock::time_point waited) {
  const auto gap = now - last_end_;
  last_end_ = now;
  // A driver that rings a doorbell and waits for each (a read, or polling host memory for
  // longer than kBatchDelay) must find every doorbell eager, not every fifth. The write being
  // added is counted already: it belongs to the window it starts.
  const int writes = window_.writes - 1;
  if (gap > kBatchDelay || waited > window_.start) {
    window_ = Window{now, {}, 1};
  } else if ((window_.app += gap) > kBatchDelay) {
    window_ = Window{now, {}, 1, 0, writes > kEagerWrites};
  }
  since_ = now;
  pending_.store(true, std::memory_order_relaxed);
  // Sent by the caller through the batch, so that a write another thread queued meanwhile
  // leaves with it, in order.
  Added out;
  out.send_now = !window_.stream && window_.eager < kEagerWrites;
  window_.eager += out.send_now;
  out.wake = !out.send_now;
  out.due = now + kBatchDelay;
  return out;
}

void PostedBatch::write_end(Clock::time_point now) {
  std::lock_guard g(lock_);
  last_end_ = std::max(last_end_, now);
}

bool PostedBatch::burst_add(const proto::MmioWrite& write, Clock::time_point now) {
  std::lock_guard g(lock_);
  writes_.push_back(write);
  if (writes_.size() == 1) {
    since_ = now;
    pending_.store(true, std::memory_order_relaxed);
  }
  return writes_.size() >= writes_max_;
}

bool PostedBatch::push_set(std::span<const std::uint8_t> bytes, std::uint64_t at, Clock::time_point now) {
  std::lock_guard g(lock_);
  if (!empty_locked()) return false;
  push_.assign(bytes.begin(), bytes.end());
  push_at_ = at;
  since_ = now;
  pending_.store(true, std::memory_order_relaxed);
  return true;
}

std::optional<PostedBatch::Taken> PostedBatch::take(Clock::time_point now, bool only_if_due) {
  std::lock_guard g(lock_);
  if (empty_locked()) return std::nullopt;
  if (only_if_due && now - since_ < kBatchDelay) return std::nullopt;
  last_end_ = std::max(last_end_, now);
  Taken out;
  std::swap(out.writes, writes_);
  std::swap(out.push, push_);
  out.push_at = push_at_;
  writes_.reserve(writes_max_);
  pending_.store(false, std::memory_order_relaxed);
  return out;
}

std::optional<PostedBatch::Clock::time_point> PostedBatch::due() const {
  std::lock_guard g(lock_);
  if (empty_locked()) return std::nullopt;
  return since_ + kBatchDelay;
}

}  // namespace rpcie::client
