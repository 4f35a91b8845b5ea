// frontend: the service loop: its status line from a control "status" answer, watchdog pings
// only while the control socket answers, and SIGHUP taken by its thread.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "../../support/temp_dir.hpp"
#include "control_server.hpp"
#include "service_loop.hpp"

using namespace rpcie;
using namespace rpcie::hostd;
using namespace std::chrono_literals;
using nlohmann::json;
using rpcie::test::TempDir;

namespace {

// A bound datagram socket at `path`: the service manager's end.
Fd manager_socket(const std::string& path) {
  Fd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.data(), path.size());
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  return fd;
}

int pings(const Fd& fd) {
  int n = 0;
  char buf[256];
  for (ssize_t r; (r = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0;)
    n += std::string(buf, static_cast<std::size_t>(r)) == "WATCHDOG=1\n";
  return n;
}

}  // namespace

TEST_CASE("the status line counts attached devices and those being restored apart") {
  CHECK(hostd_status_text(json{{"attachments", json::array()}}) == "0 devices attached");
  CHECK(hostd_status_text(json{{"attachments", {{{"device", "rpcie0"}, {"state", "connected"}}}}}) ==
        "1 device attached");
  CHECK(hostd_status_text(json{{"attachments",
                                {{{"device", "rpcie0"}, {"hidden", true}},
                                 {{"device", "rpcie1"}, {"state", "restoring"}},
                                 {{"device", "rpcie2"}, {"state", "reconnecting"}}}}}) ==
        "2 devices attached, 1 being restored");
  CHECK(hostd_status_text(json::object()) == "0 devices attached");
}

TEST_CASE("the loop pings only while its control socket answers, and takes SIGHUP") {
  sigset_t hup;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &hup, nullptr) == 0);  // as hostd's main does
  TempDir dir;
  Fd manager = manager_socket(dir.file("notify"));
  auto notifier = ServiceNotifier::make(dir.file("notify"), 200000, true);  // a ping every 100 ms
  std::atomic<int> hangups{0};
  auto control = ControlServer::start(dir.file("control"), 0, 0600, [](const json&) {
    return json{{"attachments", json::array()}};
  });
  REQUIRE(control);
  auto loop = ServiceLoop::start(notifier, dir.file("control"), [&] { hangups.fetch_add(1); });
  REQUIRE(loop);
  std::this_thread::sleep_for(550ms);
  CHECK(pings(manager) >= 3);
  control->reset();  // the control side gone: no answer, no ping
  std::this_thread::sleep_for(100ms);
  (void)pings(manager);
  std::this_thread::sleep_for(400ms);
  CHECK(pings(manager) == 0);
  ::kill(::getpid(), SIGHUP);
  for (int i = 0; i < 100 && hangups.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  CHECK(hangups.load() == 1);
  loop->reset();
}
