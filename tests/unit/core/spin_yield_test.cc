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

// A thread on `cpu` that wakes every 20 us, as a FUSE worker or a reader would, until the
// Waker goes.
class Waker {
 public:
  explicit Waker(const cpu_set_t& cpu)
      : thread_([this, cpu] {
          pthread_setaffinity_np(pthread_self(), sizeof cpu, &cpu);
          const timespec nap{0, 20'000};
          while (!stop_.load(std::memory_order_relaxed)) nanosleep(&nap, nullptr);
        }) {}
  ~Waker() {
    stop_ = true;
    thread_.join();
  }
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

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

TEST_CASE("the first look, and the first after a failed read, only learn the count") {
  SpinYield y;
  auto t = SpinYield::Clock::now();
  const auto look = [&](long switches) {
    t += SpinYield::kProbeEvery;
    return y.contended(t, [&] { return switches; });
  };
  CHECK_FALSE(look(10));  // preempted before it first spun: not a switch seen while spinning
  CHECK_FALSE(look(11));  // one look with a new switch
  CHECK_FALSE(look(-1));  // getrusage failed: nothing to compare, the run of looks ends
  CHECK_FALSE(look(20));  // learns the count again
  CHECK_FALSE(look(21));
  CHECK(look(22));  // two looks in a row with a new switch each
  // Reads that keep failing: once that contention is kQuietFor old, it yields no more.
  const auto contended_at = t;
  while (t < contended_at + SpinYield::kQuietFor) look(-1);
  for (int i = 0; i < 100; ++i) CHECK_FALSE(look(-1));
}

TEST_CASE("a real spinner sharing its CPU with a thread that keeps waking starts to yield") {
  const cpu_set_t one = first_cpu();
  int yields = 0;
  {
    const Waker waker(one);
    std::thread spinner([&] {
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      SpinYield& y = SpinYield::this_thread();
      const auto end = SpinYield::Clock::now() + 3s;
      for (auto now = SpinYield::Clock::now(); now < end && yields < 100; now = SpinYield::Clock::now())
        yields += y.after_poll(now) ? 1 : 0;
    });
    spinner.join();
  }
  MESSAGE("yields within 3 s: " << yields);
  CHECK(yields >= 100);
}

namespace {

// The yields of a thread pinned beside a waker (a thread waking every 20 us on its CPU)
// while it waits 250 ms on a channel of `options` for a message that never comes.
std::uint64_t channel_wait_yields(const rpcie::ChannelOptions& options) {
  auto p = channel_fixture::pair_open(4096, options);
  REQUIRE(p);
  const cpu_set_t one = first_cpu();
  const Waker waker(one);
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
