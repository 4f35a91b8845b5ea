// LeaseKeeper: the heartbeats that keep an attachment's lease (the exporter frees the device
// when they stop for a lease). Every lease/3 (at least 50 ms) a heartbeat goes on the
// bootstrap connection and its echo is awaited up to a lease; a missing or wrong echo is a
// lost link (ReplyRouter::link_lost: a resume, or the attachment fails with ENOTCONN). While
// the attachment resumes nothing is sent; the resume hands over the new connection
// (socket_set). Between heartbeats the connection is watched: a reset (a cut link) is found
// at once.
//
// One thread per process keeps the leases of all its attachments ("rpcie-lease", LeaseHub
// in lease_keeper.cc): it sleeps in one poll(2) over their connections until the next
// heartbeat or echo deadline is due, and sends the heartbeats due within a quarter of an
// interval together, so that an idle process with N attachments wakes about once per
// interval (plus its echoes), not 2N times. One connection's I/O blocks that thread for at
// most kIoBound (a frame of a few dozen bytes that is not whole by then is a broken link):
// a stalled exporter cannot hold up the others' heartbeats for longer. The thread starts with
// the first keeper and ends with the last.
//
// The bootstrap socket is shared with detach (its goodbye): both hold socket_lock() while they
// use it; the heartbeat thread holds it from a heartbeat's send to its echo.
// Thread-safety: start()/stop() from the owner; the rest from any thread. stop() returns once
// the heartbeat thread no longer uses this keeper: it lets a heartbeat in flight have its
// echo (or its deadline) first, as detach must not read that echo as its goodbye's answer.
// stop() must not be called from a ReplyRouter callback (it would wait for itself). The
// destructor stops.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "reply_router.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/deadline.hpp"

namespace rpcie::client {

class LeaseHub;

class LeaseKeeper {
 public:
  using Clock = Deadline::Clock;
  // How long the heartbeat thread may spend on one connection's send or echo.
  static constexpr std::chrono::milliseconds kIoBound{200};

  LeaseKeeper(Socket& socket, std::chrono::milliseconds lease, ReplyRouter& router);
  ~LeaseKeeper() { stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void start();
  void stop();

  std::mutex& socket_lock() noexcept { return socket_lock_; }
  // Heartbeats go over `socket` from now on (a resumed link's bootstrap connection).
  void socket_set(Socket& socket);
  std::uint64_t heartbeats() const noexcept { return heartbeats_.load(std::memory_order_relaxed); }
  // Interval between heartbeats for a lease.
  static std::chrono::milliseconds interval(std::chrono::milliseconds lease);

 private:
  friend class LeaseHub;

  Socket* socket_;  // socket_lock_
  const std::chrono::milliseconds lease_;
  const std::chrono::milliseconds every_;
  ReplyRouter& router_;
  std::mutex socket_lock_;
  std::atomic<std::uint64_t> heartbeats_{0};
  std::shared_ptr<LeaseHub> hub_;  // set by start(), dropped by stop()

  // The heartbeat thread's own (it alone touches them while the keeper is on its list).
  std::uint64_t seq_ = 0;
  Clock::time_point next_due_{};
  std::unique_lock<std::mutex> echo_hold_;  // socket_lock_, from a heartbeat's send to its echo
  Clock::time_point echo_by_{};
};

}  // namespace rpcie::client
