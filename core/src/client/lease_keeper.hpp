// LeaseKeeper: the heartbeats that keep an attachment's lease (the exporter frees the device
// when they stop for a lease). Every lease/3 (at least 50 ms) it sends a heartbeat on the
// bootstrap connection and waits up to a lease for its echo; a missing or wrong echo fails
// the attachment (ENOTCONN) through the ReplyRouter, and the keeper stops.
//
// The bootstrap socket is shared with detach (its goodbye): both hold socket_lock() while they
// use it. Thread-safety: start()/stop() from the owner; the rest from any thread. stop() joins;
// the destructor stops.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#include "reply_router.hpp"
#include "rpcie/bootstrap.hpp"
#include "worker.hpp"

namespace rpcie::client {

class LeaseKeeper {
 public:
  LeaseKeeper(Socket& socket, std::chrono::milliseconds lease, ReplyRouter& router)
      : socket_(socket), lease_(lease), router_(router) {}
  ~LeaseKeeper() { stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void start();
  void stop();

  std::mutex& socket_lock() noexcept { return socket_lock_; }
  std::uint64_t heartbeats() const noexcept { return heartbeats_.load(std::memory_order_relaxed); }
  // Interval between heartbeats for a lease.
  static std::chrono::milliseconds interval(std::chrono::milliseconds lease);

 private:
  void run();

  Socket& socket_;
  const std::chrono::milliseconds lease_;
  ReplyRouter& router_;
  std::mutex socket_lock_;
  std::atomic<std::uint64_t> heartbeats_{0};
  Worker worker_;  // declared last: stopped (joined) before the members above go
};

}  // namespace rpcie::client
