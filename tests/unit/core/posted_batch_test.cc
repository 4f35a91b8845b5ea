// PostedBatch: when posted writes leave (eager first writes of a burst, the 20 us timer, a
// full batch), pushed window bytes ahead of the writes, and the batch size per provider.
#include "posted_batch.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace rpcie;
using namespace rpcie::client;
using namespace std::chrono_literals;
using Clock = PostedBatch::Clock;

namespace {
proto::MmioWrite write_at(std::uint64_t offset) { return proto::MmioWrite{0, 4, offset, offset}; }
const Clock::time_point t0 = Clock::time_point{} + 1h;  // a start well clear of the epoch
const Clock::time_point never{};                        // "no call has waited yet"
PostedBatch::Added add(PostedBatch& b, const proto::MmioWrite& w, Clock::time_point now, Clock::time_point waited) {
  return b.write_add(
      w, [now] { return now; }, [waited] { return waited; });
}
}  // namespace

TEST_CASE("posted batch: the first four writes of a burst leave at once, the fifth waits for the dispatcher") {
  PostedBatch b;
  for (int i = 0; i < PostedBatch::kEagerWrites; ++i) {
    auto a = add(b, write_at(i * 4), t0 + std::chrono::microseconds(i), never);
    CHECK(a.send_now);
    CHECK_FALSE(a.wake);
    REQUIRE(b.take(t0 + std::chrono::microseconds(i)));  // the writer sent it
  }
  auto fifth = add(b, write_at(16), t0 + 5us, never);
  CHECK_FALSE(fifth.send_now);
  CHECK(fifth.wake);
  // Later writes join the waiting batch without waking anyone again.
  auto sixth = add(b, write_at(20), t0 + 6us, never);
  CHECK_FALSE(sixth.send_now);
  CHECK_FALSE(sixth.wake);
}

TEST_CASE("posted batch: a call that waited ends the burst, and so does a quiet spell of 20 us") {
  PostedBatch b;
  for (int i = 0; i < PostedBatch::kEagerWrites; ++i) {
    REQUIRE(add(b, write_at(0), t0, never).send_now);
    REQUIRE(b.take(t0));
  }
  // A read (a call that waits) ended after the window began: the next doorbell is eager.
  CHECK(add(b, write_at(0), t0 + 3us, t0 + 2us).send_now);
  REQUIRE(b.take(t0 + 3us));
  PostedBatch quiet;
  for (int i = 0; i < PostedBatch::kEagerWrites; ++i) {
    REQUIRE(add(quiet, write_at(0), t0, never).send_now);
    REQUIRE(quiet.take(t0));
  }
  CHECK_FALSE(add(quiet, write_at(0), t0 + PostedBatch::kBatchDelay, never).send_now);
  REQUIRE(quiet.take(t0 + PostedBatch::kBatchDelay));
  CHECK(add(quiet, write_at(0), t0 + PostedBatch::kBatchDelay + 21us, never).send_now);
}

TEST_CASE("posted batch: a full batch is sent by the writer that filled it") {
  PostedBatch b(3);
  for (int i = 0; i < PostedBatch::kEagerWrites; ++i) {  // use up the eager window
    REQUIRE(add(b, write_at(0), t0, never).send_now);
    REQUIRE(b.take(t0));
  }
  CHECK_FALSE(add(b, write_at(0), t0, never).send_now);
  CHECK_FALSE(add(b, write_at(4), t0, never).send_now);
  CHECK(add(b, write_at(8), t0, never).send_now);
}

TEST_CASE("posted batch: a burst queues without eager sends, says when full, and leaves in order") {
  PostedBatch b(3);
  CHECK_FALSE(b.burst_add(write_at(0), t0));  // no eager send for the first ones of a burst
  CHECK(b.pending());
  CHECK(*b.due() == t0 + PostedBatch::kBatchDelay);  // due as any batch, should its sender stop
  CHECK_FALSE(b.burst_add(write_at(4), t0 + 1us));
  CHECK(b.burst_add(write_at(8), t0 + 2us));  // full: the sender sends it now
  auto taken = b.take(t0 + 2us);
  REQUIRE(taken);
  REQUIRE(taken->writes.size() == 3);
  CHECK(taken->writes[0].offset == 0);
  CHECK(taken->writes[1].offset == 4);
  CHECK(taken->writes[2].offset == 8);
  CHECK_FALSE(b.pending());
  // A burst's writes join writes already waiting, behind them.
  for (int i = 0; i < PostedBatch::kEagerWrites; ++i) {
    REQUIRE(add(b, write_at(0), t0 + 10us, never).send_now);
    REQUIRE(b.take(t0 + 10us));
  }
  CHECK(add(b, write_at(100), t0 + 11us, never).wake);
  CHECK_FALSE(b.burst_add(write_at(200), t0 + 12us));
  taken = b.take(t0 + 12us);
  REQUIRE(taken);
  REQUIRE(taken->writes.size() == 2);
  CHECK(taken->writes[0].offset == 100);
  CHECK(taken->writes[1].offset == 200);
}

