// LeaseKeeper: the heartbeats that keep an attachment's lease (the exporter frees the device
// when they stop for a lease). Every lease/3 (at least 50 ms) it sends a heartbeat on the
// bootstrap connection and waits up to a lease for its echo; a missing or wrong echo is a lost
// link (ReplyRouter::link_lost: a resume, or the attachment fails with ENOTCONN). While the
// attachment resumes it sends nothing; the resume hands it the new connection (socket_set).
// Between heartbeats it watches the connection: a reset (a cut link) is found at once.
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
#include "rpcie/event_fd.hpp"
#include "worker.hpp"

namespace rpcie::client {

class LeaseKeeper {
 public:
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
  void run();
  // Until the next heartbeat is due (`every`), the connection hangs up or says something, or
  // stop(). true: stop() asked (its eventfd is readable, and stays so).
  bool idle_wait(std::chrono::milliseconds every);

  Socket* socket_;  // socket_lock_
  const std::chrono::milliseconds lease_;
  ReplyRouter& router_;
  std::mutex socket_lock_;
  std::atomic<std::uint64_t> heartbeats_{0};
  EventFd wake_;   // stop() posts it: ends idle_wait() (invalid: the wait runs its course)
  Worker worker_;  // declared last: stopped (joined) before the members above go
};

}  // namespace rpcie::client
