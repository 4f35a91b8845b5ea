// LocalDoorbell: the name follows the address; the owner creates (taking over a leftover)
// and unlinks, a peer opens (ENOENT without one); a ring wakes a sleeper in another process
// at once, a ring without an announced sleeper wakes nobody, and a sleep ends at its bound.
#include "local_doorbell.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

using namespace rpcie;
using namespace std::chrono_literals;

namespace {

std::vector<std::uint8_t> address_unique(const char* what) {
  const std::string s = std::string("test:") + what + ":" + std::to_string(::getpid());
  return {s.begin(), s.end()};
}

bool shm_exists(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm" + name).c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("local doorbell: named after the address, created by the owner, opened by the peer, unlinked by the owner") {
  const auto a = address_unique("life");
  const auto name = LocalDoorbell::name_for(a);
  CHECK(name.rfind("/rpcie-db-", 0) == 0);
  CHECK(name.size() == 10 + 16);
  CHECK(name != LocalDoorbell::name_for(address_unique("other")));
  // shm's addresses name its region; the doorbell goes beside it, under the same "PID:" prefix.
  const std::string shm = "fi_shm://1129:0:3";
  std::vector<std::uint8_t> shm_address(shm.begin(), shm.end());
  shm_address.push_back(0);
  CHECK(LocalDoorbell::name_for(shm_address) == "/1129:0:3.rpcie-db");
  const std::string odd = "fi_shm://../x";
  CHECK(LocalDoorbell::name_for(std::vector<std::uint8_t>(odd.begin(), odd.end())).rfind("/rpcie-db-", 0) == 0);
  auto none = LocalDoorbell::open(a);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == ENOENT);
  {
    auto owner = LocalDoorbell::create(a);
    REQUIRE(owner);
    struct stat st {};
    REQUIRE(::stat(("/dev/shm" + name).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0666);  // whatever the umask: the peer may be another user
    auto peer = LocalDoorbell::open(a);
    REQUIRE(peer);
  }
  CHECK_FALSE(shm_exists(name));
}

TEST_CASE("local doorbell: a leftover of a dead owner is taken over") {
  const auto a = address_unique("leftover");
  const auto name = LocalDoorbell::name_for(a);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  ::close(fd);
  auto owner = LocalDoorbell::create(a);
  REQUIRE(owner);
  auto peer = LocalDoorbell::open(a);
  REQUIRE(peer);  // the full-size file of the new owner, not the empty leftover
}

TEST_CASE("local doorbell: a ring wakes a sleeper in another process; without a sleeper nobody waits") {
  const auto a = address_unique("ring");
  auto owner = LocalDoorbell::create(a);
  REQUIRE(owner);
  // Nobody announced: a ring is a load and nothing else, and a later sleep is not cut short.
  {
    auto peer = LocalDoorbell::open(a);
    REQUIRE(peer);
    peer->ring();
  }
  auto word = owner->sleep_announce();
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(owner->sleep(word, 20ms));
  owner->sleep_end();
  CHECK(std::chrono::steady_clock::now() - t0 >= 19ms);

  // A sleeper announced, then the peer (a child process) rings: the sleep ends long before
  // its 10 s bound.
  word = owner->sleep_announce();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto peer = LocalDoorbell::open(a);
    if (!peer) ::_exit(2);
    ::usleep(20000);
    peer->ring();
    ::_exit(0);
  }
  t0 = std::chrono::steady_clock::now();
  const bool rung = owner->sleep(word, 10s);
  const auto took = std::chrono::steady_clock::now() - t0;
  owner->sleep_end();
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(rung);
  CHECK(took < 5s);

  // Rung between the announcement and the sleep (the window the protocol closes): the
  // sleep returns at once.
  word = owner->sleep_announce();
  {
    auto peer = LocalDoorbell::open(a);
    REQUIRE(peer);
    peer->ring();
  }
  t0 = std::chrono::steady_clock::now();
  CHECK(owner->sleep(word, 10s));
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  owner->sleep_end();
}