TEST_CASE("posted batch: take returns writes in order, and only once due when asked so") {
  PostedBatch b;
  for (int i = 0; i < PostedBatch::kEagerWrites; ++i) {
    REQUIRE(add(b, write_at(0), t0, never).send_now);
    REQUIRE(b.take(t0));
  }
  CHECK_FALSE(b.pending());
  CHECK_FALSE(b.due());
  (void)add(b, write_at(100), t0 + 1us, never);
  (void)add(b, write_at(200), t0 + 2us, never);
  CHECK(b.pending());
  REQUIRE(b.due());
  CHECK(*b.due() == t0 + 1us + PostedBatch::kBatchDelay);
  CHECK_FALSE(b.take(t0 + 20us, true));  // 19 us after the oldest: not due yet
  auto taken = b.take(t0 + 21us, true);
  REQUIRE(taken);
  REQUIRE(taken->writes.size() == 2);
  CHECK(taken->writes[0].offset == 100);
  CHECK(taken->writes[1].offset == 200);
  CHECK(taken->push.empty());
  CHECK_FALSE(b.pending());
  CHECK_FALSE(b.take(t0 + 1s));
}

TEST_CASE("posted batch: pushed bytes wait for an empty batch and leave ahead of the writes after them") {
  PostedBatch b;
  const std::vector<std::uint8_t> bytes{1, 2, 3};
  CHECK(b.push_set(bytes, 0x1000, t0));
  CHECK(b.pending());
  CHECK_FALSE(b.push_set(bytes, 0x2000, t0));  // something waits: the caller sends it first
  auto doorbell = add(b, write_at(0x98), t0 + 1us, never);
  CHECK(doorbell.send_now);  // the doorbell is the first write of this batch: eager
  auto taken = b.take(t0 + 1us);
  REQUIRE(taken);
  CHECK(taken->push == bytes);
  CHECK(taken->push_at == 0x1000);
  REQUIRE(taken->writes.size() == 1);
  CHECK(taken->writes[0].offset == 0x98);
}

TEST_CASE("posted batch: as many writes as fit in one inject where that is large, else the protocol's maximum") {
  CHECK(PostedBatch::writes_max_for(64) == proto::kMaxBatch);  // tcp
  for (std::size_t inject : {std::size_t{1024}, std::size_t{4096}}) {
    const std::size_t n = PostedBatch::writes_max_for(inject);
    REQUIRE(n > 1);
    CHECK(n <= proto::kMaxBatch);
    proto::MmioWriteBatch fits{std::vector<proto::MmioWrite>(n, write_at(8))};
    CHECK(proto::message_encoded_size(fits) <= inject);
    if (n < proto::kMaxBatch) {
      proto::MmioWriteBatch over{std::vector<proto::MmioWrite>(n + 1, write_at(8))};
      CHECK(proto::message_encoded_size(over) > inject);
    }
  }
}

TEST_CASE("posted batch: sends that take longer than the window do not end the burst") {
  // Each eager send takes 30 us (longer than kBatchDelay); the application writes again 0.2 us
  // after each call returns. The burst goes on: four writes leave at once, the rest batch.
  PostedBatch b;
  auto now = t0;
  for (int i = 0; i < PostedBatch::kEagerWrites; ++i) {
    auto a = add(b, write_at(i * 4), now, never);
    REQUIRE(a.send_now);
    REQUIRE(b.take(now));
    now += 30us;
    b.write_end(now);
    now += 200ns;
  }
  auto fifth = add(b, write_at(16), now, never);
  CHECK_FALSE(fifth.send_now);
  CHECK(fifth.wake);
}

TEST_CASE("posted batch: a stream of writes batches from its second window on, until a gap ends it") {
  // 0.5 us apart: 41 writes in the first 20 us of application time, four of them eager.
  PostedBatch b;
  auto now = t0;
  int eager = 0, sent_by_timer = 0;
  for (int i = 0; i < 200; ++i, now += 500ns) {
    if (auto due = b.due(); due && *due <= now) sent_by_timer += b.take(now, true).has_value();
    auto a = add(b, write_at(0), now, never);
    if (a.send_now) {
      ++eager;
      REQUIRE(b.take(now));
      b.write_end(now);
    }
  }
  CHECK(eager == PostedBatch::kEagerWrites);
  CHECK(sent_by_timer == 4);  // one batch per 20 us after the eager writes
  // More than 20 us without a write ends the stream: the next write is eager again.
  REQUIRE(b.take(now));
  CHECK_FALSE(add(b, write_at(0), now + PostedBatch::kBatchDelay, never).send_now);
  REQUIRE(b.take(now + PostedBatch::kBatchDelay));
  CHECK(add(b, write_at(0), now + 2 * PostedBatch::kBatchDelay + 1us, never).send_now);
}

TEST_CASE("posted batch: a doorbell every 10 us of application time is always eager") {
  // A driver that rings, then polls host memory for 10 us: two writes per window, never a
  // stream, so none waits for the dispatcher.
  PostedBatch b;
  auto now = t0;
  for (int i = 0; i < 50; ++i) {
    auto a = add(b, write_at(0x98), now, never);
    REQUIRE(a.send_now);
    REQUIRE(b.take(now));
    now += 8us;  // the send
    b.write_end(now);
    now += 10us;
  }
}

