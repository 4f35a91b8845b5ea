#include "remote_device.hpp"

#include <algorithm>
#include <atomic>

#include <unistd.h>

#include "rpcie/log.hpp"

namespace rpcie::hostd {

namespace {

constexpr auto kBackoffFirst = std::chrono::milliseconds(100);
constexpr auto kSuperviseSlice = std::chrono::seconds(60);
constexpr auto kBackoffMax = std::chrono::seconds(2);

// PCI Express functions have 4 KiB of config space (sysfs shows 4096), others 256.
std::uint32_t config_size_probe(client::Attachment& a, Deadline deadline) {
  auto status = a.config_read(0x06, 2, deadline);
  if (!status || (*status & 0x10) == 0) return pci::kConfigSpaceLegacySize;
  auto ptr = a.config_read(0x34, 1, deadline);
  std::uint32_t at = ptr ? (*ptr & 0xfc) : 0;
  for (int hops = 0; at >= 0x40 && hops < 48; ++hops) {
    auto cap = a.config_read(static_cast<std::uint16_t>(at), 2, deadline);
    if (!cap) break;
    if ((*cap & 0xff) == 0x10) return pci::kConfigSpaceSize;
    at = (*cap >> 8) & 0xfc;
  }
  return pci::kConfigSpaceLegacySize;
}

// An error that will not go away by retrying: the state is "failed" (retries go on).
bool error_permanent(const Error& e) {
  const int code = e.to_errno();
  return code == EACCES || code == ENOENT || code == EPERM || code == EINVAL;
}

}  // namespace

const char* link_state_name(LinkState s) noexcept {
  switch (s) {
    case LinkState::connected:
      return "connected";
    case LinkState::resuming:
      return "resuming";
    case LinkState::reconnecting:
      return "reconnecting";
    case LinkState::failed:
      return "failed";
  }
  return "unknown";
}

RemoteDevice::RemoteDevice(const AttachParams& params, const AttachContext& context, unsigned index,
                           DmaWindowFile window)
    : params_(params), context_(context), index_(index), window_(std::move(window)) {}

Result<std::shared_ptr<client::Attachment>> RemoteDevice::open_once(Deadline deadline) {
  client::ClientOptions options = context_.client;
  if (params_.data_path) options.data_path = *params_.data_path;
  auto a = client::Attachment::open(params_.host, params_.port, params_.export_name, options,
                                    client::DmaWindow{window_.base(), window_.size()}, deadline);
  if (!a) return tl::unexpected(a.error());
  return std::shared_ptr<client::Attachment>(std::move(*a));
}

Result<std::shared_ptr<RemoteDevice>> RemoteDevice::attach(const AttachParams& params, const AttachContext& context,
                                                           unsigned index, Deadline deadline) {
  // Unique for this hostd's life (an old window may still be mapped by a driver).
  static std::atomic<std::uint64_t> windows{0};
  const std::string file = window_file_name(::getpid(), index, ++windows);
  auto window = DmaWindowFile::create(context.shm_dir, file, params.window_size, context.group, context.mode);
  if (!window) return tl::unexpected(window.error());
  std::shared_ptr<RemoteDevice> d(new RemoteDevice(params, context, index, std::move(*window)));
  auto a = d->open_once(deadline);
  if (!a) return tl::unexpected(a.error());
  d->desc_ = (*a)->device();
  d->config_size_ = config_size_probe(**a, deadline);
  // Region addresses for `resource`: what the device's BARs hold, or a synthetic address
  // where the exporter reports none: 64-bit BARs from 0xf000000000 + 64 GiB per device,
  // 32-bit ones below 4 GiB from 0xc0000000 + 16 MiB per device (sizes beyond that share).
  std::uint64_t synthetic = 0xf000000000ull + static_cast<std::uint64_t>(index) * 0x1000000000ull;
  std::uint64_t synthetic32 = 0xc0000000ull + (static_cast<std::uint64_t>(index) % 64) * 0x1000000ull;
  for (const auto& b : d->desc_.bars) {
    if (b.bar >= pci::kBarCount) continue;
    std::uint64_t addr = 0;
    if (auto lo = (*a)->config_read(static_cast<std::uint16_t>(0x10 + 4 * b.bar), 4, deadline)) {
      addr = *lo & (b.kind == pci::BarKind::io ? ~0x3ull : ~0xfull) & 0xffffffffull;
      if (b.is_64bit && b.bar < pci::kBarMax)
        if (auto hi = (*a)->config_read(static_cast<std::uint16_t>(0x14 + 4 * b.bar), 4, deadline))
          addr |= static_cast<std::uint64_t>(*hi) << 32;
    }
    if (addr == 0) {
      auto& next = b.is_64bit ? synthetic : synthetic32;
      const std::uint64_t align = std::max<std::uint64_t>(b.size, 4096);
      next = (next + align - 1) / align * align;
      addr = next;
      next += b.size;
    }
    d->bar_address_[b.bar] = addr;
  }
  d->counts_ = InterruptCounts(d->desc_.vectors);
  d->install(std::move(*a));
  d->supervisor_ = std::thread([raw = d.get()] { raw->supervise(); });
  return d;
}

RemoteDevice::~RemoteDevice() { (void)detach(Deadline::after(std::chrono::seconds(1))); }

void RemoteDevice::listen(std::function<void(DeviceChange)> listener) {
  std::lock_guard l(listener_lock_);
  listener_ = std::move(listener);
}

void RemoteDevice::notify(DeviceChange change) {
  std::lock_guard l(listener_lock_);
  if (listener_) listener_(change);
}

bool RemoteDevice::counts_refresh_locked() {
  return counts_.refresh([this](std::uint16_t v) { return current_ ? current_->interrupt_count(v) : 0; });
}

void RemoteDevice::counts_refresh(std::optional<Deadline::Clock::time_point> arrived) {
  bool rose;
  {
    std::lock_guard g(lock_);
    rose = counts_refresh_locked();
  }
  if (!rose) return;
  notify(DeviceChange::interrupt);
  if (arrived) interrupt_delivery_.record(Deadline::Clock::now() - *arrived);
}

void RemoteDevice::install(std::shared_ptr<client::Attachment> a) {
  client::Attachment* raw = a.get();
  {
    std::lock_guard g(lock_);
    current_ = std::move(a);
    // The old attachment's listener is gone (supervise): no delivery of it is recorded after.
    delivery_base_ = interrupt_delivery_.snapshot();
    if (watchers_ > 0) current_->interrupt_watch(true);
    data_path_ = current_->data_path();
    state_ = LinkState::connected;
    counts_refresh_locked();
  }
  // The attachment's news: interrupts refresh the counts; a failure wakes the supervisor,
  // which reports the loss once it has taken the attachment out.
  raw->listen([this, raw] {
    {
      std::lock_guard g(lock_);
      if (current_.get() != raw) return;
      if (raw->failure()) return wake_.notify_all();
    }
    // Read now, in the listener: the arrival of the interrupt it hears of (client.hpp).
    counts_refresh(raw->interrupt_arrived());
  });
  counts_refresh();  // interrupts that arrived before the listener was in place
}

void RemoteDevice::supervise() {
  auto backoff = std::chrono::milliseconds(kBackoffFirst);
  std::unique_lock g(lock_);
  while (!stop_) {
    if (current_) {
      // Only the attachment's own failure ends it (lost heartbeats, a broken connection): an
      // operation past its deadline fails alone (PCIe's completion timeout).
      auto lost = [&] { return current_ && current_->failure(); };
      // The attachment's listener and stop_request() notify under lock_: the slice only
      // bounds the wait (each end of one is a wake-up of an idle device).
      wake_.wait_for(g, kSuperviseSlice, [&] { return stop_ || lost(); });
      if (stop_ || !current_ || !lost()) continue;
      // Lost: take the attachment out, keep its interrupt counts, tell the tree.
      auto old = std::move(current_);
      if (const auto why = old->failure()) last_error_ = why->describe();
      state_ = LinkState::reconnecting;
      ++losses_;
      g.unlock();
      old->listen(nullptr);
      {
        std::lock_guard c(lock_);
        counts_.attachment_end([&old](std::uint16_t v) { return old->interrupt_count(v); });
      }
      RPCIE_LOG_WARN("hostd", "rpcie{}: {} on {}:{} lost ({}); reconnecting", index_, params_.export_name, params_.host,
                     params_.port, last_error_);
      notify(DeviceChange::lost);
      old.reset();  // bounded: a failed attachment ends without waiting for the exporter
      backoff = kBackoffFirst;
      g.lock();
      continue;
    }
    // Reconnecting: back off, then try once.
    wake_.wait_for(g, backoff, [&] { return stop_; });
    if (stop_) break;
    g.unlock();
    auto a = open_once(Deadline::after(context_.attach_timeout));
    g.lock();
    if (stop_) break;  // the attachment (if any) is dropped below, outside the lock
    if (!a) {
      last_error_ = a.error().describe();
      state_ = error_permanent(a.error()) ? LinkState::failed : LinkState::reconnecting;
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, kBackoffMax);
      continue;
    }
    ++generation_;
    g.unlock();
    install(std::move(*a));
    RPCIE_LOG_INFO("hostd", "rpcie{}: {} on {}:{} reconnected (generation {})", index_, params_.export_name,
                   params_.host, params_.port, generation_);
    notify(DeviceChange::reconnected);
    g.lock();
  }
}

