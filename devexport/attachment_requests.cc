// The requests of one attachment, performed on its device (attachment_requests.hpp).
#include "attachment_requests.hpp"

#include <algorithm>

#include <cstring>

#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"

namespace rpcie::dev {

const Region* AttachmentRequests::region_find(std::uint8_t bar) const {
  for (const auto& r : slot_.backend->regions())
    if (r.bar == bar) return &r;
  return nullptr;
}

// Bounce buffer <-> BAR for memory BARs that are not plain memory (or not offered).
Result<void> AttachmentRequests::bar_copy(const proto::BarCommit& c, bool to_bar) {
  const Region* r = region_find(c.bar);
  if (!r || r->kind != RegionKind::memory) return fail(EINVAL, "BAR " + std::to_string(c.bar) + " is not a memory BAR");
  if (c.offset > r->size || c.length > r->size - c.offset) return fail(EINVAL, "range outside the BAR");
  if (c.bounce_offset > bounce_.size() || c.length > bounce_.size() - c.bounce_offset)
    return fail(EINVAL, "range outside the bounce buffer");
  if (to_bar && r->readonly) return fail(EPERM, "BAR " + std::to_string(c.bar) + " is read-only");
  std::uint8_t* bounce = bounce_.data() + c.bounce_offset;
  auto mem = slot_.backend->bar_memory(c.bar);
  if (mem.size() == r->size) {
    if (to_bar)
      std::memcpy(mem.data() + c.offset, bounce, c.length);
    else
      std::memcpy(bounce, mem.data() + c.offset, c.length);
    return {};
  }
  // Through MMIO, the widest naturally aligned access at each step.
  return pci::access_split(c.offset, c.length, pci::kBarWidthMax, [&](std::uint64_t at, unsigned w) -> Result<void> {
    std::uint8_t* byte = bounce + (at - c.offset);
    if (to_bar) {
      std::uint64_t v = 0;
      std::memcpy(&v, byte, w);
      return device_write(c.bar, at, w, v);
    }
    RPCIE_TRY_ASSIGN(const std::uint64_t v, device_read(c.bar, at, w));
    std::memcpy(byte, &v, w);
    return {};
  });
}

Result<void> AttachmentRequests::posted_write(const proto::MmioWrite& m, AccessLog::Lines* lines) {
  if (!slot_.backend->mmio_write_is_doorbell(m.bar, m.offset))
    return device_write(m.bar, m.offset, m.width, m.value, lines);
  RPCIE_TRY(link_.doorbell_prepare());
  auto r = device_write(m.bar, m.offset, m.width, m.value, lines);
  // What the doorbell starts may end (an interrupt) before the batch does: its line is out first.
  if (lines != nullptr) lines->flush();
  return r;
}

Result<std::uint64_t> AttachmentRequests::device_read(std::uint8_t bar, std::uint64_t offset, unsigned width) {
  auto v = slot_.backend->mmio_read(bar, offset, width);
  access_record(false, bar, offset, width, v ? *v : 0, v ? 0 : v.error().to_errno());
  return v;
}

Result<void> AttachmentRequests::device_write(std::uint8_t bar, std::uint64_t offset, unsigned width,
                                              std::uint64_t value, AccessLog::Lines* lines) {
  auto r = slot_.backend->mmio_write(bar, offset, width, value);
  access_record(true, bar, offset, width, value, r ? 0 : r.error().to_errno(), lines);
  return r;
}

void AttachmentRequests::access_record(bool write, std::uint8_t bar, std::uint64_t offset, unsigned width,
                                       std::uint64_t value, int error, AccessLog::Lines* lines) const noexcept {
  if (access_log_ == nullptr) return;
  const AccessRecord r{.export_name = slot_.config.spec.name,
                       .write = write,
                       .bar = bar,
                       .offset = offset,
                       .width = width,
                       .value = value,
                       .error = error};
  if (lines != nullptr)
    lines->record(r);
  else
    access_log_->record(r);
}

bool AttachmentRequests::rings_doorbell(const proto::Message& m) const {
  const auto doorbell = [&](const proto::MmioWrite& w) {
    return slot_.backend->mmio_write_is_doorbell(w.bar, w.offset);
  };
  if (const auto* w = std::get_if<proto::MmioWrite>(&m)) return doorbell(*w);
  std::span<const proto::MmioWrite> writes;
  if (const auto* b = std::get_if<proto::MmioWriteBatch>(&m)) writes = b->writes;
  if (const auto* p = std::get_if<proto::WindowPush>(&m)) writes = p->writes;
  return std::any_of(writes.begin(), writes.end(), doorbell);
}

Result<void> AttachmentRequests::handle(const proto::Decoded& d) {
  const auto rid = d.header.request_id;
  Result<void> sent{};
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        std::unique_lock calls(slot_.calls);
        if constexpr (std::is_same_v<M, proto::ConfigRead>) {
          auto v = slot_.backend->config_read(m.offset, m.width);
          calls.unlock();
          sent = link_.reply_send(proto::ReadReply{v ? 0 : v.error().to_errno(), v ? *v : 0}, rid);
        } else if constexpr (std::is_same_v<M, proto::ConfigWrite>) {
          auto r = slot_.backend->config_write(m.offset, m.width, m.value);
          calls.unlock();
          sent = link_.reply_send(proto::WriteAck{r ? 0 : r.error().to_errno()}, rid);
        } else if constexpr (std::is_same_v<M, proto::MmioRead>) {
          auto v = device_read(m.bar, m.offset, m.width);
          calls.unlock();
          sent = link_.reply_send(proto::ReadReply{v ? 0 : v.error().to_errno(), v ? *v : 0}, rid);
        } else if constexpr (std::is_same_v<M, proto::MmioWrite>) {
          auto r = posted_write(m);
          calls.unlock();
          // Posted: only a failure is answered (the client reports it on its next call).
          if (!r) sent = link_.error_send(r.error().to_errno(), r.error().message, rid);
        } else if constexpr (std::is_same_v<M, proto::MmioWriteBatch> || std::is_same_v<M, proto::WindowPush>) {
          // Each step is performed, in order, whatever became of the one before (as
          // posted writes on PCIe); the first failure is reported.
          Result<void> first_failure{};
          if constexpr (std::is_same_v<M, proto::WindowPush>)
            first_failure = link_.window_fill(m.window_offset, m.data);
          AccessLog::Lines lines(access_log_);
          for (const auto& w : m.writes) {
            auto r = posted_write(w, &lines);
            if (!r && first_failure) first_failure = r;
          }
          lines.flush();  // under the call lock: the file keeps the device's order
          calls.unlock();
          if (!first_failure)
            sent = link_.error_send(first_failure.error().to_errno(), first_failure.error().message, rid);
        } else if constexpr (std::is_same_v<M, proto::BarFetch>) {
          auto r = bar_copy(m, false);
          calls.unlock();
          sent = link_.reply_send(proto::WriteAck{r ? 0 : r.error().to_errno()}, rid);
        } else if constexpr (std::is_same_v<M, proto::BarCommit>) {
          auto r = bar_copy(m, true);
          calls.unlock();
          sent = link_.reply_send(proto::WriteAck{r ? 0 : r.error().to_errno()}, rid);
        } else if constexpr (std::is_same_v<M, proto::TelemetryRequest>) {
          calls.unlock();  // the device is not asked
          sent = link_.reply_send(link_.telemetry(), rid);
        } else if constexpr (std::is_same_v<M, proto::Pong>) {
          calls.unlock();  // the answer to the warm-up ping of setup()
        } else {
          calls.unlock();
          RPCIE_LOG_ONCE(LogLevel::warn, "exportd", "unexpected {} on the data path",
                         proto::msg_type_name(d.header.type));
          sent = link_.error_send(EPROTO, std::string("unexpected ") + proto::msg_type_name(d.header.type), rid);
        }
      },
      d.message);
  return sent;
}

}  // namespace rpcie::dev
