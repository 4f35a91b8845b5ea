// LeaseKeeper: heartbeats on the bootstrap socket every lease/3, and the attachment fails
// (ENOTCONN) when an echo is missing or wrong. The exporter's side is played over a
// socketpair.
#include "lease_keeper.hpp"

#include <doctest/doctest.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../../support/eventually.hpp"
#include "rpcie/process.hpp"

using namespace rpcie;
using namespace rpcie::client;
using namespace std::chrono_literals;
using rpcie::test::eventually;

namespace {

struct Pair {
  Pair() {
    signals_init();
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    client = Socket(fds[0]);
    exporter = Socket(fds[1]);
  }
  Socket client, exporter;
};

}  // namespace

TEST_CASE("lease keeper: a heartbeat every lease/3, at least 50 ms apart") {
  CHECK(LeaseKeeper::interval(3000ms) == 1000ms);
  CHECK(LeaseKeeper::interval(90ms) == 50ms);
}

TEST_CASE("lease keeper: echoed heartbeats keep the attachment; a peer that hangs up fails it with ENOTCONN") {
  Pair p;
  ReplyRouter router(0, "test");
  std::atomic<int> echoed{0};
  std::thread exporter([&] {
    for (int i = 0; i < 3; ++i) {
      auto m = p.exporter.message_recv(Deadline::after(5s));
      if (!m || !std::holds_alternative<proto::Heartbeat>(m->decoded.message)) return;
      if (!p.exporter.message_send(m->decoded.message, 0, Deadline::after(5s))) return;
      ++echoed;
    }
    p.exporter = Socket();  // hang up
  });
  LeaseKeeper k(p.client, 150ms, router);
  k.start();
  CHECK(eventually([&] { return router.failure().has_value(); }));
  exporter.join();
  k.stop();
  CHECK(echoed == 3);
  CHECK(k.heartbeats() == 3);
  REQUIRE(router.failure());
  CHECK(router.failure()->code == ENOTCONN);
  CHECK(router.failure()->message.find("exporter lost (heartbeat)") != std::string::npos);
}

TEST_CASE("lease keeper: a wrong answer to a heartbeat fails the attachment") {
  Pair p;
  ReplyRouter router(0, "test");
  std::thread exporter([&] {
    auto m = p.exporter.message_recv(Deadline::after(5s));
    if (m) (void)p.exporter.message_send(proto::Goodbye{}, 0, Deadline::after(5s));
  });
  LeaseKeeper k(p.client, 150ms, router);
  k.start();
  CHECK(eventually([&] { return router.failure().has_value(); }));
  exporter.join();
  k.stop();
  CHECK(k.heartbeats() == 0);
  CHECK(router.failure()->message.find("unexpected goodbye") != std::string::npos);
}

TEST_CASE("lease keeper: stop() ends it at once, without a failure") {
  Pair p;
  ReplyRouter router(0, "test");
  LeaseKeeper k(p.client, 30s, router);  // a heartbeat every 10 s
  k.start();
  const auto t = std::chrono::steady_clock::now();
  k.stop();
  CHECK(std::chrono::steady_clock::now() - t < 1s);
  CHECK_FALSE(router.failure());
}
