// The client's requests of one attachment, performed on its device: configuration space,
// MMIO reads and posted writes (alone, batched, or behind a window push), and copies
// between the bounce buffer and a memory BAR. The data path around them (Session, DMA,
// mirror, the data thread) is ServedAttachment's (served_attachment.hpp); what a request
// needs from it is a RequestLink. Kept apart so that the fuzz target of the exporter's
// request handler drives exactly this code against a device model, without a fabric.
//
// Answers (docs/protocol.md): config_read, mmio_read -> read_reply; config_write,
// bar_fetch, bar_commit -> write_ack (each with the errno of a failed access, 0 if
// performed); mmio_write, mmio_write_batch, window_push -> nothing, or an error with the
// first failure; telemetry_request -> telemetry_reply; pong -> nothing; anything else ->
// error EPROTO.
//
// Threads: handle() is called by one thread at a time (the attachment's data thread); it
// takes ExportSlot::calls around each device call.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "access_log.hpp"
#include "export_slot.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie::dev {

// What the requests need from the attachment's data path.
class RequestLink {
 public:
  virtual ~RequestLink() = default;
  // The answer `m` to request `rid`, behind the device's DMA writes that came before it (rule 4).
  virtual Result<void> reply_send(const proto::Message& m, std::uint64_t rid) = 0;
  // An error answer to `rid`.
  virtual Result<void> error_send(int code, const std::string& text, std::uint64_t rid) = 0;
  // Called (ExportSlot::calls held) before a posted write to a doorbell register: the
  // driver's memory is to reach the device before the doorbell does (rule 3).
  virtual Result<void> doorbell_prepare() = 0;
  // A window push's bytes for what the device reads next (ExportSlot::calls held).
  virtual Result<void> window_fill(std::uint64_t iova, std::span<const std::uint8_t> bytes) = 0;
  // What the attachment's device did so far (telemetry_request's answer).
  virtual proto::TelemetryReply telemetry() const = 0;
};

class AttachmentRequests {
 public:
  // `slot` and `link` must outlive this; `access_log` (null: none) records every MMIO
  // access performed on the device.
  AttachmentRequests(ExportSlot& slot, RequestLink& link, AccessLog* access_log) noexcept
      : slot_(slot), link_(link), access_log_(access_log) {}

  // The bounce buffer that bar_fetch and bar_commit copy through (none until set: every
  // such request is then refused with EINVAL).
  void bounce_set(std::span<std::uint8_t> bounce) noexcept { bounce_ = bounce; }

  // Performs request `d` and sends its answer, if it has one. Returns the failure to send
  // (the attachment has then failed); a failed device access is answered, not returned.
  Result<void> handle(const proto::Decoded& d);
  // Whether performing `m` writes a doorbell (mmio_write_is_doorbell) anywhere in it.
  bool rings_doorbell(const proto::Message& m) const;

 private:
  const Region* region_find(std::uint8_t bar) const;
  Result<void> bar_copy(const proto::BarCommit& c, bool to_bar);
  // `lines`: where a batch gathers its access log lines (null: each written at once).
  Result<void> posted_write(const proto::MmioWrite& m, AccessLog::Lines* lines = nullptr);
  // One MMIO access of the device (slot_.calls held), recorded in the access log if any.
  Result<std::uint64_t> device_read(std::uint8_t bar, std::uint64_t offset, unsigned width);
  Result<void> device_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value,
                            AccessLog::Lines* lines = nullptr);
  // The access log's line for an access just performed (value: read or written; error: its
  // errno, 0 if performed). Nothing without a log.
  void access_record(bool write, std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value, int error,
                     AccessLog::Lines* lines = nullptr) const noexcept;

  ExportSlot& slot_;
  RequestLink& link_;
  AccessLog* access_log_;
  std::span<std::uint8_t> bounce_;
};

}  // namespace rpcie::dev
