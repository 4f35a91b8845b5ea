// libFuzzer target: the exporter's request handler (AttachmentRequests, what a
// ServedAttachment's data thread runs for every message from the client) against the edu
// and membar device models, made from their export specs by backend_create. The data path
// around it is a fake: replies are recorded, the client's DMA window is a buffer here.
//
// Input: byte 0 picks the device (bit 0: edu or membar with doorbell and scratch BARs; bit
// 1: the device is attached with a DMA window or without ports). Then messages, each a
// u16 LE length and that many bytes, decoded with proto::message_decode as the channel
// does (undecodable ones are dropped, as there); after each, the device's inline work
// runs, as in ServedAttachment::data_run.
//
// Checks, beyond the sanitizers':
//  - config_read and mmio_read are answered by exactly one read_reply; config_write,
//    bar_fetch and bar_commit by exactly one write_ack; mmio_write, mmio_write_batch and
//    window_push by nothing or one error; pong by nothing; anything else by one EPROTO
//    error; every answer carries the request's id;
//  - the device's DMA stays inside the window it was given and its interrupts name
//    vectors it has.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "attachment_requests.hpp"
#include "backend.hpp"
#include "export_slot.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace rpcie;
using namespace rpcie::dev;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) fuzz::die("exporter_fuzz", what, detail);
}

constexpr std::size_t kWindow = 64u << 10;
constexpr std::size_t kBounce = 64u << 10;

struct Answer {
  proto::MsgType type;
  std::uint64_t rid;
  int error;  // ErrorMsg code, ReadReply / WriteAck status
};

class FakeLink final : public RequestLink {
 public:
  std::vector<Answer> answers;
  std::vector<std::uint8_t> window = std::vector<std::uint8_t>(kWindow);
  Result<void> reply_send(const proto::Message& m, std::uint64_t rid) override {
    int status = 0;
    if (auto* r = std::get_if<proto::ReadReply>(&m)) status = r->status;
    if (auto* w = std::get_if<proto::WriteAck>(&m)) status = w->status;
    answers.push_back({proto::message_type(m), rid, status});
    return {};
  }
  Result<void> error_send(int code, const std::string& text, std::uint64_t rid) override {
    check(code > 0, "an error answer with a code <= 0", text);
    answers.push_back({proto::MsgType::error, rid, code});
    return {};
  }
  Result<void> doorbell_prepare() override { return {}; }
  proto::TelemetryReply telemetry() const override { return DeviceActivity{}.telemetry(); }
  Result<void> window_fill(std::uint64_t iova, std::span<const std::uint8_t> bytes) override {
    if (iova > window.size() || bytes.size() > window.size() - iova) return fail(EINVAL, "window push outside");
    std::memcpy(window.data() + iova, bytes.data(), bytes.size());
    return {};
  }
};

class FakePorts final : public DmaPort, public IrqSink {
 public:
  explicit FakePorts(FakeLink& link, std::uint16_t vectors) : link_(link), vectors_(vectors) {}
  std::uint64_t window_size() const noexcept override { return kWindow; }
  Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline) override {
    if (iova > kWindow || into.size() > kWindow - iova) return fail(EFAULT, "DMA read outside the window");
    std::memcpy(into.data(), link_.window.data() + iova, into.size());
    return {};
  }
  Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline) override {
    if (iova > kWindow || from.size() > kWindow - iova) return fail(EFAULT, "DMA write outside the window");
    std::memcpy(link_.window.data() + iova, from.data(), from.size());
    return {};
  }
  void irq_raise(std::uint16_t vector) override {
    check(vector < vectors_, "an interrupt on a vector the device does not have", std::to_string(vector));
  }

 private:
  FakeLink& link_;
  std::uint16_t vectors_;
};

struct Device {
  ExportSlot slot;
  FakeLink link;
  std::unique_ptr<FakePorts> ports;
  std::unique_ptr<AttachmentRequests> requests;
  std::vector<std::uint8_t> bounce = std::vector<std::uint8_t>(kBounce);
  bool attached = false;

  explicit Device(ExportSpec spec) {
    slot.config.spec = spec;
    auto b = backend_create(spec);
    check(b.has_value(), "backend_create failed", b ? "" : b.error().describe());
    slot.backend = std::move(*b);
    slot.backend->work_inline_enable();
    ports = std::make_unique<FakePorts>(link, slot.backend->vector_count());
    requests = std::make_unique<AttachmentRequests>(slot, link, nullptr);
    requests->bounce_set(bounce);
  }
  // Back to the power-on state (detach resets), then attached as the input asks.
  void fresh(bool with_ports) {
    std::lock_guard g(slot.calls);
    if (attached) slot.backend->detach();
    auto a = slot.backend->attach(with_ports ? ports.get() : nullptr, with_ports ? ports.get() : nullptr);
    check(a.has_value(), "attach failed", a ? "" : a.error().describe());
    attached = true;
    link.answers.clear();
  }
};

Device& device(bool membar) {
  static Device* edu = new Device({.name = "edu0", .backend = "edu", .params = {}});
  static Device* mem = new Device(
      {.name = "membar0", .backend = "membar", .params = {{"size", "64K"}, {"doorbell", "on"}, {"scratch", "on"}}});
  return membar ? *mem : *edu;
}

// The answers `type` must get: exactly one of `want`, or (posted) nothing or one error.
void answers_check(const proto::Decoded& d, const std::vector<Answer>& got) {
  using T = proto::MsgType;
  const T t = d.header.type;
  const char* name = proto::msg_type_name(t);
  for (const auto& a : got) check(a.rid == d.header.request_id, "an answer with another request id", name);
  auto one_of = [&](T want) {
    check(got.size() == 1 && got[0].type == want, "not exactly one answer of the documented type", name);
  };
  switch (t) {
    case T::config_read:
    case T::mmio_read:
      one_of(T::read_reply);
      break;
    case T::config_write:
    case T::bar_fetch:
    case T::bar_commit:
      one_of(T::write_ack);
      break;
    case T::mmio_write:
    case T::mmio_write_batch:
    case T::window_push:
      check(got.empty() || (got.size() == 1 && got[0].type == T::error), "a posted write got an answer", name);
      break;
    case T::telemetry_request:
      one_of(T::telemetry_reply);
      break;
    case T::pong:
      check(got.empty(), "pong got an answer");
      break;
    default:
      one_of(T::error);
      check(got[0].error == EPROTO, "an unexpected message was refused with a code other than EPROTO", name);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Device& dev = device(data[0] & 1);
  dev.fresh((data[0] & 2) != 0);
  std::span<const std::uint8_t> in(data + 1, size - 1);
  while (in.size() >= 2) {
    const std::size_t n = std::min<std::size_t>(in[0] | (in[1] << 8), in.size() - 2);
    const auto frame = in.subspan(2, n);
    in = in.subspan(2 + n);
    auto d = proto::message_decode(frame);
    if (!d) continue;
    dev.link.answers.clear();
    auto sent = dev.requests->handle(*d);
    check(sent.has_value(), "handle failed with a link that never fails");
    answers_check(*d, dev.link.answers);
    std::lock_guard g(dev.slot.calls);
    dev.slot.backend->work_run();
  }
  return 0;
}
