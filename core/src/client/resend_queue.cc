// The messages sent and not yet proven performed (resend_queue.hpp).
#include "resend_queue.hpp"

#include "rpcie/protocol.hpp"

namespace rpcie::client {

bool ResendQueue::keep(std::uint64_t request_id, std::span<const std::uint8_t> encoded) {
  std::lock_guard g(lock_);
  if (proto::request_order(request_id) <= last_) return false;
  last_ = proto::request_order(request_id);
  kept_.push_back({request_id, {encoded.begin(), encoded.end()}});
  bytes_.fetch_add(encoded.size(), std::memory_order_relaxed);
  return true;
}

void ResendQueue::performed_through(std::uint64_t request_id) {
  std::lock_guard g(lock_);
  while (!kept_.empty() && proto::request_order(kept_.front().request_id) <= proto::request_order(request_id)) {
    bytes_.fetch_sub(kept_.front().bytes.size(), std::memory_order_relaxed);
    kept_.pop_front();
  }
}

std::vector<ResendQueue::Kept> ResendQueue::after(std::uint64_t performed) const {
  std::lock_guard g(lock_);
  std::vector<Kept> out;
  for (const auto& k : kept_)
    if (proto::request_order(k.request_id) > proto::request_order(performed)) out.push_back(k);
  return out;
}

std::size_t ResendQueue::bytes() const { return bytes_.load(std::memory_order_relaxed); }

std::size_t ResendQueue::size() const {
  std::lock_guard g(lock_);
  return kept_.size();
}

}  // namespace rpcie::client
