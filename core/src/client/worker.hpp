// One background thread and what stops it: a flag, and a condition variable whose waits
// check that flag under lock(), so that stop() never lands between a check and a sleep.
// Thread-safety: start() and stop() from the owner only; stopping(), lock() and cv() from
// any thread. stop() is idempotent and joins; the owner calls it before the members the
// thread uses are destroyed (the destructor's stop() is a last resort).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "rpcie/thread_sched.hpp"

namespace rpcie::client {

class Worker {
 public:
  Worker() = default;
  ~Worker() { stop(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // `name` (at most 15 characters) names the thread for ps, top -H and /proc/PID/task.
  template <class Body>
  void start(const char* name, Body&& body) {
    thread_ = std::thread([name, body = std::forward<Body>(body)]() mutable {
      thread_name(name);
      body();
    });
  }
  void stop() {
    stop([] {});
  }
  // `wake`, called once the flag is set and before the join, ends a sleep of the thread
  // somewhere other than cv() (a wait fd).
  template <class Wake>
  void stop(Wake&& wake) {
    {
      std::lock_guard g(lock_);
      stopping_.store(true);
      cv_.notify_all();
    }
    wake();
    if (thread_.joinable()) thread_.join();
  }
  bool stopping() const noexcept { return stopping_.load(); }

  // Waits on cv() check their predicate, which includes stopping(), under this lock.
  std::mutex& lock() noexcept { return lock_; }
  std::condition_variable& cv() noexcept { return cv_; }

 private:
  std::atomic<bool> stopping_{false};
  std::mutex lock_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace rpcie::client
