// SendLock: a mutex whose lock waits until a deadline (Lockable, with try_lock_until), for
// the posted-write batches of one attachment: they leave in the order they were taken, and a
// writer behind a sender stuck on a dead link gives up at its own deadline.
//
// std::timed_mutex does the same, but libstdc++ builds try_lock_until on
// pthread_mutex_clocklock, which ThreadSanitizer (clang 14) does not intercept: it then
// takes every unlock for one of an unlocked mutex and cannot see what the lock orders.
// Thread-safety: as a mutex. Not recursive.
#pragma once

#include <condition_variable>
#include <mutex>

#include "rpcie/deadline.hpp"

namespace rpcie::client {

class SendLock {
 public:
  bool try_lock_until(Deadline::Clock::time_point until) {
    std::unique_lock g(lock_);
    if (!free_.wait_until(g, until, [&] { return !held_; })) return false;
    held_ = true;
    return true;
  }
  void lock() {
    std::unique_lock g(lock_);
    free_.wait(g, [&] { return !held_; });
    held_ = true;
  }
  void unlock() {
    {
      std::lock_guard g(lock_);
      held_ = false;
    }
    free_.notify_one();
  }

 private:
  std::mutex lock_;
  std::condition_variable free_;
  bool held_ = false;
};

}  // namespace rpcie::client
