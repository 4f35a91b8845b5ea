// LeaseKeeper: heartbeats on the bootstrap socket every lease/3, and the attachment fails
// (ENOTCONN) when an echo is missing or wrong. The exporter's side is played over a
// socketpair.
#include "lease_keeper.hpp"

#include <doctest/doctest.h>

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../support/eventually.hpp"
#include "../../support/threads_named.hpp"
#include "rpcie/process.hpp"

using namespace rpcie;
using namespace rpcie::client;
using namespace std::chrono_literals;
using rpcie::test::eventually;
using rpcie::test::threads_named;

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

namespace {

// The exporter's side of one connection: echoes every heartbeat until told to stop.
struct Echoer {
  explicit Echoer(Socket& s)
      : thread([this, &s] {
          while (!stop) {
            auto m = s.message_recv(Deadline::after(50ms));
            if (!m) {
              if (m.error().code == ETIMEDOUT) continue;
              return;
            }
            if (!s.message_send(m->decoded.message, 0, Deadline::after(5s))) return;
          }
        }) {}
  ~Echoer() {
    stop = true;
    thread.join();
  }
  std::atomic<bool> stop{false};
  std::thread thread;
};

}  // namespace

TEST_CASE("lease keeper: the keepers of a process share one heartbeat thread, which ends with the last") {
  CHECK(threads_named("rpcie-lease").empty());
  constexpr int kKeepers = 8;
  std::vector<std::unique_ptr<Pair>> pairs;
  std::vector<std::unique_ptr<ReplyRouter>> routers;
  std::vector<std::unique_ptr<Echoer>> echoers;
  std::vector<std::unique_ptr<LeaseKeeper>> keepers;
  for (int i = 0; i < kKeepers; ++i) {
    pairs.push_back(std::make_unique<Pair>());
    routers.push_back(std::make_unique<ReplyRouter>(0, "test"));
    echoers.push_back(std::make_unique<Echoer>(pairs.back()->exporter));
    keepers.push_back(std::make_unique<LeaseKeeper>(pairs.back()->client, 300ms, *routers.back()));
    keepers.back()->start();
  }
  CHECK(eventually([] { return threads_named("rpcie-lease").size() == 1; }));  // named once it runs
  // Every keeper's heartbeats are echoed: three each within a few intervals of 100 ms.
  CHECK(eventually(
      [&] { return std::all_of(keepers.begin(), keepers.end(), [](const auto& k) { return k->heartbeats() >= 3; }); }));
  for (const auto& r : routers) CHECK_FALSE(r->failure());
  for (auto& k : keepers) k->stop();
  CHECK(eventually([&] { return threads_named("rpcie-lease").empty(); }));
}

TEST_CASE("lease keeper: an exporter that never echoes fails its own attachment, not another's heartbeats") {
  Pair silent, live;
  ReplyRouter silent_router(0, "silent"), live_router(0, "live");
  Echoer echoer(live.exporter);
  LeaseKeeper a(silent.client, 600ms, silent_router);  // a heartbeat every 200 ms
  LeaseKeeper b(live.client, 600ms, live_router);
  const auto t0 = std::chrono::steady_clock::now();
  a.start();
  b.start();
  REQUIRE(eventually([&] { return silent_router.failure().has_value(); }));
  const auto failed_after = std::chrono::steady_clock::now() - t0;
  // The first heartbeat at 200 ms, its echo awaited for the lease: failed at about 800 ms.
  CHECK(failed_after >= 750ms);
  CHECK(failed_after < 800ms + LeaseKeeper::kIoBound + 500ms);
  CHECK(silent_router.failure()->code == ENOTCONN);
  CHECK(silent_router.failure()->message.find("no echo within the lease") != std::string::npos);
  CHECK(a.heartbeats() == 0);
  // Meanwhile the other attachment's heartbeats went every 200 ms, echoed.
  CHECK(b.heartbeats() >= 3);
  CHECK_FALSE(live_router.failure());
  a.stop();
  b.stop();
}

TEST_CASE("lease keeper: stop() with an echo in flight returns once the echo is read, leaving detach a clean socket") {
  Pair p;
  ReplyRouter router(0, "test");
  std::atomic<bool> heard{false};
  std::thread exporter([&] {
    auto m = p.exporter.message_recv(Deadline::after(5s));
    if (!m) return;
    heard = true;
    std::this_thread::sleep_for(150ms);  // the echo comes late
    (void)p.exporter.message_send(m->decoded.message, 0, Deadline::after(5s));
  });
  LeaseKeeper k(p.client, 600ms, router);  // a heartbeat every 200 ms, its echo awaited 600 ms
  k.start();
  REQUIRE(eventually([&] { return heard.load(); }));
  k.stop();
  exporter.join();
  CHECK(k.heartbeats() == 1);
  int unread = -1;
  REQUIRE(::ioctl(p.client.fd(), FIONREAD, &unread) == 0);
  CHECK(unread == 0);  // the echo was not left on the socket for the goodbye's answer
  CHECK_FALSE(router.failure());
}