Result<std::shared_ptr<client::Attachment>> RemoteDevice::link() const {
  std::lock_guard g(lock_);
  if (detached_) return fail(ENOTCONN, "rpcie" + std::to_string(index_) + " is detached");
  if (!current_)
    return fail(EIO, "rpcie" + std::to_string(index_) + " is " + link_state_name(state_) + ": " + last_error_);
  return current_;
}

Result<std::shared_ptr<client::Attachment>> RemoteDevice::link(std::uint64_t generation) const {
  {
    std::lock_guard g(lock_);
    if (!detached_ && generation != generation_)
      return fail(EIO, "rpcie" + std::to_string(index_) + " was reset (generation " + std::to_string(generation_) +
                           ", opened at " + std::to_string(generation) + "): reopen it");
  }
  return link();
}

std::uint64_t RemoteDevice::generation() const {
  std::lock_guard g(lock_);
  return generation_;
}

RemoteDevice::Status RemoteDevice::status() const {
  std::shared_ptr<client::Attachment> a;
  Status s;
  {
    std::lock_guard g(lock_);
    s.state = state_;
    s.generation = generation_;
    s.losses = losses_;
    s.last_error = last_error_;
    s.data_path = data_path_;
    s.interrupt_delivery = interrupt_delivery_.snapshot().since(delivery_base_);
    a = current_;
  }
  if (a) {
    s.provider = a->provider();
    s.stats = a->stats();
    s.latency = a->latency();
    if (auto loss = a->link_loss(); loss && s.state == LinkState::connected) {
      s.state = LinkState::resuming;
      s.last_error = loss->describe();
    }
  }
  return s;
}

