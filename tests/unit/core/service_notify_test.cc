// The service manager notifier against a datagram socket of the test's own: what each
// report sends, the watchdog's half interval, the status rate, and the no-op cases.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "rpcie/fd.hpp"
#include "rpcie/service_notify.hpp"

using namespace std::chrono_literals;
using rpcie::Fd;
using rpcie::ServiceNotifier;

namespace {

// A bound datagram socket, named by an abstract name unique to this process and `tag`.
struct Listener {
  Fd fd;
  std::string name;  // "@..." as $NOTIFY_SOCKET would have it
  explicit Listener(const char* tag) : fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    name = "@rpcie-notify-test-" + std::to_string(::getpid()) + "-" + tag;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path + 1, name.data() + 1, name.size() - 1);
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) == 0);
  }
  // Every datagram waiting now, each as one string.
  std::vector<std::string> drain() {
    std::vector<std::string> out;
    char buf[512];
    for (;;) {
      const ssize_t n = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) return out;
      out.emplace_back(buf, static_cast<std::size_t>(n));
    }
  }
};

}  // namespace

TEST_CASE("a notifier without a socket does nothing") {
  auto n = ServiceNotifier::make("", 1000000, true);
  CHECK_FALSE(n.enabled());
  n.ready();
  n.alive();
  n.status("x");
  CHECK(n.watchdog_interval().count() == 0);
}

TEST_CASE("a socket name that is neither a path nor @name disables the notifier") {
  CHECK_FALSE(ServiceNotifier::make("relative/sock", 0, true).enabled());
  CHECK_FALSE(ServiceNotifier::make("@", 0, true).enabled());
  CHECK_FALSE(ServiceNotifier::make(std::string(200, '/'), 0, true).enabled());
}

TEST_CASE("ready, reloading and stopping send their lines to an abstract socket") {
  Listener l("lines");
  auto n = ServiceNotifier::make(l.name, 0, true);
  REQUIRE(n.enabled());
  n.ready();
  n.reloading();
  n.stopping();
  auto got = l.drain();
  REQUIRE(got.size() == 3);
  CHECK(got[0] == "READY=1\n");
  CHECK(got[1].rfind("RELOADING=1\nMONOTONIC_USEC=", 0) == 0);
  CHECK(got[2] == "STOPPING=1\n");
}

TEST_CASE("the watchdog pings at half its interval, and only when WATCHDOG_PID is ours") {
  Listener l("watchdog");
  auto n = ServiceNotifier::make(l.name, 200000, true);
  CHECK(n.watchdog_interval() == 100ms);
  n.alive();  // the first call pings
  n.alive();  // too soon
  CHECK(l.drain() == std::vector<std::string>{"WATCHDOG=1\n"});
  std::this_thread::sleep_for(110ms);
  n.alive();
  CHECK(l.drain() == std::vector<std::string>{"WATCHDOG=1\n"});

  auto other = ServiceNotifier::make(l.name, 200000, false);
  CHECK(other.watchdog_interval().count() == 0);
  other.alive();
  CHECK(l.drain().empty());
}

TEST_CASE("status is sent when it changes, at a bounded rate, the last change flushed by alive") {
  Listener l("status");
  auto n = ServiceNotifier::make(l.name, 0, true);
  n.status("one\ntwo");
  n.status("one two");  // the same line once newlines are spaces: nothing new
  CHECK(l.drain() == std::vector<std::string>{"STATUS=one two\n"});
  n.status("three");  // within the interval: held back
  CHECK(l.drain().empty());
  std::this_thread::sleep_for(ServiceNotifier::kStatusInterval + 20ms);
  n.alive();
  CHECK(l.drain() == std::vector<std::string>{"STATUS=three\n"});
}

TEST_CASE("a path socket that nobody listens on drops the reports without failing") {
  auto n = ServiceNotifier::make("/nonexistent/rpcie-notify.sock", 1000000, true);
  REQUIRE(n.enabled());
  n.ready();
  n.alive();
}
