// Raw-libfabric baseline for rpcie-bench, its loops; see raw_loop.hpp.
//
// Mirrors what fabtests does for fi_rma_bw / fi_pingpong: one RDM endpoint, one
// CQ in FI_CQ_FORMAT_MSG busy-polled with fi_cq_read in batches, buffers
// registered once at open() (raw_setup.cc), window of RMA ops kept in flight, fi_inject
// for small ping-pong messages. Nothing here allocates or registers on the data path.
#include "raw_loop.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

#include "raw_peer.hpp"

namespace rpcie::bench::raw {

bool RawPeer::Impl::post_rx(OpCtx* c, std::string* err) {
  ssize_t ret = fi_recv(ep, rx_slot(c->slot), slot_size, msg_desc, kAnyAddr, c);
  if (ret == 0) return true;
  if (ret == -FI_EAGAIN) {
    rx_pending.push_back(c);  // retried on the next poll
    return true;
  }
  *err = fi_error("fi_recv", ret);
  return false;
}

// One fi_cq_read of up to kCqBatch entries (also drives manual progress).
// Returns the number of completions, or -1 with *err set.
long RawPeer::Impl::poll_cq(std::string* err) {
  fi_cq_msg_entry entries[kCqBatch];
  ssize_t n = fi_cq_read(cq, entries, kCqBatch);
  if (n > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      auto* c = static_cast<OpCtx*>(entries[i].op_context);
      if (!c) {
        *err = "completion without context";
        return -1;
      }
      if (c->is_rx) {
        // A sealed stream's chunk is opened and copied out before its buffer is posted again.
        if (stream.active) {
          if (!stream_receive(rx_slot(c->slot), entries[i].len, err)) return -1;
        } else {
          ++rx_ready;
        }
        rx_pending.push_back(c);
      } else {
        ++tx_done;
        c->done = true;
        tx_free.push_back(c);
      }
    }
  } else if (n == -FI_EAGAIN) {
    n = 0;
  } else if (n == -FI_EAVAIL) {
    fi_cq_err_entry e{};
    ssize_t r = fi_cq_readerr(cq, &e, 0);
    if (r < 0) {
      *err = fi_error("fi_cq_readerr", r);
      return -1;
    }
    char buf[256];
    const char* detail = fi_cq_strerror(cq, e.prov_errno, e.err_data, buf, sizeof(buf));
    *err = std::string("completion error: ") + fi_strerror(e.err) + " (prov: " + (detail ? detail : "?") + ")";
    return -1;
  } else {
    *err = fi_error("fi_cq_read", n);
    return -1;
  }
  // Re-post consumed receive slots right away so the peer's next message (sent
  // only after our reply) always finds a posted buffer.
  // In place (no temporary vector): this runs once per ping-pong message, so
  // keep heap allocation off the data path.
  if (!rx_pending.empty()) {
    std::size_t keep = 0;
    for (OpCtx* c : rx_pending) {
      ssize_t ret = fi_recv(ep, rx_slot(c->slot), slot_size, msg_desc, kAnyAddr, c);
      if (ret == -FI_EAGAIN) {
        rx_pending[keep++] = c;  // retried on the next poll
      } else if (ret) {
        *err = fi_error("fi_recv", ret);
        return -1;
      }
    }
    rx_pending.resize(keep);
  }
  return static_cast<long>(n);
}

RawPeer::Impl::Step RawPeer::Impl::step(Wait* w, bool expect_end, bool* peer_failed, std::string* err) {
  if (poll_cq(err) < 0) return Step::fail;
  ++w->n;
  if ((w->n & kTimeCheckMask) == 0 && Clock::now() > w->deadline) {
    char msg[64];
    std::snprintf(msg, sizeof(msg), "timed out after %.1f s", cfg.timeout_sec);
    *err = msg;
    return Step::fail;
  }
  // A syscall per poll would distort the loop, so the control socket (end of
  // round, abort, hang-up) is only looked at every ~thousand polls.
  if ((w->n & kCtrlCheckMask) == 0) {
    char b = 0;
    ssize_t r = ::recv(fd, &b, 1, MSG_DONTWAIT);
    if (r == 1) {
      if (expect_end && b == kEndByte) return Step::end_of_round;
      *peer_failed = true;
      *err = b == kAbortByte ? "peer aborted the round" : "unexpected byte on control socket";
      return Step::fail;
    }
    if (r == 0) {
      *peer_failed = true;
      *err = "control socket: peer hung up";
      return Step::fail;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *err = sys_error("control socket recv", errno);
      return Step::fail;
    }
  }
  return Step::go;
}

