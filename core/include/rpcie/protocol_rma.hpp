// The messages that carry one-sided RMA on the sealed data path (channel.hpp, "Sealed
// RMA"; docs/protocol.md 4.25-4.28). protocol.hpp puts them in its Message variant; the
// codec treats them as every other message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rpcie/protocol_layout.hpp"
#include "rpcie/protocol_types.hpp"

namespace rpcie::proto {

// --- One-sided RMA carried as messages: the sealed data path (channel.hpp, "Sealed RMA") ---
// They never reach the application: the Channel serves and consumes them. `region` is the
// id the target gave the region in its hello (RegionDescriptor.key); offsets are from the
// region's start. request_id (header) names the operation: the initiator's tag.
// rma_put: bytes for [offset, +data) of the target's region. kRmaPutAck asks for an
// rma_done once they are in place (delivery complete); without it only a failure is answered.
inline constexpr std::uint8_t kRmaPutAck = 1;
struct RmaPut {
  static constexpr MsgType kType = MsgType::rma_put;
  static constexpr const char* kName = "rma_put";
  std::uint32_t region = 0;
  std::uint64_t offset = 0;
  std::uint8_t flags = 0;
  std::span<const std::uint8_t> data;
  static void fields(auto& m, auto&& f) {
    f("region", m.region);
    f("offset", m.offset);
    f("flags", m.flags, wire::Flags<kRmaPutAck>{});
    f("data", m.data, wire::Len<std::uint32_t, 1, kMaxRmaBytes>{});
  }
  static constexpr bool valid(const RmaPut& m) noexcept { return wire::range_fits(m.offset, m.data.size()); }
};
// rma_get: send me [offset, +length) of your region; answered by rma_data messages in
// order that together carry exactly `length` bytes, or by one rma_done with an error.
struct RmaGet {
  static constexpr MsgType kType = MsgType::rma_get;
  static constexpr const char* kName = "rma_get";
  std::uint32_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  static void fields(auto& m, auto&& f) {
    f("region", m.region);
    f("offset", m.offset);
    f("length", m.length, wire::Range<1, UINT32_MAX>{});
  }
  static constexpr bool valid(const RmaGet& m) noexcept { return wire::range_fits(m.offset, m.length); }
};
// rma_data: the bytes at `position` (from the start of the get) of the get named by request_id.
struct RmaData {
  static constexpr MsgType kType = MsgType::rma_data;
  static constexpr const char* kName = "rma_data";
  std::uint64_t position = 0;
  std::span<const std::uint8_t> data;
  static void fields(auto& m, auto&& f) {
    f("position", m.position);
    f("data", m.data, wire::Len<std::uint32_t, 1, kMaxRmaBytes>{});
  }
  static constexpr bool valid(const RmaData& m) noexcept { return wire::range_fits(m.position, m.data.size()); }
};
// rma_done: the put or get named by request_id is done (status 0: an acknowledged put is
// in place) or failed (a positive errno value: EACCES no such region or no access, EFAULT
// outside it). A failure fails the initiator's channel, as a failed RMA completion does.
struct RmaDone {
  static constexpr MsgType kType = MsgType::rma_done;
  static constexpr const char* kName = "rma_done";
  std::int32_t status = 0;
  static void fields(auto& m, auto&& f) { f("status", m.status, wire::Range<0, INT32_MAX>{}); }
};

}  // namespace rpcie::proto
