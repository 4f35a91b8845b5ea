// Raw-libfabric baseline for rpcie-bench, its sealed workloads (raw_loop.hpp): what rpcie's
// sealed data path does for one bulk transfer, with nothing of rpcie in it. Each chunk is
// sealed straight from the source buffer into its send slot (one pass over the bytes), sent
// eagerly, opened in place in the receive buffer it landed in, and copied to its place (only
// after its tag checked, as rpcie must). The cipher comes from the caller (Sealer). The
// plain_* workloads send the same messages with the cipher left out.
#include <algorithm>
#include <cstring>
#include <string>

#include "raw_peer.hpp"

namespace rpcie::bench::raw {

namespace {
// Where a plain_* chunk's bytes sit in its message: after the sequence number, as sealed.
constexpr std::size_t kPlainOffset = 8;
}  // namespace

bool RawPeer::sealer_set(std::unique_ptr<Sealer> sealer, std::size_t chunk, std::string* err) {
  Impl& m = *impl_;
  if (!sealer || chunk == 0) {
    *err = "sealer: a cipher and a chunk size are needed";
    return false;
  }
  // One sealed send slot per tx context, carved out of the send slot.
  const std::size_t slot = (chunk + sealer->overhead() + 63) / 64 * 64;
  if (slot * m.tx_ctx.size() > m.slot_size || chunk > m.cfg.max_size) {
    *err = "sealer: " + std::to_string(m.tx_ctx.size()) + " sealed chunks of " + std::to_string(chunk) +
           " B do not fit the " + std::to_string(m.slot_size) + " B send buffer";
    return false;
  }
  m.sealer = std::move(sealer);
  m.chunk = chunk;
  m.seal_slot = slot;
  return true;
}

bool RawPeer::Impl::sealed_ready(Call& c, std::size_t size) const {
  if (!sealer) {
    *c.err = "sealed workload without a sealer";
    return false;
  }
  if (size == 0 || size > cfg.max_size) {
    *c.err = "sealed: size must be in [1, max_size]";
    return false;
  }
  return true;
}

bool RawPeer::Impl::stream_receive(unsigned char* sealed, std::size_t len, std::string* err) {
  const void* plain = sealed + kPlainOffset;
  std::size_t plain_len = len - std::min(len, sealer->overhead());
  if (stream.cipher && !sealer->open(sealed, len, &plain, &plain_len)) {
    *err = "a sealed chunk did not open";
    return false;
  }
  if (plain_len > stream.size - stream.got) {
    *err = "a sealed chunk runs past its transfer";
    return false;
  }
  std::memcpy(static_cast<unsigned char*>(rma_buf.get()) + stream.got, plain, plain_len);
  stream.got += plain_len;
  if (stream.got == stream.size) {
    stream.got = 0;
    ++stream.complete;
  }
  return true;
}

bool RawPeer::Impl::stream_wait(Call& c) {
  while (stream.complete == 0)
    if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) return false;
  --stream.complete;
  return true;
}

bool RawPeer::Impl::sealed_send(Call& c, std::size_t size, std::size_t window, bool cipher) {
  const auto* source = static_cast<const unsigned char*>(rma_buf.get());
  if (window == 0 || window > tx_ctx.size()) window = tx_ctx.size();
  for (std::size_t offset = 0; offset < size; offset += chunk) {
    const std::size_t n = std::min(chunk, size - offset);
    // A free context within the window, taken before sealing so that polls meanwhile (which
    // return other contexts) cannot hand its slot out again.
    while (tx_free.empty() || tx_ctx.size() - tx_free.size() >= window)
      if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) return false;
    OpCtx* op = tx_free.back();
    tx_free.pop_back();
    unsigned char* slot = tx_slot() + op->slot * seal_slot;
    if (cipher)
      sealer->seal(source + offset, n, slot);
    else
      std::memcpy(slot + kPlainOffset, source + offset, n);
    // Sealed once; a provider that is full only delays the send.
    for (;;) {
      const ssize_t ret = fi_send(ep, slot, n + sealer->overhead(), msg_desc, peer, op);
      if (ret == 0) break;
      if (ret != -FI_EAGAIN) {
        tx_free.push_back(op);
        *c.err = fi_error("fi_send", ret);
        return false;
      }
      if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) {
        tx_free.push_back(op);
        return false;
      }
    }
  }
  return true;
}

double RawPeer::Impl::sealed_run(Call& c, Workload w, std::size_t size, std::size_t iterations, std::size_t window,
                                 std::vector<double>* samples) {
  const bool is_write = w == Workload::sealed_write || w == Workload::plain_write;
  const bool cipher = w == Workload::sealed_write || w == Workload::sealed_read;
  if (!sealed_ready(c, size)) return -1.0;
  const std::size_t chunks = (size + chunk - 1) / chunk;
  stream = Stream{.active = !is_write, .cipher = cipher, .size = size};
  const auto t0 = Clock::now();
  auto last = t0;
  for (std::size_t i = 0; i < iterations; ++i) {
    if (is_write) {
      if (!sealed_send(c, size, window, cipher)) return -1.0;
      while (rx_ready == 0)
        if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) {
          *c.err += " (sealed_write: transfer " + std::to_string(i + 1) + " of " + std::to_string(chunks) +
                    " chunks not acknowledged)";
          return -1.0;
        }
      --rx_ready;
    } else {
      if (!post_send(8, &c.wait, &c.peer_failed, c.err) || !stream_wait(c)) {
        stream.active = false;
        return -1.0;
      }
    }
    if (samples) {
      const auto now = Clock::now();
      samples->push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    }
  }
  const auto t1 = Clock::now();
  stream.active = false;
  if (!drain_tx(&c.wait, &c.peer_failed, c.err)) return -1.0;
  return std::chrono::duration<double>(t1 - t0).count();
}

bool RawPeer::Impl::sealed_serve(Call& c, Workload w, std::size_t size, std::size_t iterations, std::size_t window) {
  const bool is_write = w == Workload::sealed_write || w == Workload::plain_write;
  const bool cipher = w == Workload::sealed_write || w == Workload::sealed_read;
  if (!sealed_ready(c, size)) return false;
  stream = Stream{.active = is_write, .cipher = cipher, .size = size};
  bool served = true;
  for (std::size_t i = 0; served && i < iterations; ++i) {
    if (is_write) {
      // The transfer is acknowledged once its last chunk is in place, as rpcie acknowledges
      // a delivered write's last put (rma_done).
      while (served && stream.complete == 0) served = step(&c.wait, false, &c.peer_failed, c.err) != Step::fail;
      if (served) {
        --stream.complete;
        served = post_send(8, &c.wait, &c.peer_failed, c.err);
      }
    } else {
      while (served && rx_ready == 0) served = step(&c.wait, false, &c.peer_failed, c.err) != Step::fail;
      if (!served) break;
      --rx_ready;
      served = sealed_send(c, size, window, cipher);
    }
  }
  stream.active = false;
  if (!served)
    *c.err += " (sealed: " + std::to_string(stream.got) + " of " + std::to_string(size) + " bytes of the transfer in)";
  return served && drain_tx(&c.wait, &c.peer_failed, c.err);
}

}  // namespace rpcie::bench::raw