bool RawPeer::Impl::post_send(std::size_t len, Wait* w, bool* peer_failed, std::string* err) {
  for (;;) {
    ssize_t ret;
    OpCtx* c = nullptr;
    if (len <= inject_size()) {
      // Like fabtests' pingpong: inject copies the payload and generates no
      // completion, so there is nothing to reap afterwards.
      ret = fi_inject(ep, tx_slot(), len, peer);
    } else if (!tx_free.empty()) {
      c = tx_free.back();
      ret = fi_send(ep, tx_slot(), len, msg_desc, peer, c);
    } else {
      ret = -FI_EAGAIN;
    }
    if (ret == 0) {
      if (c) tx_free.pop_back();
      return true;
    }
    if (ret != -FI_EAGAIN) {
      *err = fi_error(c ? "fi_send" : "fi_inject", ret);
      return false;
    }
    if (step(w, false, peer_failed, err) == Step::fail) return false;
  }
}

bool RawPeer::Impl::drain_tx(Wait* w, bool* peer_failed, std::string* err) {
  while (tx_free.size() < tx_ctx.size())
    if (step(w, false, peer_failed, err) == Step::fail) return false;
  return true;
}
double RawPeer::Impl::messages_run(Call& c, std::size_t len, std::size_t iterations, std::vector<double>* samples) {
  if (len > slot_size) {
    *c.err = "messages: size exceeds max_size";
    return -1.0;
  }
  const auto t0 = Clock::now();
  auto last = t0;
  for (std::size_t i = 0; i < iterations; ++i) {
    if (!post_send(len, &c.wait, &c.peer_failed, c.err)) return -1.0;
    while (rx_ready == 0)
      if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) {
        *c.err += " (messages: waiting for reply " + std::to_string(i + 1) + " of " + std::to_string(iterations) + ")";
        return -1.0;
      }
    --rx_ready;
    if (samples) {
      const auto now = Clock::now();
      samples->push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    }
  }
  const auto t1 = Clock::now();
  if (!drain_tx(&c.wait, &c.peer_failed, c.err)) return -1.0;
  return std::chrono::duration<double>(t1 - t0).count();
}

ssize_t RawPeer::Impl::rma_post(bool is_write, std::size_t size, OpCtx* op) {
  void* local = rma_buf.get();
  if (!is_write) return fi_read(ep, local, size, rma_desc, peer, peer_base, peer_key, op);
  return rma_write_post(local, size, 0, write_delivery_complete, op);
}

