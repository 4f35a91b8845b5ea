// ReplyRouter: replies by request id, errors of posted writes kept for the next operation,
// interrupt counts, the sticky failure and the listener.
#include "reply_router.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace rpcie;
using namespace rpcie::client;
using namespace std::chrono_literals;

namespace {
proto::Decoded decoded(proto::Message m, std::uint64_t rid) {
  proto::Decoded d;
  d.header.request_id = rid;
  d.message = std::move(m);
  return d;
}
}  // namespace

TEST_CASE("reply router: a reply is filed under its request id and collected once") {
  ReplyRouter r(1, "test");
  const auto rid = r.request_id();
  CHECK(r.request_id() == rid + 1);
  CHECK_FALSE(r.reply_arrived(rid));
  r.message_file(decoded(proto::ReadReply{0, 0xabcd}, rid));
  CHECK(r.reply_arrived(rid));
  auto reply = r.reply_take(rid);
  REQUIRE(reply);
  CHECK(reply->value == 0xabcd);
  CHECK(reply->status == 0);
  CHECK_FALSE(r.reply_take(rid));
}

TEST_CASE("reply router: an error for a posted write is reported once, by the next operation") {
  ReplyRouter r(1, "test");
  const auto posted = r.posted_request_id();
  CHECK((posted & kPostedBit) != 0);
  r.message_file(decoded(proto::ErrorMsg{EPERM, "read-only"}, posted));
  CHECK_FALSE(r.reply_arrived(posted));
  auto e = r.error_pending();
  REQUIRE(e);
  CHECK(e->code == EPERM);
  CHECK(e->message.find("read-only") != std::string::npos);
  CHECK_FALSE(r.error_pending());
  // An error answering a request is that request's reply; code 0 becomes EPROTO.
  const auto rid = r.request_id();
  r.message_file(decoded(proto::ErrorMsg{0, "odd"}, rid));
  auto reply = r.reply_take(rid);
  REQUIRE(reply);
  CHECK(reply->status == EPROTO);
  CHECK(reply->text == "odd");
}

TEST_CASE("reply router: counted posted-write errors leave the next operation alone") {
  ReplyRouter r(1, "test", true);
  r.message_file(decoded(proto::ErrorMsg{EINVAL, "refused width"}, r.posted_request_id()));
  r.message_file(decoded(proto::ErrorMsg{EINVAL, "refused width"}, r.posted_request_id()));
  CHECK(r.posted_write_errors() == 2);
  CHECK_FALSE(r.error_pending());
  // The read after them answers with its own value.
  const auto read = r.request_id();
  r.message_file(decoded(proto::ReadReply{0, 0x1234}, read));
  auto reply = r.reply_collect(read);
  REQUIRE(reply);
  CHECK(reply->status == 0);
  CHECK(reply->value == 0x1234);
  // An error answering a request is still that request's.
  const auto broken = r.request_id();
  r.message_file(decoded(proto::ErrorMsg{EIO, "broken"}, broken));
  auto failed = r.reply_take(broken);
  REQUIRE(failed);
  CHECK(failed->status == EIO);
  CHECK(r.posted_write_errors() == 2);
}

TEST_CASE("reply router: interrupt counts never go back, unknown vectors are ignored, the listener hears each") {
  ReplyRouter r(2, "test");
  int heard = 0;
  r.listen([&] { ++heard; });
  r.message_file(decoded(proto::Interrupt{1, 5}, 0));
  r.message_file(decoded(proto::Interrupt{1, 3}, 0));               // late and older: the count stays
  r.message_file(decoded(proto::Interrupt{2, 9}, 0));               // no such vector
  r.message_file(decoded(proto::ReadReply{0, 1}, r.request_id()));  // a reply is not news for the listener
  CHECK(r.interrupt_count(1) == 5);
  CHECK(r.interrupt_count(0) == 0);
  CHECK(r.interrupt_count(2) == 0);
  CHECK(r.interrupts_received() == 2);
  CHECK(heard == 2);
  r.listen({});
  r.message_file(decoded(proto::Interrupt{0, 1}, 0));
  CHECK(heard == 2);
}

TEST_CASE("reply router: an interrupt's arrival is stamped before the listener hears of it, nothing else stamps") {
  ReplyRouter r(1, "test");
  CHECK(r.interrupt_arrived() == Deadline::Clock::time_point{});
  Deadline::Clock::time_point heard{};
  r.listen([&] { heard = r.interrupt_arrived(); });
  const auto before = Deadline::Clock::now();
  r.message_file(decoded(proto::Interrupt{0, 1}, 0));
  const auto after = Deadline::Clock::now();
  CHECK(heard >= before);
  CHECK(heard <= after);
  CHECK(r.interrupt_arrived() == heard);
  // A reply, a refused interrupt (no such vector) and one whose count jumps too far raise no
  // count: the stamp stays the last interrupt's.
  std::this_thread::sleep_for(1ms);
  r.message_file(decoded(proto::ReadReply{0, 1}, r.request_id()));
  r.message_file(decoded(proto::Interrupt{3, 1}, 0));
  r.message_file(decoded(proto::Interrupt{0, 2 + kInterruptStepMax}, 0));
  CHECK(r.interrupt_arrived() == heard);
  r.message_file(decoded(proto::Interrupt{0, 2}, 0));
  CHECK(r.interrupt_arrived() > after);
  CHECK(heard == r.interrupt_arrived());
}

