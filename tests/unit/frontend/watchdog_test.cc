// frontend: the watchdog answers every tracked request older than the timeout, exactly once.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "watchdog.hpp"

using namespace rpcie::hostd;
using namespace std::chrono_literals;

namespace {

// Requests are only compared and handed back: any distinct pointers do.
fuse_req_t request(std::uintptr_t n) { return reinterpret_cast<fuse_req_t>(n * 16); }

}  // namespace

TEST_CASE("watchdog: requests older than the timeout are answered, younger ones stay the caller's") {
  std::vector<fuse_req_t> answered;
  Watchdog w(1000ms, [&](fuse_req_t r) { answered.push_back(r); });
  const auto t0 = Watchdog::Clock::now();
  const auto old = w.track(request(1), t0);
  const auto young = w.track(request(2), t0 + 500ms);
  CHECK(w.expire_due(t0 + 999ms) == 0);
  CHECK(w.expire_due(t0 + 1000ms) == 1);  // exactly the timeout: late
  REQUIRE(answered.size() == 1);
  CHECK(answered[0] == request(1));
  CHECK_FALSE(w.untrack(old));  // the watchdog answered it: the caller must not
  CHECK(w.untrack(young));      // still the caller's
  CHECK(w.expire_due(t0 + 10s) == 0);
  CHECK(answered.size() == 1);
}

TEST_CASE("watchdog: an untracked request is never answered by it") {
  int answered = 0;
  Watchdog w(10ms, [&](fuse_req_t) { ++answered; });
  const auto t0 = Watchdog::Clock::now();
  CHECK(w.untrack(w.track(request(1), t0)));
  CHECK(w.expire_due(t0 + 1s) == 0);
  CHECK(answered == 0);
}

TEST_CASE("watchdog: its thread answers a request left waiting, within a few periods") {
  std::mutex lock;
  std::vector<fuse_req_t> answered;
  std::atomic<int> count{0};
  Watchdog w(50ms, [&](fuse_req_t r) {
    std::lock_guard g(lock);
    answered.push_back(r);
    ++count;
  });
  w.start();
  // Tracked once the thread sleeps with nothing to watch (until a minute from now): tracking
  // must wake it.
  std::this_thread::sleep_for(100ms);
  const auto ticket = w.track(request(7));
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (count == 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  REQUIRE(count == 1);  // before stop(): its thread's last pass expires what is due
  w.stop();
  CHECK(answered[0] == request(7));
  CHECK_FALSE(w.untrack(ticket));
}
