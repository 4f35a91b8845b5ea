// The watchdog of requests that wait on the fabric: whatever the fabric does, no such request
// stays unanswered much longer than the timeout. A request is tracked from its start; its
// owner untracks it to answer it, and the watchdog answers (through `expire`) every request
// still tracked once it is older than the timeout. Whoever removes an entry answers it: a
// request is answered exactly once.
//
// The operation itself carries a deadline a little under the timeout (op_deadline()), so the
// watchdog answers only when that deadline was not kept.
// Thread-safety: every member may be called from any thread; `expire` is called without the
// watchdog's lock, on its thread (or expire_due's caller).
#pragma once

#include <fuse_lowlevel.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "rpcie/deadline.hpp"

namespace rpcie::hostd {

class Watchdog {
 public:
  using Clock = Deadline::Clock;
  using Expire = std::function<void(fuse_req_t)>;

  Watchdog(std::chrono::milliseconds timeout, Expire expire);
  ~Watchdog();  // stop()
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The thread: expire_due(now) when the oldest tracked request is due (asleep while none is
  // tracked; track() wakes it). stop() ends it (idempotent).
  void start();
  void stop();

  // Tracks `req` as started at `since`; the ticket untracks it.
  std::uint64_t track(fuse_req_t req, Clock::time_point since = Clock::now());
  // True when the caller still owns the reply (the watchdog has not answered it).
  bool untrack(std::uint64_t ticket);
  // Answers every request started at or before `now` - timeout; returns how many.
  std::size_t expire_due(Clock::time_point now);

  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  // For the operation of a tracked request: it ends before the watchdog would answer.
  Deadline op_deadline() const { return Deadline::after(timeout_ * 9 / 10); }

 private:
  struct Pending {
    fuse_req_t req;
    Clock::time_point since;
  };
  void run();

  const std::chrono::milliseconds timeout_;
  const Expire expire_;
  std::mutex lock_;
  std::condition_variable changed_;  // stop_, or a request due before asleep_until_
  // When the thread's sleep ends (lock_); a request due earlier wakes it.
  Clock::time_point asleep_until_ = Clock::time_point::max();
  std::map<std::uint64_t, Pending> pending_;
  std::uint64_t next_ticket_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rpcie::hostd