std::uint64_t RemoteDevice::losses() const {
  std::lock_guard g(lock_);
  return losses_;
}

std::uint64_t RemoteDevice::interrupts(std::uint16_t vector) const {
  std::lock_guard g(lock_);
  return counts_.visible(vector);
}

void RemoteDevice::mask_set(std::uint16_t vector, bool masked) {
  {
    std::lock_guard g(lock_);
    if (!counts_.mask_set(vector, masked)) return;
  }
  if (!masked) counts_refresh();  // what arrived while masked is delivered now
}

void RemoteDevice::interrupt_watch(bool watching) {
  std::lock_guard g(lock_);
  const bool before = watchers_ > 0;
  watchers_ = watching ? watchers_ + 1 : watchers_ - 1;
  if (current_ && before != (watchers_ > 0)) current_->interrupt_watch(watchers_ > 0);
}

void RemoteDevice::stop_request() {
  std::lock_guard g(lock_);
  stop_ = true;
  wake_.notify_all();
  window_.unlink();  // the `dma` link goes with the tree; the memory with this object
}

Result<void> RemoteDevice::detach(Deadline deadline) {
  std::shared_ptr<client::Attachment> a;
  stop_request();
  {
    std::lock_guard g(lock_);
    if (detached_) return {};
    detached_ = true;
  }
  if (supervisor_.joinable()) supervisor_.join();
  {
    std::lock_guard g(lock_);
    a = std::move(current_);
  }
  listen(nullptr);
  if (!a) return {};
  a->listen(nullptr);
  if (a->failure()) return {};
  return a->detach(deadline);
}

}  // namespace rpcie::hostd
