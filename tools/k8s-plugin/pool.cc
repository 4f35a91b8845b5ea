#include "pool.hpp"

namespace rpcie::k8s {

Pool::Pool(std::vector<PoolDevice> devices) : devices_(std::move(devices)) {
  for (const auto& d : devices_) views_.push_back({d.id, false, "not checked yet", std::nullopt});
}

const PoolDevice* Pool::device_find(const std::string& id) const noexcept {
  for (const auto& d : devices_)
    if (d.id == id) return &d;
  return nullptr;
}

std::vector<DeviceView> Pool::snapshot(std::uint64_t* generation) const {
  std::lock_guard g(lock_);
  if (generation) *generation = generation_;
  return views_;
}

std::optional<DeviceView> Pool::view(const std::string& id) const {
  std::lock_guard g(lock_);
  for (const auto& v : views_)
    if (v.id == id) return v;
  return std::nullopt;
}

void Pool::health_set(const std::string& id, bool healthy, const std::string& why) {
  std::lock_guard g(lock_);
  for (auto& v : views_) {
    if (v.id != id) continue;
    v.why = healthy ? std::string() : why;
    if (v.healthy == healthy) return;
    v.healthy = healthy;
    ++generation_;
    changed_.notify_all();
    return;
  }
}

void Pool::holding_set(const std::string& id, std::optional<Holding> holding) {
  std::lock_guard g(lock_);
  for (auto& v : views_)
    if (v.id == id) v.holding = std::move(holding);
}

bool Pool::changed_wait(std::uint64_t seen, Deadline deadline) const {
  std::unique_lock g(lock_);
  changed_.wait_until(g, deadline.when(), [&] { return generation_ > seen || stopped_; });
  return generation_ > seen;
}

void Pool::stop() {
  std::lock_guard g(lock_);
  stopped_ = true;
  changed_.notify_all();
}

bool Pool::stopped() const {
  std::lock_guard g(lock_);
  return stopped_;
}

}  // namespace rpcie::k8s
