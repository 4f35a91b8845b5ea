// The data path's AEAD alone, on one core: what sealed bulk transfers are measured against
// (docs/performance.md, "Sealed and open data paths"). No fabric, no second thread.
#pragma once

#include "rpcie/message_seal.hpp"

namespace rpcie::bench {

struct AeadSpeed {
  auth::Aead aead = auth::Aead::aes256gcm;  // the cipher both ends of this machine would pick
  double seal_mbps = 0;                     // sealing messages the size of a full sealed rma_put
  double open_mbps = 0;                     // opening them, in order
};

// Seals, then opens, messages the size of a full rma_put for about `seconds` each.
AeadSpeed aead_speed_measure(double seconds = 0.2);

}  // namespace rpcie::bench
