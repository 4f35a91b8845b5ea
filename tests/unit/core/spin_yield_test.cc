// A spinner that yields while contended (core/src/spin_yield.hpp): the rule against a
// counted switch count, then a real spinner sharing its CPU with a thread that keeps waking,
// alone and as a Channel's waiter (ChannelOptions::yield_when_contended).
#include "spin_yield.hpp"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include <doctest/doctest.h>

#include "channel_fixture.hpp"

using rpcie::SpinYield;
using namespace std::chrono_literals;

namespace {

// A switch count the test sets, which counts how often the rule reads it.
struct Switches {
  long count = 0;
  int reads = 0;
  long operator()() {
    ++reads;
    return count;
  }
};

// The first CPU this process may run on, alone in a set.
cpu_set_t first_cpu() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) ++cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return one;
}

}  // namespace

TEST_CASE("a spinner yields only once two looks in a row find it preempted, until it is left alone") {
  SpinYield y;
  Switches s;
  auto t = SpinYield::Clock::now();
  const auto look = [&] {
    t += SpinYield::kProbeEvery;
    return y.contended(t, [&] { return s(); });
  };
  CHECK_FALSE(look());  // the first look only learns the count
  CHECK_FALSE(look());
  s.count += 1;  // one preemption: a kernel worker, a timer
  CHECK_FALSE(look());
  CHECK_FALSE(look());
  s.count += 1;
  CHECK_FALSE(look());
  s.count += 3;  // preempted again at the next look: contended
  CHECK(look());
  // It yields at every poll from then on, without reading the count between looks ...
  const int reads = s.reads;
  CHECK(y.contended(t + SpinYield::kProbeEvery / 2, [&] { return s(); }));
  CHECK(s.reads == reads);
  // ... for kQuietFor after the last contended look, however quiet the looks since.
  const auto contended_at = t;
  while (t + SpinYield::kProbeEvery < contended_at + SpinYield::kQuietFor) CHECK(look());
  CHECK_FALSE(look());
  // Lasting contention keeps it yielding.
  for (int i = 0; i < 2; ++i) {
    s.count += 1;
    look();
  }
  for (int i = 0; i < 100; ++i) {
    s.count += 1;
    CHECK(look());
  }
}

TEST_CASE("a spinner that cannot read its switches never yields") {
  SpinYield y;
  auto t = SpinYield::Clock::now();
  long n = 0;
  for (int i = 0; i < 20; ++i) {
    t += SpinYield::kProbeEvery;
    // Alternating failures (-1) with a count that grows: no two looks compare.
    CHECK_FALSE(y.contended(t, [&] { return i % 2 ? -1L : (n += 5); }));
  }
}

TEST_CASE("a real spinner sharing its CPU with a thread that keeps waking starts to yield") {
  const cpu_set_t one = first_cpu();

  std::atomic<bool> stop{false};
  // Wakes every 20 us on the spinner's CPU, as a FUSE worker or a reader would.
  std::thread waker([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    const timespec nap{0, 20'000};
    while (!stop.load(std::memory_order_relaxed)) nanosleep(&nap, nullptr);
  });
  int yields = 0;
  std::thread spinner([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    SpinYield& y = SpinYield::this_thread();
    const auto end = SpinYield::Clock::now() + 3s;
    for (auto now = SpinYield::Clock::now(); now < end && yields < 100; now = SpinYield::Clock::now())
      yields += y.after_poll(now) ? 1 : 0;
  });
  spinner.join();
  stop = true;
  waker.join();
  MESSAGE("yields within 3 s: " << yields);
  CHECK(yields >= 100);
}

namespace {

// The yields of a thread pinned beside a waker (a thread waking every 20 us on its CPU)
// while it waits 250 ms on a channel of `options` for a message that never comes.
std::uint64_t channel_wait_yields(const rpcie::ChannelOptions& options) {
  auto p = channel_fixture::pair_open(4096, options);
  REQUIRE(p);
  cpu_set_t one = first_cpu();
  std::atomic<bool> stop{false};
  std::thread waker([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    const timespec nap{0, 20'000};
    while (!stop.load(std::memory_order_relaxed)) nanosleep(&nap, nullptr);
  });
  std::uint64_t yields = 0;
  int error = 0;  // the wait's errno (checked here: doctest's assertions stay on this thread)
  std::thread waiter([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    const auto before = SpinYield::this_thread().yields();
    auto r = p->cc().message_recv(rpcie::Deadline::after(250ms));  // a new wait spins first
    error = r ? 0 : r.error().code;
    yields = SpinYield::this_thread().yields() - before;
  });
  waiter.join();
  stop = true;
  waker.join();
  CHECK(error == ETIMEDOUT);  // nothing came
  return yields;
}

}  // namespace

TEST_CASE("a Channel's waiter yields when contended only if its options say so") {
  rpcie::ChannelOptions options;
  options.spin = 1s;  // the whole wait spins
  options.yield_when_contended = true;
  const auto on = channel_wait_yields(options);
  options.yield_when_contended = false;
  const auto off = channel_wait_yields(options);
  MESSAGE("yields in a 250 ms wait: " << on << " with the option, " << off << " without");
  CHECK(on > 0);
  CHECK(off == 0);
}
