// frontend: the DMA window file and the control socket (both ends), without FUSE or fabric.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "../../support/temp_dir.hpp"
#include "attach_manager.hpp"
#include "control_server.hpp"
#include "dma_window.hpp"
#include "rpcie/control.hpp"

using namespace rpcie;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

using rpcie::test::TempDir;

Deadline soon() { return Deadline::after(2s); }

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  return a;
}

// A socket file nobody listens on: what a daemon that died leaves behind.
void socket_file_stale(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  auto a = unix_address(path);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  close(fd);
}

}  // namespace

TEST_CASE("DMA window file: sized, shared, mode applied, unlinked on request and on destruction") {
  TempDir d;
  const std::size_t size = 64 * 1024;
  std::string path;
  {
    auto w = hostd::DmaWindowFile::create(d.path, "win", size, getgid(), 0640);
    REQUIRE(w.has_value());
    path = w->path();
    CHECK(path == d.path + "/win");
    struct stat st {};
    REQUIRE(stat(path.c_str(), &st) == 0);
    CHECK(static_cast<std::size_t>(st.st_size) == size);
    CHECK((st.st_mode & 07777) == 0640);
    // Another mapping of the file sees the window's bytes: the memory is shared.
    static_cast<std::uint8_t*>(w->base())[4097] = 0xa5;
    int fd = open(path.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    auto* other = static_cast<std::uint8_t*>(mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0));
    REQUIRE(other != MAP_FAILED);
    CHECK(other[4097] == 0xa5);
    munmap(other, size);
    close(fd);
    // A second window of the same name is refused, not shared.
    auto again = hostd::DmaWindowFile::create(d.path, "win", size, getgid(), 0640);
    REQUIRE_FALSE(again.has_value());
    CHECK(again.error().code == EEXIST);
    w->unlink();
    CHECK(access(path.c_str(), F_OK) != 0);
    CHECK(w->path() == path);                      // still names it, for the link text
    static_cast<std::uint8_t*>(w->base())[0] = 1;  // still mapped
    auto moved = std::move(*w);
    CHECK(moved.size() == size);
  }
  auto w = hostd::DmaWindowFile::create(d.path, "win2", size, getgid(), 0600);
  REQUIRE(w.has_value());
  const std::string p2 = w->path();
  { auto gone = std::move(*w); }
  CHECK(access(p2.c_str(), F_OK) != 0);
}

TEST_CASE("DMA window file: bad sizes and places are refused with the errno") {
  TempDir d;
  auto zero = hostd::DmaWindowFile::create(d.path, "a", 0, getgid(), 0600);
  REQUIRE_FALSE(zero.has_value());
  CHECK(zero.error().code == EINVAL);
  auto odd = hostd::DmaWindowFile::create(d.path, "b", 4097, getgid(), 0600);
  REQUIRE_FALSE(odd.has_value());
  CHECK(odd.error().code == EINVAL);
  auto nowhere = hostd::DmaWindowFile::create(d.path + "/missing", "c", 4096, getgid(), 0600);
  REQUIRE_FALSE(nowhere.has_value());
  CHECK(nowhere.error().code == ENOENT);
}

TEST_CASE("control socket path: flag, then $RPCIE_CONTROL, then the default") {
  unsetenv("RPCIE_CONTROL");
  CHECK(control::socket_path_resolve("") == "/run/rpcie.sock");
  setenv("RPCIE_CONTROL", "/tmp/x.sock", 1);
  CHECK(control::socket_path_resolve("") == "/tmp/x.sock");
  CHECK(control::socket_path_resolve("/a.sock") == "/a.sock");
  unsetenv("RPCIE_CONTROL");
}

