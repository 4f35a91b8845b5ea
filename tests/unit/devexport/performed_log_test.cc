// PerformedLog: the exporter's record of what it performed and the answers it sent, for a
// client that resumes after a lost link.
#include "performed_log.hpp"

#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

using rpcie::dev::PerformedLog;
using Answer = PerformedLog::Answer;

namespace {

constexpr std::uint64_t kPosted = std::uint64_t{1} << 63;

std::vector<std::uint8_t> bytes_of(std::uint8_t tag) { return {tag, static_cast<std::uint8_t>(tag + 1)}; }

std::vector<std::uint64_t> ids_of(const std::vector<Answer>& answers) {
  std::vector<std::uint64_t> out;
  for (const auto& a : answers) out.push_back(a.request_id);
  return out;
}

}  // namespace

TEST_CASE("a new log has performed nothing and owes nothing") {
  PerformedLog log;
  CHECK(log.performed() == 0);
  auto a = log.answers_after(0);
  REQUIRE(a.has_value());
  CHECK(a->empty());
}

TEST_CASE("posted writes and requests share one order; the watermark drops the posted bit") {
  PerformedLog log;
  CHECK(log.record(1 | kPosted, {}));
  CHECK(log.performed() == 1);
  const auto reply = bytes_of(7);
  CHECK(log.record(2, reply));
  CHECK(log.record(3 | kPosted, {}));
  CHECK(log.performed() == 3);
  auto a = log.answers_after(1);
  REQUIRE(a.has_value());
  CHECK(*a == std::vector<Answer>{{2, reply}});
}

TEST_CASE("an id not above the last is refused and changes nothing") {
  PerformedLog log;
  REQUIRE(log.record(5, bytes_of(1)));
  CHECK_FALSE(log.record(5, bytes_of(2)));
  CHECK_FALSE(log.record(4 | kPosted, bytes_of(3)));
  CHECK(log.performed() == 5);
  auto a = log.answers_after(0);
  REQUIRE(a.has_value());
  CHECK(*a == std::vector<Answer>{{5, bytes_of(1)}});
}

TEST_CASE("answers after a point come in id order, posted errors among them") {
  PerformedLog log;
  log.record(1, bytes_of(1));
  log.record(2 | kPosted, bytes_of(2));  // a posted write that failed: its error was sent
  log.record(3 | kPosted, {});
  log.record(4, bytes_of(4));
  auto all = log.answers_after(0);
  REQUIRE(all.has_value());
  CHECK(ids_of(*all) == std::vector<std::uint64_t>{1, 2 | kPosted, 4});
  auto late = log.answers_after(2 | kPosted);
  REQUIRE(late.has_value());
  CHECK(ids_of(*late) == std::vector<std::uint64_t>{4});
  auto none = log.answers_after(4);
  REQUIRE(none.has_value());
  CHECK(none->empty());
}

TEST_CASE("once an answer the client has not seen is dropped, no partial set is offered") {
  PerformedLog log(2);
  log.record(1, bytes_of(1));
  log.record(2, bytes_of(2));
  log.record(3, bytes_of(3));  // drops the answer to 1
  CHECK_FALSE(log.answers_after(0).has_value());
  auto from1 = log.answers_after(1);
  REQUIRE(from1.has_value());
  CHECK(ids_of(*from1) == std::vector<std::uint64_t>{2, 3});
  log.record(4 | kPosted, {});  // no answer: nothing dropped
  auto still = log.answers_after(1);
  REQUIRE(still.has_value());
  CHECK(ids_of(*still) == std::vector<std::uint64_t>{2, 3});
}

TEST_CASE("a log that keeps no answers can only say what was performed") {
  PerformedLog log(0);
  log.record(1 | kPosted, {});
  auto a = log.answers_after(0);
  REQUIRE(a.has_value());
  CHECK(a->empty());
  log.record(2, bytes_of(2));
  CHECK(log.performed() == 2);
  CHECK_FALSE(log.answers_after(1).has_value());
  auto after2 = log.answers_after(2);
  REQUIRE(after2.has_value());
  CHECK(after2->empty());
}
