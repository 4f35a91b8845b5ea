// The data path's AEAD alone, on one core: what sealed bulk transfers are measured against
// (docs/performance.md, "Sealed and open data paths"). No fabric, no second thread.
#pragma once

#include <memory>

#include "raw_loop.hpp"
#include "rpcie/message_seal.hpp"

namespace rpcie::bench {

struct AeadSpeed {
  auth::Aead aead = auth::Aead::aes256gcm;  // the cipher both ends of this machine would pick
  double seal_mbps = 0;                     // sealing messages the size of a full sealed rma_put
  double open_mbps = 0;                     // opening them, in order
};

// Seals, then opens, messages the size of a full rma_put for about `seconds` each.
AeadSpeed aead_speed_measure(double seconds = 0.2);

// The raw baseline's cipher for its sealed workloads: the data path's MessageSeal, with the
// cipher this machine picks and keys from a fixed key and fixed nonces, so that both of
// rpcie-bench's processes derive the same pair (a benchmark's keys, not a secret). The
// initiator seals with the client's keys, the target with the server's.
std::unique_ptr<raw::Sealer> raw_sealer_make(bool initiator);

}  // namespace rpcie::bench