TEST_CASE("reply router: the first failure sticks, is reported before anything else, and wakes sleepers") {
  ReplyRouter r(1, "test");
  int heard = 0;
  r.listen([&] { ++heard; });
  r.message_file(decoded(proto::ErrorMsg{EPERM, "posted"}, r.posted_request_id()));
  std::thread sleeper([&] { r.sleep(std::chrono::steady_clock::now() + 10s, r.changes()); });
  std::this_thread::sleep_for(20ms);
  const auto t = std::chrono::steady_clock::now();
  CHECK(r.fail(Error{ErrorDomain::posix, EIO, "link lost"}));
  sleeper.join();
  CHECK(std::chrono::steady_clock::now() - t < 5s);
  CHECK_FALSE(r.fail(Error{ErrorDomain::posix, ENOTCONN, "later"}));
  REQUIRE(r.failure());
  CHECK(r.failure()->code == EIO);
  CHECK(r.error_pending()->code == EIO);
  CHECK(heard == 1);
  ReplyRouter q(1, "test");
  q.listen([&] { ++heard; });
  CHECK(q.fail(Error{ErrorDomain::posix, ENOTCONN, "detached"}, true));
  CHECK(heard == 1);  // an orderly end is not news
}

TEST_CASE("reply router: a sleeper wakes when something is filed") {
  ReplyRouter r(1, "test");
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    r.sleep(std::chrono::steady_clock::now() + 10s, r.changes());
    woke = true;
  });
  // Filing until the sleeper has gone to sleep and been woken (bounded).
  const auto start = std::chrono::steady_clock::now();
  while (!woke && std::chrono::steady_clock::now() - start < 5s) {
    r.message_file(decoded(proto::WriteAck{0}, r.request_id()));
    std::this_thread::sleep_for(1ms);
  }
  sleeper.join();
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("reply router: what happened between a caller's look and its sleep is not slept through") {
  // The caller's order: changes() read, its reply looked for (not there), the receive role
  // tried (taken); then the reply is filed or the role freed, and only then does it sleep.
  ReplyRouter r(1, "test");
  const auto rid = r.request_id();
  auto seen = r.changes();
  CHECK_FALSE(r.reply_arrived(rid));
  r.message_file(decoded(proto::WriteAck{0}, rid));
  auto t = std::chrono::steady_clock::now();
  r.sleep(t + 10s, seen);
  CHECK(std::chrono::steady_clock::now() - t < 1s);
  CHECK(r.reply_arrived(rid));
  seen = r.changes();
  r.sleepers_wake();
  t = std::chrono::steady_clock::now();
  r.sleep(t + 10s, seen);
  CHECK(std::chrono::steady_clock::now() - t < 1s);
  // Nothing new: the sleep lasts until `until`.
  seen = r.changes();
  t = std::chrono::steady_clock::now();
  r.sleep(t + 30ms, seen);
  CHECK(std::chrono::steady_clock::now() - t >= 30ms);
}

TEST_CASE("reply router: collecting a reply reports a posted write's earlier error instead, once") {
  ReplyRouter r(1, "test");
  const auto posted = r.posted_request_id();
  const auto rid = r.request_id();
  CHECK(r.reply_collect(rid).error().code == EPROTO);  // nothing filed for it
  r.message_file(decoded(proto::ErrorMsg{EPERM, "read-only BAR"}, posted));
  r.message_file(decoded(proto::ReadReply{0, 7}, rid));
  auto first = r.reply_collect(rid);
  REQUIRE_FALSE(first);
  CHECK(first.error().code == EPERM);
  const auto next = r.request_id();
  r.message_file(decoded(proto::ReadReply{0, 8}, next));
  auto second = r.reply_collect(next);
  REQUIRE(second);
  CHECK(second->value == 8);
  CHECK_FALSE(r.error_pending());
}

