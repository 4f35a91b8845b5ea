// The pre-authentication gate: caps per source address and in all, places given back by
// tickets, and one address's connections never taking another's places.
#include "preauth_gate.hpp"

#include <doctest/doctest.h>

#include <vector>

using rpcie::dev::PreauthGate;

TEST_CASE("preauth gate: at most per_address from one address, the next one refused for its address") {
  PreauthGate gate(2, 10);
  auto a1 = gate.admit("10.0.0.1");
  auto a2 = gate.admit("10.0.0.1");
  REQUIRE(a1.ticket);
  REQUIRE(a2.ticket);
  auto a3 = gate.admit("10.0.0.1");
  CHECK_FALSE(a3.ticket);
  CHECK(a3.why == PreauthGate::Refusal::address);
  CHECK(gate.held("10.0.0.1") == 2);
  // Another address is not affected.
  auto b1 = gate.admit("10.0.0.2");
  CHECK(b1.ticket);
  CHECK(gate.held() == 3);
}

TEST_CASE("preauth gate: a ticket given back (reset or destroyed) frees its place") {
  PreauthGate gate(1, 10);
  auto a = gate.admit("10.0.0.1");
  REQUIRE(a.ticket);
  CHECK_FALSE(gate.admit("10.0.0.1").ticket);
  a.ticket->reset();
  CHECK(gate.held("10.0.0.1") == 0);
  CHECK(gate.held() == 0);
  {
    auto again = gate.admit("10.0.0.1");
    CHECK(again.ticket);
    PreauthGate::Ticket moved = std::move(*again.ticket);  // a moved-from ticket gives nothing back
    again.ticket.reset();
    CHECK(gate.held("10.0.0.1") == 1);
  }
  CHECK(gate.held() == 0);
  CHECK(gate.admit("10.0.0.1").ticket);
}

TEST_CASE("preauth gate: the total cap refuses every address once it is full") {
  PreauthGate gate(4, 3);
  std::vector<PreauthGate::Ticket> held;
  for (const char* a : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
    auto t = gate.admit(a);
    REQUIRE(t.ticket);
    held.push_back(std::move(*t.ticket));
  }
  auto over = gate.admit("10.0.0.4");
  CHECK_FALSE(over.ticket);
  CHECK(over.why == PreauthGate::Refusal::total);
  held.pop_back();
  CHECK(gate.admit("10.0.0.4").ticket);
}

TEST_CASE("preauth gate: an IPv6 /64 is one source, an IPv4-mapped address is its IPv4 address") {
  using rpcie::dev::preauth_source;
  CHECK(preauth_source("2001:db8:1:2::5") == "2001:db8:1:2::/64");
  CHECK(preauth_source("2001:db8:1:2:ffff:1:2:3") == "2001:db8:1:2::/64");
  CHECK(preauth_source("::ffff:10.0.0.1") == "10.0.0.1");
  CHECK(preauth_source("10.0.0.1") == "10.0.0.1");
  PreauthGate gate(2, 10);
  auto a1 = gate.admit("2001:db8:1:2::1");
  auto a2 = gate.admit("2001:db8:1:2:aaaa::9");
  REQUIRE(a1.ticket);
  REQUIRE(a2.ticket);
  auto a3 = gate.admit("2001:db8:1:2:ffff:ffff:ffff:ffff");
  CHECK_FALSE(a3.ticket);
  CHECK(a3.why == PreauthGate::Refusal::address);
  CHECK(gate.admit("2001:db8:1:3::1").ticket);  // the next /64 is another source
  auto m1 = gate.admit("10.0.0.7");
  auto m2 = gate.admit("::ffff:10.0.0.7");
  REQUIRE(m1.ticket);
  REQUIRE(m2.ticket);
  CHECK_FALSE(gate.admit("10.0.0.7").ticket);
  CHECK(gate.held("::ffff:10.0.0.7") == 2);
  a1.ticket.reset();
  CHECK(gate.held("2001:db8:1:2::77") == 1);
}
