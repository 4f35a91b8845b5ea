// The parts of a Channel that channel.cc and channel_rma_sealed.cc share (private to
// core/src): a posted operation, a completed receive, and the state of sealed RMA.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include <rdma/fabric.h>

#include "rpcie/channel.hpp"

#include "rpcie/log.hpp"
#include "rpcie/message_seal.hpp"

namespace rpcie {

// Bytes that message_send() encodes, and sealed RMA seals, on the stack.
inline constexpr std::size_t kInjectStaging = 512;
// The most a sealed message may take of a provider's inject size: its staging buffer.
inline constexpr std::size_t kSealStagingMax = 16u << 10;
// A message slot holds the largest message, sealed.
inline constexpr std::size_t kSlotBytes = proto::kMaxMessage + auth::kSealOverhead;

// Refused messages are a peer's doing (or an attacker's): logged at a bounded rate.
LogLimiter& channel_refusal_log();

// One posted operation. The fi_context2 must come first: libfabric hands its address back
// as op_context and we convert it to the Op.
struct Channel::Op {
  fi_context2 context{};
  enum class Kind : std::uint8_t { send, recv, rma } kind = Kind::send;
  std::uint8_t* buffer = nullptr;  // send/recv: this op's slot in message_memory_
  std::size_t bytes = 0;           // rma: chunk length
  std::uint64_t seq = 0;           // recv: position in posting order
  bool is_write = false;
  // Sealed RMA. A send that carries a posted rma_put completes its rma op with it (linked);
  // an rma op that waits for the peer (a get, an acknowledged put) is named by its tag.
  Op* linked = nullptr;
  std::uint64_t tag = 0;
  std::uint8_t* dest = nullptr;  // get: where the data goes
  std::size_t received = 0;      // get: bytes arrived so far
};

struct Channel::RecvDone {
  Op* op = nullptr;
  std::size_t length = 0;  // received bytes; once opened, the message's
  std::size_t offset = 0;  // once opened: where the message starts in op->buffer
  bool foreign = false;    // from an address other than the peer: dropped on delivery
  bool opened = false;     // checked (and on a sealed channel decrypted in place)
};

struct Channel::Sealed {
  // A peer's get being answered: rma_data from base, `position` bytes sent so far.
  struct Serve {
    std::uint64_t tag = 0;
    const std::uint8_t* base = nullptr;
    std::size_t length = 0;
    std::size_t position = 0;
  };
  struct Done {
    std::uint64_t tag = 0;
    std::int32_t status = 0;
  };
  // Where [offset, offset + length) of region `key` begins, with `error` 0, when the peer may
  // reach it (to write, or to read); else `error` EACCES (no such region, or not that way) or
  // EFAULT (out of its bounds), and nullptr.
  std::uint8_t* region_reach(std::uint32_t key, std::uint64_t offset, std::uint64_t length, bool write,
                             int& error) const {
    error = EACCES;
    for (const auto& r : regions) {
      if (r.key != key) continue;
      if (!(write ? r.remote_write : r.remote_read)) return nullptr;
      if (offset > r.length || length > r.length - offset) {
        error = EFAULT;
        return nullptr;
      }
      error = 0;
      return r.base + offset;
    }
    return nullptr;
  }

  std::vector<SealedRegion> regions;
  std::uint64_t tag_next = 1;
  std::vector<Op*> awaiting;  // rma ops that wait for the peer (at most `window`)
  std::deque<Serve> serves;   // the peer's gets, answered in arrival order
  std::deque<Done> dones;     // rma_done answers not yet sent
  // Application messages, opened and in order, until message_recv() takes them.
  std::deque<std::vector<std::uint8_t>> inbox;
  std::vector<std::vector<std::uint8_t>> spare;  // their buffers, for reuse
  bool draining = false;                         // sealed_drain_locked() is on the stack
  std::uint64_t refused = 0;                     // peer requests refused (no region, access, bounds)
};

}  // namespace rpcie