TEST_CASE("reply router: replies nobody asked for are refused and counted, never stored") {
  ReplyRouter r(2, "test");
  const auto rid = r.request_id();
  // Never issued, issued twice over, and an id one past the last issued.
  r.message_file(decoded(proto::ReadReply{0, 0xbad}, rid + 1));
  r.message_file(decoded(proto::ReadReply{0, 0xbad}, 0));
  CHECK_FALSE(r.reply_arrived(rid + 1));
  CHECK(r.messages_refused() == 2);
  r.message_file(decoded(proto::ReadReply{0, 0x600d}, rid));
  r.message_file(decoded(proto::ReadReply{0, 0xbad}, rid));  // a second answer
  CHECK(r.messages_refused() == 3);
  auto reply = r.reply_take(rid);
  REQUIRE(reply);
  CHECK(reply->value == 0x600d);
  // A caller that gave up: its late reply is dropped, not stored and not counted as a
  // forgery; a second answer to it is refused.
  const auto late = r.request_id();
  r.request_forget(late);
  r.message_file(decoded(proto::WriteAck{0}, late));
  CHECK_FALSE(r.reply_arrived(late));
  CHECK(r.messages_refused() == 3);
  r.message_file(decoded(proto::WriteAck{0}, late));
  CHECK(r.messages_refused() == 4);
  // An error for a posted write never issued is not kept for the next operation.
  r.message_file(decoded(proto::ErrorMsg{EIO, "forged"}, (late + 10) | kPostedBit));
  r.message_file(decoded(proto::ErrorMsg{EIO, "forged"}, kPostedBit));
  CHECK_FALSE(r.error_pending());
  CHECK(r.messages_refused() == 6);
  // Interrupt counts grow by at most kInterruptStepMax at once.
  r.message_file(decoded(proto::Interrupt{0, ~std::uint64_t{0}}, 0));
  CHECK(r.interrupt_count(0) == 0);
  r.message_file(decoded(proto::Interrupt{0, kInterruptStepMax}, 0));
  CHECK(r.interrupt_count(0) == kInterruptStepMax);
  r.message_file(decoded(proto::Interrupt{0, 2 * kInterruptStepMax + 1}, 0));
  CHECK(r.interrupt_count(0) == kInterruptStepMax);
  CHECK(r.messages_refused() == 8);
  // A message the exporter never sends.
  r.message_file(decoded(proto::MmioRead{}, 0));
  CHECK(r.messages_refused() == 9);
  CHECK(r.interrupts_received() == 1);
}

TEST_CASE("reply router: a lost link without a resumer is the failure; with one, a resume that callers wait out") {
  const Error lost{ErrorDomain::posix, EIO, "link to the exporter lost: test"};
  SUBCASE("no resumer: fail(e)") {
    ReplyRouter r(1, "test");
    r.link_lost(lost);
    REQUIRE(r.failure());
    CHECK(r.failure()->code == EIO);
    CHECK_FALSE(r.resuming());
  }
  SUBCASE("a resumer: called once per loss, no failure, sleepers woken, resumed() ends it") {
    ReplyRouter r(1, "test");
    int called = 0;
    r.resumer_set([&] { ++called; });
    const auto seen = r.changes();
    r.link_lost(lost);
    r.link_lost(lost);  // the same loss seen by a second thread
    CHECK(called == 1);
    CHECK(r.resuming());
    CHECK_FALSE(r.failure());
    CHECK_FALSE(r.error_pending());
    CHECK(r.changes() != seen);  // a caller asleep stops receiving on the dead link
    const auto before = r.changes();
    r.resumed();
    CHECK_FALSE(r.resuming());
    CHECK(r.resumes() == 1);
    CHECK(r.changes() != before);
    r.link_lost(lost);  // a second loss: a second resume
    CHECK(called == 2);
    // A resume that cannot be done fails the attachment as before.
    CHECK(r.fail(Error{ErrorDomain::posix, EIO, "not resumed"}));
    r.link_lost(lost);
    CHECK(called == 2);
  }
}

TEST_CASE("reply router: answered() is the last answer's id, for requests and posted writes, never a stray one") {
  ReplyRouter r(1, "test");
  CHECK(r.answered() == 0);
  const auto a = r.request_id();
  const auto posted = r.posted_request_id();
  const auto b = r.request_id();
  r.message_file(decoded(proto::ReadReply{0, 1}, a));
  CHECK(r.answered() == a);
  r.message_file(decoded(proto::ErrorMsg{EPERM, "refused"}, posted));
  CHECK(r.answered() == posted);
  r.message_file(decoded(proto::Interrupt{0, 1}, 0));  // no answer
  CHECK(r.answered() == posted);
  r.message_file(decoded(proto::WriteAck{0}, b + 40));  // an id never given: refused, not noted
  CHECK(r.answered() == posted);
  r.message_file(decoded(proto::WriteAck{0}, b));
  CHECK(r.answered() == b);
  r.message_file(decoded(proto::WriteAck{0}, a));  // an older one (refused as a second reply)
  CHECK(r.answered() == b);
}