TEST_CASE("control lines: split reads, limits, end of stream, deadline") {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  REQUIRE(write(sv[0], "{\"a\":", 5) == 5);
  REQUIRE(write(sv[0], "1}\nrest", 7) == 7);
  auto line = control::line_read(sv[1], soon());
  REQUIRE(line.has_value());
  CHECK(*line == "{\"a\":1}");
  // The bytes after the newline stay for the next read.
  char rest[4] = {};
  CHECK(recv(sv[1], rest, 4, MSG_DONTWAIT) == 4);
  CHECK(std::string(rest, 4) == "rest");
  auto t0 = Deadline::Clock::now();
  auto timeout = control::line_read(sv[1], Deadline::after(100ms));
  REQUIRE_FALSE(timeout.has_value());
  CHECK(timeout.error().code == ETIMEDOUT);
  CHECK(Deadline::Clock::now() - t0 >= 90ms);  // it did wait for the line
  CHECK(Deadline::Clock::now() - t0 < 1s);
  REQUIRE(control::line_write(sv[0], "x", soon()).has_value());
  REQUIRE(write(sv[0], "partial", 7) == 7);
  close(sv[0]);
  auto whole = control::line_read(sv[1], soon());
  REQUIRE(whole.has_value());
  CHECK(*whole == "x");
  auto cut = control::line_read(sv[1], soon());  // the end of the stream inside a line
  REQUIRE_FALSE(cut.has_value());
  CHECK(cut.error().code == ECONNRESET);
  close(sv[1]);

  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  std::thread writer([fd = sv[0]] {
    std::string big(control::kMaxLine + 10, 'x');
    (void)control::line_write(fd, big, Deadline::after(2s));
  });
  auto huge = control::line_read(sv[1], soon());
  REQUIRE_FALSE(huge.has_value());
  CHECK(huge.error().code == EPROTO);
  close(sv[1]);
  writer.join();
  close(sv[0]);
}

TEST_CASE("control call: no daemon, a stale socket file") {
  TempDir d;
  auto none = control::call(d.path + "/none.sock", {{"op", "status"}}, soon());
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code == ENOENT);
  CHECK(none.error().message.find("no rpcie-hostd listens") != std::string::npos);
  // A socket file nobody listens on.
  const std::string stale = d.path + "/stale.sock";
  socket_file_stale(stale);
  auto refused = control::call(stale, {{"op", "status"}}, soon());
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ECONNREFUSED);
  auto long_path = control::call(std::string(200, 'x'), {{"op", "status"}}, soon());
  REQUIRE_FALSE(long_path.has_value());
  CHECK(long_path.error().code == EINVAL);
}

TEST_CASE("control server: requests, errors as errno, malformed input, one daemon per socket") {
  TempDir d;
  const std::string path = d.path + "/hostd.sock";
  std::atomic<int> calls{0};
  auto server = hostd::ControlServer::start(path, getgid(), 0660, [&](const json& r) -> json {
    ++calls;
    if (r["op"] == "status") return {{"attachments", json::array()}};
    if (r["op"] == "throw") return {{"x", r.at("missing").get<int>()}};  // a JSON type error
    return {{"error", "no such device rpcie9"}, {"errno", ENOENT}};
  });
  REQUIRE(server.has_value());
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0660);

  auto ok = control::call(path, {{"op", "status"}}, soon());
  REQUIRE(ok.has_value());
  CHECK((*ok)["attachments"].is_array());
  auto refused = control::call(path, {{"op", "detach"}, {"device", "rpcie9"}}, soon());
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ENOENT);
  CHECK(refused.error().message == "no such device rpcie9");
  auto thrown = control::call(path, {{"op", "throw"}}, soon());
  REQUIRE_FALSE(thrown.has_value());
  CHECK(thrown.error().code == EINVAL);
  CHECK(calls.load() == 3);

  // Not JSON, and JSON without "op": answered EINVAL, the handler is not called.
  for (const char* bad : {"this is not json", "[1,2]", "{\"op\":7}"}) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    auto a = unix_address(path);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(control::line_write(fd, bad, soon()).has_value());
    auto answer = control::line_read(fd, soon());
    REQUIRE(answer.has_value());
    auto j = json::parse(*answer);
    CHECK(j["errno"] == EINVAL);
    close(fd);
  }
  CHECK(calls.load() == 3);

  // A second daemon on a live socket is refused; the first keeps serving.
  auto second = hostd::ControlServer::start(path, getgid(), 0660, [](const json&) { return json::object(); });
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code == EADDRINUSE);
  CHECK(control::call(path, {{"op", "status"}}, soon()).has_value());

  // Stopping removes the socket; a new daemon may then take the path.
  server->reset();
  CHECK(access(path.c_str(), F_OK) != 0);
  auto third = hostd::ControlServer::start(path, getgid(), 0600, [](const json&) { return json{{"ok", true}}; });
  REQUIRE(third.has_value());
  CHECK(control::call(path, {{"op", "status"}}, soon()).has_value());
}

TEST_CASE("control server: a stale socket file is replaced, anything else at the path is not") {
  TempDir d;
  const std::string path = d.path + "/s.sock";
  socket_file_stale(path);
  auto s = hostd::ControlServer::start(path, getgid(), 0660, [](const json&) { return json{{"ok", 1}}; });
  REQUIRE(s.has_value());
  CHECK(control::call(path, {{"op", "x"}}, soon()).has_value());
  s->reset();
  const std::string file = d.path + "/plain";
  FILE* f = fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  fclose(f);
  auto no = hostd::ControlServer::start(file, getgid(), 0660, [](const json&) { return json::object(); });
  REQUIRE_FALSE(no.has_value());
  CHECK(no.error().code == EEXIST);
  CHECK(access(file.c_str(), F_OK) == 0);
}

