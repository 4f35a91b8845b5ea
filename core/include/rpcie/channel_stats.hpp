// Counters of one Channel (one fabric link): what channel.hpp's Channel::stats() and the client
// API's Attachment::channel_stats() report. Plain values, a snapshot; no libfabric types.
#pragma once

#include <cstdint>

namespace rpcie {

struct ChannelStats {
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint64_t messages_rejected = 0;  // failed to decode
  std::uint64_t messages_foreign = 0;   // dropped: not sent by the peer (Fabric::source_known)
  std::uint64_t messages_forged = 0;    // dropped: failed authentication (sealed channel)
  std::uint64_t messages_replayed = 0;  // dropped: authentic but replayed or out of order
  std::uint64_t rma_writes = 0;         // chunks
  std::uint64_t rma_reads = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t bytes_read = 0;
  // Sealed RMA, as the peer's target: its puts and gets served, and refused (no such region,
  // no access, out of bounds, too many at once).
  std::uint64_t rma_served = 0;
  std::uint64_t rma_refused = 0;
  // Polls of the completion queue, busy or not: what waiting costs (an idle waiter polls
  // once or twice per wake-up, a spinning one thousands of times a millisecond).
  std::uint64_t polls = 0;
};

}  // namespace rpcie
