// The process-wide spin budget (core/src/spin_budget.hpp): its rule, its slots, and a
// Channel's waits when no slot is free — they sleep, and still receive every message.
#include "spin_budget.hpp"

#include <time.h>

#include <chrono>
#include <memory>
#include <thread>

#include <doctest/doctest.h>

#include "channel_fixture.hpp"

using namespace channel_fixture;
using rpcie::SpinSlot;

TEST_CASE("the budget is RPCIE_SPIN_THREADS when it is a number from 0 to 4096, else the CPUs less one") {
  bool ignored = true;
  CHECK(rpcie::spin_budget_from(nullptr, 2, &ignored) == 1);
  CHECK_FALSE(ignored);
  CHECK(rpcie::spin_budget_from(nullptr, 1) == 1);
  CHECK(rpcie::spin_budget_from(nullptr, 0) == 1);
  CHECK(rpcie::spin_budget_from(nullptr, 16) == 15);
  CHECK(rpcie::spin_budget_from("0", 16, &ignored) == 0);
  CHECK_FALSE(ignored);
  CHECK(rpcie::spin_budget_from("3", 2) == 3);
  CHECK(rpcie::spin_budget_from("4096", 2) == 4096);
  for (const char* bad : {"", "x", "-1", "4097", "2 ", "2x", "99999999999999999999999"}) {
    CAPTURE(bad);
    ignored = false;
    CHECK(rpcie::spin_budget_from(bad, 4, &ignored) == 3);
    CHECK(ignored);
  }
}

TEST_CASE("no more slots are taken than the budget, and a released slot can be taken again") {
  const int budget = rpcie::spin_budget();
  REQUIRE(budget >= 1);
  auto slots = std::make_unique<SpinSlot[]>(static_cast<std::size_t>(budget) + 1);
  for (int i = 0; i < budget; ++i) CHECK(slots[i].take());
  CHECK(slots[0].take());  // a held slot stays held, and takes no second one
  CHECK_FALSE(slots[budget].take());
  slots[0].release();
  CHECK(slots[budget].take());
  CHECK_FALSE(slots[0].take());
  slots[budget].release();
  slots[budget].release();  // a second release gives nothing back twice
  CHECK(slots[0].take());
  CHECK_FALSE(slots[budget].take());
}

namespace {

std::chrono::milliseconds thread_cpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::seconds(t.tv_sec) +
                                                               std::chrono::nanoseconds(t.tv_nsec));
}

// The client waits for `count` messages that the server sends 20 ms apart; with a 50 ms
// spin, a waiter that spins burns ~20 ms of CPU per message. Returns the client thread's CPU.
std::chrono::milliseconds wait_for_messages(Pair& p, int count) {
  std::thread server([&] {
    for (int i = 1; i <= count; ++i) {
      std::this_thread::sleep_for(20ms);
      auto sent = p.sc().message_send(proto::Pong{}, static_cast<std::uint64_t>(i), Deadline::after(2s));
      if (!sent) FAIL_CHECK("send " << i << ": " << sent.error().describe());
    }
  });
  const auto cpu0 = thread_cpu();
  for (int i = 1; i <= count; ++i) {
    auto m = p.cc().message_recv(Deadline::after(2s));
    if (!m) {
      FAIL_CHECK("message " << i << ": " << m.error().describe());
      break;
    }
    CHECK((*m)->header.request_id == static_cast<std::uint64_t>(i));  // every one, in order
  }
  const auto cpu = thread_cpu() - cpu0;
  server.join();
  return cpu;
}

}  // namespace

TEST_CASE("with every slot taken a Channel's wait sleeps instead of spinning, and still receives") {
  ChannelOptions spin_long;
  spin_long.spin = 50ms;
  auto p = pair_open(4096, spin_long);
  const int budget = rpcie::spin_budget();
  constexpr int kMessages = 20;
  {
    auto slots = std::make_unique<SpinSlot[]>(static_cast<std::size_t>(budget));
    for (int i = 0; i < budget; ++i) REQUIRE(slots[i].take());
    const auto asleep = wait_for_messages(*p, kMessages);
    MESSAGE("client CPU with no slot free: " << asleep.count() << " ms");
    CHECK(asleep < 100ms);
  }
  // The control: with the slots free the same waits spin (≈ 400 ms of CPU), so the check
  // above can tell the two apart.
  const auto spinning = wait_for_messages(*p, kMessages);
  MESSAGE("client CPU with slots free: " << spinning.count() << " ms");
  CHECK(spinning > 100ms);
}

TEST_CASE("spinners that yield while contended may use every CPU; steady ones leave one free") {
  using rpcie::Spinner;
  CHECK(rpcie::spin_budget_from(nullptr, 2, nullptr, Spinner::yielding) == 2);
  CHECK(rpcie::spin_budget_from(nullptr, 16, nullptr, Spinner::yielding) == 16);
  CHECK(rpcie::spin_budget_from(nullptr, 1, nullptr, Spinner::yielding) == 1);
  CHECK(rpcie::spin_budget_from(nullptr, 0, nullptr, Spinner::yielding) == 1);
  bool ignored = true;
  CHECK(rpcie::spin_budget_from("0", 16, &ignored, Spinner::yielding) == 0);  // the operator's number, for both
  CHECK_FALSE(ignored);
  CHECK(rpcie::spin_budget_from("3", 16, nullptr, Spinner::yielding) == 3);
  CHECK(rpcie::spin_budget_from("x", 4, &ignored, Spinner::yielding) == 4);
  CHECK(ignored);

  // One count for both kinds: steady takers stop at their budget, yielding ones at theirs.
  const int steady = rpcie::spin_budget(Spinner::steady);
  const int yielding = rpcie::spin_budget(Spinner::yielding);
  REQUIRE(yielding >= steady);
  auto slots = std::make_unique<SpinSlot[]>(static_cast<std::size_t>(yielding) + 1);
  for (int i = 0; i < steady; ++i) CHECK(slots[i].take(Spinner::steady));
  for (int i = steady; i < yielding; ++i) {
    CHECK_FALSE(slots[i].take(Spinner::steady));
    CHECK(slots[i].take(Spinner::yielding));
  }
  CHECK_FALSE(slots[yielding].take(Spinner::yielding));
  CHECK_FALSE(slots[yielding].take(Spinner::steady));
}
