// rpcie/thread_sched.hpp: names, SCHED_BATCH and nice values land on the calling thread
// alone, as the kernel reports them.
#include "rpcie/thread_sched.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <doctest/doctest.h>

namespace {

int nice_of(pid_t tid) {
  errno = 0;
  const int n = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  REQUIRE(errno == 0);
  return n;
}

}  // namespace

TEST_CASE("thread_name names the calling thread") {
  std::thread([] {
    rpcie::thread_name("rpcie-test-name");
    char name[16] = {};
    REQUIRE(::prctl(PR_GET_NAME, name) == 0);
    CHECK(std::strcmp(name, "rpcie-test-name") == 0);
  }).join();
}

TEST_CASE("thread_background makes the calling thread SCHED_BATCH, and only it") {
  const int before = ::sched_getscheduler(0);
  std::thread([] {
    REQUIRE(rpcie::thread_background());
    CHECK(::sched_getscheduler(0) == SCHED_BATCH);
  }).join();
  CHECK(::sched_getscheduler(0) == before);
}

// The calling thread's time slice in ns, as /proc/thread-self/sched reports it (se.slice).
static long slice_ns() {
  std::ifstream f("/proc/thread-self/sched");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("se.slice", 0) == 0) return std::stol(line.substr(line.find(':') + 1));
  return -1;
}

TEST_CASE("thread_responsive sets the calling thread's nice value and slice, and only its") {
  const pid_t main_tid = ::gettid();
  const int main_nice = nice_of(main_tid);
  std::thread([&] {
    // Raising it needs no privilege.
    REQUIRE(rpcie::thread_responsive(main_nice + 3));
    CHECK(nice_of(::gettid()) == main_nice + 3);
    CHECK(nice_of(main_tid) == main_nice);
    CHECK(slice_ns() == 100000);
  }).join();
}

TEST_CASE("thread_responsive refuses a value out of range with EINVAL and changes nothing") {
  const int before = nice_of(::gettid());
  for (int bad : {-21, 20, 1000}) {
    auto r = rpcie::thread_responsive(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
  }
  CHECK(nice_of(::gettid()) == before);
  CHECK(slice_ns() != 100000);
}

TEST_CASE("thread_responsive below the current value without the right to is EACCES") {
  // In a child without CAP_SYS_NICE (root becomes nobody) whose RLIMIT_NICE allows nothing
  // below nice 0: the exit status is the error code (100: it was allowed).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::geteuid() == 0 && ::setuid(65534) != 0) ::_exit(101);
    const rlimit none{0, 0};
    if (::setrlimit(RLIMIT_NICE, &none) != 0) ::_exit(102);
    auto r = rpcie::thread_responsive(-5);
    ::_exit(r ? 100 : r.error().code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == EACCES);
}
