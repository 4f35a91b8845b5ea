// ResendQueue: what a client sent and has no proof yet of being performed, for a resume.
#include "resend_queue.hpp"

#include <cstdint>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

using rpcie::client::ResendQueue;

namespace {

constexpr std::uint64_t kPosted = std::uint64_t{1} << 63;

std::vector<std::uint8_t> bytes_of(std::uint8_t tag, std::size_t n = 3) { return std::vector<std::uint8_t>(n, tag); }

std::vector<std::uint64_t> ids_of(const std::vector<ResendQueue::Kept>& kept) {
  std::vector<std::uint64_t> out;
  for (const auto& k : kept) out.push_back(k.request_id);
  return out;
}

}  // namespace

TEST_CASE("what was sent is kept in send order, bytes and all") {
  ResendQueue q;
  CHECK(q.keep(1 | kPosted, bytes_of(1)));
  CHECK(q.keep(2, bytes_of(2, 5)));
  CHECK(q.size() == 2);
  CHECK(q.bytes() == 8);
  auto all = q.after(0);
  REQUIRE(all.size() == 2);
  CHECK(all[0] == ResendQueue::Kept{1 | kPosted, bytes_of(1)});
  CHECK(all[1] == ResendQueue::Kept{2, bytes_of(2, 5)});
}

TEST_CASE("an id not above the last kept one is refused") {
  ResendQueue q;
  REQUIRE(q.keep(5, bytes_of(5)));
  CHECK_FALSE(q.keep(5 | kPosted, bytes_of(6)));
  CHECK_FALSE(q.keep(3, bytes_of(3)));
  CHECK(ids_of(q.after(0)) == std::vector<std::uint64_t>{5});
  CHECK(q.bytes() == 3);
}

TEST_CASE("an answer proves everything up to it performed; the rest stays") {
  ResendQueue q;
  for (std::uint64_t id = 1; id <= 6; ++id) q.keep(id % 2 ? id | kPosted : id, bytes_of(static_cast<std::uint8_t>(id)));
  q.performed_through(4);
  CHECK(ids_of(q.after(0)) == std::vector<std::uint64_t>{5 | kPosted, 6});
  CHECK(q.bytes() == 6);
  q.performed_through(5 | kPosted);  // an error for a posted write is an answer too
  CHECK(ids_of(q.after(0)) == std::vector<std::uint64_t>{6});
  q.performed_through(2);  // older news changes nothing
  CHECK(q.size() == 1);
  q.performed_through(100);
  CHECK(q.size() == 0);
  CHECK(q.bytes() == 0);
}

TEST_CASE("a resume sends again only what the exporter did not perform") {
  ResendQueue q;
  for (std::uint64_t id = 10; id < 15; ++id) q.keep(id, bytes_of(static_cast<std::uint8_t>(id)));
  CHECK(ids_of(q.after(12)) == std::vector<std::uint64_t>{13, 14});
  CHECK(ids_of(q.after(12 | kPosted)) == std::vector<std::uint64_t>{13, 14});
  CHECK(q.after(14).empty());
  CHECK(q.size() == 5);  // after() only reads
}

TEST_CASE("senders keep while the receiving thread drops") {
  ResendQueue q;
  constexpr std::uint64_t kIds = 20000;
  std::thread sender([&] {
    for (std::uint64_t id = 1; id <= kIds; ++id) REQUIRE(q.keep(id, bytes_of(1, 1)));
  });
  for (std::uint64_t id = 0; id < kIds; id += 7) q.performed_through(id);
  sender.join();
  q.performed_through(kIds - 3);
  CHECK(ids_of(q.after(0)) == std::vector<std::uint64_t>{kIds - 2, kIds - 1, kIds});
  CHECK(q.bytes() == 3);
}
