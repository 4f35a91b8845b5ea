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
  r.message_file(decoded(proto::ErrorMsg{EPERM, "read-only"}, 7 | kPostedBit));
  CHECK_FALSE(r.reply_arrived(7 | kPostedBit));
  auto e = r.error_pending();
  REQUIRE(e);
  CHECK(e->code == EPERM);
  CHECK(e->message.find("read-only") != std::string::npos);
  CHECK_FALSE(r.error_pending());
  // An error answering a request is that request's reply; code 0 becomes EPROTO.
  r.message_file(decoded(proto::ErrorMsg{0, "odd"}, 9));
  auto reply = r.reply_take(9);
  REQUIRE(reply);
  CHECK(reply->status == EPROTO);
  CHECK(reply->text == "odd");
}

TEST_CASE("reply router: counted posted-write errors leave the next operation alone") {
  ReplyRouter r(1, "test", true);
  r.message_file(decoded(proto::ErrorMsg{EINVAL, "refused width"}, 7 | kPostedBit));
  r.message_file(decoded(proto::ErrorMsg{EINVAL, "refused width"}, 8 | kPostedBit));
  CHECK(r.posted_write_errors() == 2);
  CHECK_FALSE(r.error_pending());
  // The read after them answers with its own value.
  r.message_file(decoded(proto::ReadReply{0, 0x1234}, 9));
  auto reply = r.reply_collect(9);
  REQUIRE(reply);
  CHECK(reply->status == 0);
  CHECK(reply->value == 0x1234);
  // An error answering a request is still that request's.
  r.message_file(decoded(proto::ErrorMsg{EIO, "broken"}, 10));
  auto failed = r.reply_take(10);
  REQUIRE(failed);
  CHECK(failed->status == EIO);
  CHECK(r.posted_write_errors() == 2);
}

TEST_CASE("reply router: interrupt counts never go back, unknown vectors are ignored, the listener hears each") {
  ReplyRouter r(2, "test");
  int heard = 0;
  r.listen([&] { ++heard; });
  r.message_file(decoded(proto::Interrupt{1, 5}, 0));
  r.message_file(decoded(proto::Interrupt{1, 3}, 0));  // late and older: the count stays
  r.message_file(decoded(proto::Interrupt{2, 9}, 0));  // no such vector
  r.message_file(decoded(proto::ReadReply{0, 1}, 4));  // a reply is not news for the listener
  CHECK(r.interrupt_count(1) == 5);
  CHECK(r.interrupt_count(0) == 0);
  CHECK(r.interrupt_count(2) == 0);
  CHECK(r.interrupts_received() == 2);
  CHECK(heard == 2);
  r.listen({});
  r.message_file(decoded(proto::Interrupt{0, 1}, 0));
  CHECK(heard == 2);
}

TEST_CASE("reply router: the first failure sticks, is reported before anything else, and wakes sleepers") {
  ReplyRouter r(1, "test");
  int heard = 0;
  r.listen([&] { ++heard; });
  r.message_file(decoded(proto::ErrorMsg{EPERM, "posted"}, 1 | kPostedBit));
  std::thread sleeper([&] { r.sleep(std::chrono::steady_clock::now() + 10s); });
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
    r.sleep(std::chrono::steady_clock::now() + 10s);
    woke = true;
  });
  // Filing until the sleeper has gone to sleep and been woken (bounded).
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t rid = 1; !woke && std::chrono::steady_clock::now() - start < 5s; ++rid) {
    r.message_file(decoded(proto::WriteAck{0}, rid));
    std::this_thread::sleep_for(1ms);
  }
  sleeper.join();
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("reply router: collecting a reply reports a posted write's earlier error instead, once") {
  ReplyRouter r(1, "test");
  CHECK(r.reply_collect(3).error().code == EPROTO);  // nothing filed for it
  r.message_file(decoded(proto::ErrorMsg{EPERM, "read-only BAR"}, 2 | kPostedBit));
  r.message_file(decoded(proto::ReadReply{0, 7}, 3));
  auto first = r.reply_collect(3);
  REQUIRE_FALSE(first);
  CHECK(first.error().code == EPERM);
  r.message_file(decoded(proto::ReadReply{0, 8}, 4));
  auto second = r.reply_collect(4);
  REQUIRE(second);
  CHECK(second->value == 8);
  CHECK_FALSE(r.error_pending());
}
