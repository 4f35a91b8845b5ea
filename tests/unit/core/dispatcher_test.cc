// Dispatcher: a caller receives its own reply; the background thread files interrupts and
// sends due batches while the application is quiet, stands aside during calls, and turns a
// broken inbox into the attachment's failure.
#include "dispatcher.hpp"

#include <sched.h>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include "../../support/eventually.hpp"
#include "../../support/threads_named.hpp"

using namespace rpcie;
using namespace rpcie::client;
using namespace std::chrono_literals;
using rpcie::test::eventually;

namespace {

// Messages handed out in order; an error once `broken`; message_wait polls every 100 us.
// While `waits_hold` is on, message_wait sleeps without looking at anything (a background
// thread that the scheduler leaves off the CPU while calls come and go).
class FakeInbox final : public Inbox {
 public:
  void waits_hold(bool on) { hold_ = on; }
  int waits() const { return waits_; }
  int waits_ended() const { return waits_ended_; }
  void push(proto::Message m, std::uint64_t rid) {
    std::lock_guard g(lock_);
    proto::Decoded d;
    d.header.request_id = rid;
    d.message = std::move(m);
    queue_.push_back(std::move(d));
  }
  void break_with(int code) { broken_ = code; }
  int recv_calls() const { return recv_calls_; }
  Result<const proto::Decoded*> message_recv(Deadline deadline) override {
    ++recv_calls_;
    for (;;) {
      if (broken_) return fail(broken_, "inbox broken");
      {
        std::lock_guard g(lock_);
        if (!queue_.empty()) {
          current_ = std::move(queue_.front());
          queue_.pop_front();
          return &current_;
        }
      }
      if (deadline.expired()) return fail(ETIMEDOUT, "nothing");
      std::this_thread::sleep_for(100us);
    }
  }
  Result<bool> message_wait(Deadline deadline, const std::function<bool()>& cancel) override {
    ++waits_;
    while (hold_ && !deadline.expired()) std::this_thread::sleep_for(100us);
    for (;;) {
      if (broken_) return fail(broken_, "inbox broken");
      {
        std::lock_guard g(lock_);
        if (!queue_.empty()) return ++waits_ended_, true;
      }
      if ((cancel && cancel()) || deadline.expired()) return ++waits_ended_, false;
      std::this_thread::sleep_for(100us);
    }
  }
  void wake() noexcept override { ++wakes_; }

 private:
  std::mutex lock_;
  std::deque<proto::Decoded> queue_;
  proto::Decoded current_;
  std::atomic<int> broken_{0};
  std::atomic<int> recv_calls_{0};
  std::atomic<int> wakes_{0};
  std::atomic<bool> hold_{false};
  std::atomic<int> waits_{0};
  std::atomic<int> waits_ended_{0};
};

Dispatcher::Batch no_batch() {
  return {[] { return std::optional<Dispatcher::Clock::time_point>(); }, [] { return false; }};
}

}  // namespace

TEST_CASE("dispatcher: a caller receives its own reply and files others' on the way") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 2000us);  // not started: the caller alone receives
  const auto rid = router.request_id();
  inbox.push(proto::Interrupt{0, 1}, 0);
  inbox.push(proto::ReadReply{0, 42}, rid);
  Dispatcher::Call call(d);
  auto r = d.await([&] { return router.reply_arrived(rid); }, Deadline::after(5s));
  REQUIRE(r);
  CHECK(router.reply_take(rid)->value == 42);
  CHECK(router.interrupt_count(0) == 1);
}

TEST_CASE("dispatcher: await ends at its deadline with ETIMEDOUT, and with the failure once there is one") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 2000us);
  auto r = d.await([] { return false; }, Deadline::after(30ms));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ETIMEDOUT);
  inbox.break_with(ECONNRESET);
  r = d.await([] { return false; }, Deadline::after(5s));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EIO);
  CHECK(r.error().message.find("link to the exporter lost") != std::string::npos);
}

TEST_CASE("dispatcher: a malformed message (EPROTO) is skipped, not a failure") {
  class Malformed final : public Inbox {
   public:
    Result<const proto::Decoded*> message_recv(Deadline) override {
      if (n_++ == 0) return fail(EPROTO, "bad bytes");
      d_.header.request_id = rid;
      d_.message = proto::WriteAck{0};
      return &d_;
    }
    Result<bool> message_wait(Deadline, const std::function<bool()>&) override { return false; }
    void wake() noexcept override {}
    std::uint64_t rid = 0;

   private:
    int n_ = 0;
    proto::Decoded d_;
  } inbox;
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 2000us);
  inbox.rid = router.request_id();
  REQUIRE(d.await([&] { return router.reply_arrived(inbox.rid); }, Deadline::after(5s)));
  CHECK_FALSE(router.failure());
}