TEST_CASE("control server: an answer may carry a file descriptor and keep its connection; the peer is known") {
  TempDir d;
  const std::string path = d.path + "/fds.sock";
  rpcie::Fd memfd(memfd_create("control-test", MFD_CLOEXEC));
  REQUIRE(memfd);
  REQUIRE(pwrite(memfd.get(), "ring", 4, 0) == 4);
  std::atomic<pid_t> peer_pid{0};
  std::promise<rpcie::Fd> kept;
  auto server = hostd::ControlServer::start(
      path, getgid(), 0660, [&](const json& r, const ucred& peer) -> hostd::ControlServer::Reply {
        peer_pid = peer.pid;
        if (r["op"] != "ring") return {.answer = {{"plain", true}}};
        return {.answer = {{"ring_bytes", 4}}, .fds = {memfd.get()}, .keep = [&kept](rpcie::Fd connection) {
                  kept.set_value(std::move(connection));
                }};
      });
  REQUIRE(server.has_value());
  CHECK(control::call(path, {{"op", "status"}}, soon()).has_value());  // answers alone still work

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto a = unix_address(path);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(control::line_write(fd, R"({"op":"ring"})", soon()).has_value());
  char first = 0;
  iovec iov{&first, 1};
  alignas(cmsghdr) char control_bytes[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control_bytes;
  msg.msg_controllen = sizeof control_bytes;
  REQUIRE(recvmsg(fd, &msg, MSG_CMSG_CLOEXEC) == 1);
  CHECK(first == '{');
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  REQUIRE(cmsg != nullptr);
  REQUIRE(cmsg->cmsg_type == SCM_RIGHTS);
  int passed = -1;
  std::memcpy(&passed, CMSG_DATA(cmsg), sizeof passed);
  char bytes[4] = {};
  CHECK(pread(passed, bytes, 4, 0) == 4);  // the very file the handler passed
  CHECK(std::string(bytes, 4) == "ring");
  close(passed);
  auto rest = control::line_read(fd, soon());
  REQUIRE(rest.has_value());
  CHECK(json::parse("{" + *rest)["ring_bytes"] == 4);
  CHECK(peer_pid.load() == getpid());

  // The kept connection is the program's: what it sends there arrives here.
  auto connection = kept.get_future();
  REQUIRE(connection.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  rpcie::Fd ours = connection.get();
  REQUIRE(write(fd, "x", 1) == 1);
  char got = 0;
  CHECK(read(ours.get(), &got, 1) == 1);
  CHECK(got == 'x');
  close(fd);
}

TEST_CASE("control server: when the answer cannot be sent, keep hears of it with an empty connection") {
  TempDir d;
  const std::string path = d.path + "/gone.sock";
  std::promise<void> closed;
  auto closed_seen = closed.get_future().share();
  std::promise<bool> kept;
  auto server =
      hostd::ControlServer::start(path, getgid(), 0660, [&](const json&, const ucred&) -> hostd::ControlServer::Reply {
        // Answer only once the program is gone: the send must fail.
        REQUIRE(closed_seen.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
        return {.answer = {{"ring_bytes", 4}},
                .keep = [&kept](rpcie::Fd connection) { kept.set_value(static_cast<bool>(connection)); }};
      });
  REQUIRE(server.has_value());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto a = unix_address(path);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(control::line_write(fd, R"({"op":"ring"})", soon()).has_value());
  close(fd);
  closed.set_value();
  auto outcome = kept.get_future();
  REQUIRE(outcome.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK_FALSE(outcome.get());  // called, and with no connection
}

TEST_CASE("peer_may_use: root, the other bits, or the group bits with the group among the peer's") {
  const ucred root{getpid(), 0, 0};
  CHECK(hostd::peer_may_use(root, 1234, 0600));
  const ucred user{getpid(), 1000, 1234};
  CHECK(hostd::peer_may_use(user, 1234, 0660));        // primary group
  CHECK_FALSE(hostd::peer_may_use(user, 1234, 0640));  // group may read only
  CHECK_FALSE(hostd::peer_may_use(user, 4321, 0660));  // not in the group (this process's groups lack 4321)
  CHECK(hostd::peer_may_use(user, 4321, 0666));
  CHECK_FALSE(hostd::peer_may_use(user, 4321, 0600));
}