TEST_CASE("posted batch: a write that joins a waiting batch reads no clock, but every 16th does") {
  PostedBatch b;
  int clock_reads = 0;
  auto now = [&] {
    ++clock_reads;
    return t0;
  };
  auto waited = [&] {
    ++clock_reads;
    return never;
  };
  (void)b.write_add(write_at(0), now, waited);
  CHECK(clock_reads == 2);
  for (std::size_t i = 2; i < PostedBatch::kDueCheckEvery; ++i) (void)b.write_add(write_at(4 * i), now, waited);
  CHECK(clock_reads == 2);
  (void)b.write_add(write_at(64), now, waited);
  CHECK(clock_reads == 3);
}

TEST_CASE("posted batch: a due batch is sent by the writer that finds it due (every 16th write looks)") {
  PostedBatch b;
  auto first = add(b, write_at(0), t0, never);  // a fresh burst: eager
  REQUIRE(first.send_now);
  REQUIRE(b.take(t0));
  // Make the window a stream: more than kEagerWrites writes in it, then its successor.
  for (int i = 1; i < 8; ++i) {
    auto a = add(b, write_at(4 * i), t0 + std::chrono::microseconds(i), never);
    if (a.send_now) REQUIRE(b.take(t0 + std::chrono::microseconds(i)));
  }
  (void)b.take(t0 + 8us);
  b.write_end(t0 + 8us);
  const auto start = t0 + 8us + PostedBatch::kBatchDelay;  // the next window
  auto a = add(b, write_at(0), start, never);
  REQUIRE_FALSE(a.send_now);
  CHECK(a.wake);
  CHECK(a.due == start + PostedBatch::kBatchDelay);
  // Writes 2..15 do not look at the clock; the 16th, not yet due, keeps waiting.
  for (std::size_t i = 2; i < PostedBatch::kDueCheckEvery; ++i)
    CHECK_FALSE(add(b, write_at(4 * i), start + PostedBatch::kBatchDelay * 2, never).send_now);
  CHECK_FALSE(add(b, write_at(64), start + PostedBatch::kBatchDelay - 1us, never).send_now);
  // The 32nd finds it due: its writer sends it, and the next write starts a new batch.
  for (std::size_t i = PostedBatch::kDueCheckEvery + 1; i < 2 * PostedBatch::kDueCheckEvery; ++i)
    CHECK_FALSE(add(b, write_at(4 * i), start, never).send_now);
  auto due = add(b, write_at(128), start + PostedBatch::kBatchDelay, never);
  CHECK(due.send_now);
  CHECK_FALSE(due.wake);
  auto taken = b.take(start + PostedBatch::kBatchDelay);
  REQUIRE(taken);
  CHECK(taken->writes.size() == 2 * PostedBatch::kDueCheckEvery);
}

TEST_CASE("posted batch: a push outgrowing a large inject leaves in pieces that each fit, the writes with the last") {
  CHECK(PostedBatch::push_pieces_ahead(64, 4096, 1).empty());   // tcp: one message, not injected anyway
  CHECK(PostedBatch::push_pieces_ahead(544, 4096, 1).empty());  // a sealed small inject: likewise
  const std::vector<std::uint8_t> bytes(16 << 10, 0xab);
  const std::vector<proto::MmioWrite> one{write_at(8)};
  const std::size_t inject = 4096 - 32;  // shm's 4 KiB, sealed
  for (std::size_t length : {std::size_t{1}, std::size_t{3000}, std::size_t{4000}, std::size_t{4096}, std::size_t{8192},
                             std::size_t{16 << 10}}) {
    CAPTURE(length);
    const auto pieces = PostedBatch::push_pieces_ahead(inject, length, one.size());
    const std::span<const std::uint8_t> push(bytes.data(), length);
    if (proto::message_encoded_size(proto::WindowPush{0, push, one}) <= inject) {
      CHECK(pieces.empty());
      continue;
    }
    REQUIRE_FALSE(pieces.empty());
    std::size_t at = 0;
    for (const std::size_t n : pieces) {
      CHECK(n > 0);
      CHECK(proto::message_encoded_size(proto::WindowPush{at, push.subspan(at, n), {}}) <= inject);
      at += n;
    }
    REQUIRE(at < length);  // the last message keeps some bytes, and the writes
    CHECK(proto::message_encoded_size(proto::WindowPush{at, push.subspan(at), one}) <= inject);
    // No more messages than it takes: every piece but the last ahead fills its message.
    for (std::size_t i = 0, start = 0; i + 1 < pieces.size(); start += pieces[i++])
      CHECK(proto::message_encoded_size(proto::WindowPush{start, push.subspan(start, pieces[i]), {}}) == inject);
  }
  // Writes that fill a message alone: one message, as before.
  const std::vector<proto::MmioWrite> many(PostedBatch::writes_max_for(4096), write_at(8));
  CHECK(PostedBatch::push_pieces_ahead(inject, 4096, many.size()).empty());
}