TEST_CASE("dispatcher: the background thread counts interrupts while the application is quiet") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  std::atomic<int> heard{0};
  router.listen([&] { ++heard; });
  Dispatcher d(inbox, router, no_batch(), 200us);
  d.start();
  inbox.push(proto::Interrupt{0, 7}, 0);
  CHECK(eventually([&] { return router.interrupt_count(0) == 7; }));
  CHECK(heard == 1);
  d.stop();
}

TEST_CASE("dispatcher: its thread is named rpcie-dispatch and is SCHED_BATCH (it never preempts the application)") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 200us);
  d.start();
  auto dispatcher_policy = [] {
    const auto tids = rpcie::test::threads_named("rpcie-dispatch");
    return tids.empty() ? -1 : ::sched_getscheduler(tids.front());
  };
  CHECK(eventually([&] { return dispatcher_policy() == SCHED_BATCH; }));
  CHECK(::sched_getscheduler(0) == SCHED_OTHER);  // the caller's own thread is left alone
  d.stop();
}

TEST_CASE("dispatcher: it stands aside while a call is in progress") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 200us);
  d.start();
  {
    Dispatcher::Call call(d);
    const int before = inbox.recv_calls();
    inbox.push(proto::Interrupt{0, 1}, 0);
    std::this_thread::sleep_for(50ms);
    CHECK(inbox.recv_calls() == before);  // nobody took the message off the channel
    CHECK(router.interrupt_count(0) == 0);
  }
  CHECK(eventually([&] { return router.interrupt_count(0) == 1; }));
  d.stop();
}

TEST_CASE("dispatcher: while interrupts are watched, it receives as soon as calls end, not after the quiet spell") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 10s);  // a quiet spell far longer than eventually() waits
  d.start();
  // A call long enough for the dispatcher to see it (it polls its inbox every 100 us).
  auto call_made = [&] {
    Dispatcher::Call call(d);
    std::this_thread::sleep_for(5ms);
  };
  call_made();  // a call that received: the quiet spell begins
  inbox.push(proto::Interrupt{0, 1}, 0);
  std::this_thread::sleep_for(50ms);
  CHECK(router.interrupt_count(0) == 0);  // standing aside
  d.watch(true);                          // ends the spell at once
  CHECK(eventually([&] { return router.interrupt_count(0) == 1; }, 2s));
  {
    Dispatcher::Call call(d);  // during a call it still stands aside
    inbox.push(proto::Interrupt{0, 2}, 0);
    std::this_thread::sleep_for(50ms);
    CHECK(router.interrupt_count(0) == 1);
  }
  CHECK(eventually([&] { return router.interrupt_count(0) == 2; }, 2s));  // and receives once it ends
  d.watch(true);                                                          // counted: two watches need two ends
  d.watch(false);
  call_made();
  inbox.push(proto::Interrupt{0, 3}, 0);
  CHECK(eventually([&] { return router.interrupt_count(0) == 3; }, 2s));
  d.watch(false);  // no watch left: a quiet spell follows the next call
  call_made();
  inbox.push(proto::Interrupt{0, 4}, 0);
  std::this_thread::sleep_for(50ms);
  CHECK(router.interrupt_count(0) == 3);
  d.stop();
}

TEST_CASE("dispatcher: woken after a whole call came and went, it still keeps the quiet spell") {
  FakeInbox inbox;
  inbox.waits_hold(true);
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 10s);
  d.start();
  REQUIRE(eventually([&] { return inbox.waits() >= 1; }));  // asleep on the fd, and kept there
  { Dispatcher::Call call(d); }                             // a call it never saw
  inbox.push(proto::Interrupt{0, 1}, 0);
  inbox.waits_hold(false);  // it wakes to a message, after the call
  REQUIRE(eventually([&] { return inbox.waits_ended() >= 1; }));
  std::this_thread::sleep_for(20ms);
  CHECK(router.interrupt_count(0) == 0);  // the call's quiet spell holds: the caller receives
  d.stop();
}

TEST_CASE("dispatcher: a waiting batch is sent by the background thread when due") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  std::atomic<bool> pending{true};
  std::atomic<int> sends{0};
  Dispatcher::Batch batch{[&] {
                            ++sends;
                            pending = false;  // sent: nothing waits any more
                            return std::optional<Dispatcher::Clock::time_point>();
                          },
                          [&] { return pending.load(); }};
  Dispatcher d(inbox, router, std::move(batch), 200us);
  d.start();
  CHECK(eventually([&] { return sends.load() >= 1; }));
  d.batch_waiting(Dispatcher::Clock::now());
  d.stop();
}

TEST_CASE("dispatcher: a broken channel fails the attachment from the background thread") {
  FakeInbox inbox;
  ReplyRouter router(1, "test");
  Dispatcher d(inbox, router, no_batch(), 200us);
  d.start();
  inbox.break_with(ENOTCONN);
  CHECK(eventually([&] { return router.failure().has_value(); }));
  CHECK(router.failure()->code == EIO);
  d.stop();
}