ssize_t RawPeer::Impl::rma_write_post(void* local, std::size_t size, std::size_t at, bool delivered, OpCtx* op) {
  if (!delivered) return fi_write(ep, local, size, rma_desc, peer, peer_base + at, peer_key, op);
  iovec iov{local, size};
  void* desc = rma_desc;
  fi_rma_iov rma_iov{peer_base + at, size, peer_key};
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = peer;
  msg.rma_iov = &rma_iov;
  msg.rma_iov_count = 1;
  msg.context = op;
  return fi_writemsg(ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

double RawPeer::Impl::rma_run(Call& c, bool is_write, std::size_t size, std::size_t iterations, std::size_t window,
                              std::vector<double>* samples) {
  if (size == 0 || size > cfg.max_size || size > peer_len) {
    *c.err = "rma: size must be in [1, max_size]";
    return -1.0;
  }
  const std::uint64_t tx_base = tx_done;
  std::size_t posted = 0;
  const auto t0 = Clock::now();
  auto last = t0;
  std::uint64_t sampled = tx_base;
  while (tx_done - tx_base < iterations) {
    // Top the window up; -FI_EAGAIN means the provider queue is full, so fall
    // through to polling (which frees resources) and retry.
    while (posted < iterations && !tx_free.empty() && (window == 0 || posted - (tx_done - tx_base) < window)) {
      OpCtx* op = tx_free.back();
      ssize_t ret = rma_post(is_write, size, op);
      if (ret == -FI_EAGAIN) break;
      if (ret) {
        *c.err = fi_error(is_write ? "fi_write" : "fi_read", ret);
        return -1.0;
      }
      tx_free.pop_back();
      ++posted;
    }
    if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) {
      *c.err += " (rma: " + std::to_string(tx_done - tx_base) + " of " + std::to_string(iterations) + " completed, " +
                std::to_string(posted) + " posted)";
      return -1.0;
    }
    if (samples && window == 1 && tx_done != sampled) {  // one in flight: each completion ends one operation
      const auto now = Clock::now();
      samples->push_back(std::chrono::duration<double>(now - last).count());
      last = now;
      sampled = tx_done;
    }
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double RawPeer::run(Workload w, std::size_t size, std::size_t iterations, std::string* err, std::size_t window,
                    std::vector<double>* operation_seconds) {
  Impl& m = *impl_;
  Impl::Call c(m, err);
  if (w == Workload::sealed_write || w == Workload::sealed_read || w == Workload::plain_write ||
      w == Workload::plain_read) {
    const double seconds = m.sealed_run(c, w, size, iterations, window, operation_seconds);
    if (seconds < 0) m.call_abort(c);
    return seconds;
  }
  if (w != Workload::rma_write && w != Workload::rma_read) {
    const std::size_t len = w == Workload::read_reply || w == Workload::write_reply ? 8 : (size ? size : 8);
    const double seconds = m.messages_run(c, len, iterations, operation_seconds);
    if (seconds < 0) m.call_abort(c);
    return seconds;
  }
  const double seconds = m.rma_run(c, w == Workload::rma_write, size, iterations, window, operation_seconds);
  if (seconds < 0) {
    m.call_abort(c);
    return -1.0;
  }
  // All initiator completions are in, so the target no longer needs to drive progress.
  char b = kEndByte;
  if (!write_all(m.fd, &b, 1, c.wait.deadline, c.err)) return -1.0;
  return seconds;
}

void RawPeer::write_delivery_complete_set(bool delivery_complete) {
  impl_->write_delivery_complete = delivery_complete;
}

bool RawPeer::Impl::rma_once(Call& c, bool write, std::size_t at, std::size_t len, bool delivered) {
  if (at + len > cfg.max_size || at + len > peer_len) {
    *c.err = "rma: exceeds the peer's buffer";
    return false;
  }
  const char* what = write ? "fi_write" : "fi_read";
  for (;;) {  // a free context and a post the provider takes
    if (!tx_free.empty()) {
      OpCtx* op = tx_free.back();
      op->done = false;
      auto* local = static_cast<unsigned char*>(rma_buf.get()) + at;
      const ssize_t ret = write ? rma_write_post(local, len, at, delivered, op)
                                : fi_read(ep, local, len, rma_desc, peer, peer_base + at, peer_key, op);
      if (ret == 0) {
        tx_free.pop_back();
        while (!op->done)
          if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) return false;
        return true;
      }
      if (ret != -FI_EAGAIN) {
        *c.err = fi_error(what, ret);
        return false;
      }
    }
    if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) return false;
  }
}

bool RawPeer::Impl::messages_serve(Call& c, std::size_t reply_len, Before before, std::size_t rma_len,
                                   std::size_t iterations) {
  if (reply_len > slot_size) {
    *c.err = "messages: size exceeds max_size";
    return false;
  }
  // Whether a write is proven by a read of its last byte (below), fixed for the endpoint.
  const bool read_back = (info->tx_attr->msg_order & FI_ORDER_RAW) != 0;
  for (std::size_t i = 0; i < iterations; ++i) {
    while (rx_ready == 0)
      if (step(&c.wait, false, &c.peer_failed, c.err) == Step::fail) {
        *c.err +=
            " (messages: waiting for message " + std::to_string(i + 1) + " of " + std::to_string(iterations) + ")";
        return false;
      }
    --rx_ready;
    if (before == Before::read && !rma_once(c, false, 0, rma_len)) return false;
    // As rpcie-exportd proves a DMA into an on-demand window on the open data path: the
    // write, then its last byte read back where a read is performed after the writes before
    // it (FI_ORDER_RAW), else the write delivery-complete.
    if (before == Before::write_proven) {
      if (!rma_once(c, true, 0, rma_len, !read_back)) return false;
      if (read_back && !rma_once(c, false, rma_len - 1, 1)) return false;
    }
    if (!post_send(reply_len, &c.wait, &c.peer_failed, c.err)) return false;
  }
  return drain_tx(&c.wait, &c.peer_failed, c.err);
}

// RMA target: nothing to post, but manual progress means our CQ polls are what move the
// data; keep polling until the initiator says it is done.
bool RawPeer::Impl::rma_serve(Call& c) {
  for (;;) {
    switch (step(&c.wait, true, &c.peer_failed, c.err)) {
      case Step::go:
        break;
      case Step::end_of_round:
        return true;
      case Step::fail:
        return false;
    }
  }
}

bool RawPeer::serve(Workload w, std::size_t size, std::size_t iterations, std::string* err, std::size_t window) {
  Impl& m = *impl_;
  Impl::Call c(m, err);
  const std::size_t len = size ? size : 8;
  bool served = false;
  switch (w) {
    case Workload::rma_write:
    case Workload::rma_read:
      served = m.rma_serve(c);
      break;
    case Workload::round_trip:
      served = m.messages_serve(c, len, Impl::Before::nothing, 0, iterations);
      break;
    case Workload::send_reply:
      served = m.messages_serve(c, 8, Impl::Before::nothing, 0, iterations);
      break;
    case Workload::read_reply:
      served = m.messages_serve(c, 8, Impl::Before::read, len, iterations);
      break;
    case Workload::write_reply:
      served = m.messages_serve(c, 8, Impl::Before::write_proven, len, iterations);
      break;
    case Workload::sealed_write:
    case Workload::sealed_read:
    case Workload::plain_write:
    case Workload::plain_read:
      served = m.sealed_serve(c, w, size, iterations, window);
      break;
  }
  if (!served) m.call_abort(c);
  return served;
}

}  // namespace rpcie::bench::raw
