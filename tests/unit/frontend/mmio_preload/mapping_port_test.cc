// A register-BAR mapping's port: through the device's ring when hostd gives one (checked
// against a stand-in hostd that speaks the control protocol and serves the ring), through the
// file otherwise, and after the ring closes; the ring pool shares one ring per device.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device_ring.hpp"
#include "mapping_port.hpp"
#include "ring/ring.hpp"

using namespace rpcie::mmio;

namespace {

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

// <tmp>/10000:00:01.0/{resource0,remote}: the layout of an rpcie device directory.
struct DeviceDir {
  std::string root = "/tmp/rpcie-mapping-port-XXXXXX";
  std::string dir, bar;
  DeviceDir() {
    REQUIRE(::mkdtemp(root.data()) != nullptr);
    dir = root + "/10000:00:01.0";
    bar = dir + "/resource0";
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    const int fd = ::open(bar.c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 4096) == 0);
    ::close(fd);
    ::close(::open((dir + "/remote").c_str(), O_CREAT | O_RDWR, 0600));
  }
  ~DeviceDir() { std::system(("rm -rf '" + root + "'").c_str()); }
  int open_bar() const { return ::open(bar.c_str(), O_RDWR | O_CLOEXEC); }
  std::uint32_t file_word(std::uint64_t offset) const {
    std::uint32_t v = 0;
    const int fd = open_bar();
    REQUIRE(::pread(fd, &v, 4, static_cast<off_t>(offset)) == 4);
    ::close(fd);
    return v;
  }
};

// A stand-in for rpcie-hostd: answers {"op":"mmio_ring"} requests with a ring (or refuses),
// then serves each ring into `registers` and logs what it served.
struct FakeHostd {
  std::string path;
  bool refuse = false;
  int listener = -1;
  std::atomic<bool> stop{false};
  std::atomic<int> requests{0};
  std::mutex lock;  // guards last_request, servers, consumers and rings (the accept thread adds)
  std::string last_request;
  std::thread acceptor;
  std::vector<std::thread> servers;
  std::vector<std::unique_ptr<RingConsumer>> consumers;
  std::vector<std::pair<void*, std::size_t>> rings;
  std::atomic<int> served{0};
  std::atomic<std::uint64_t> store_fail_offset{~std::uint64_t{0}};  // stores here are reported failed
  std::uint8_t registers[4096] = {};

  explicit FakeHostd(const std::string& socket_path) : path(socket_path) {
    listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    acceptor = std::thread([this] { accept_run(); });
  }
  ~FakeHostd() {
    stop = true;
    ::shutdown(listener, SHUT_RDWR);
    acceptor.join();  // first: nothing adds a server after this
    for (auto& t : servers) t.join();
    ::close(listener);
    ::unlink(path.c_str());
    for (auto [memory, bytes] : rings) ::munmap(memory, bytes);
  }
  void accept_run() {
    for (;;) {
      const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      char line[256] = {};
      const ssize_t n = ::read(c, line, sizeof line - 1);
      std::lock_guard g(lock);
      ++requests;
      last_request.assign(line, n > 0 ? static_cast<std::size_t>(n) : 0);
      if (refuse) {
        const char* no = "{\"error\":\"no\",\"errno\":13}\n";
        (void)!::write(c, no, std::strlen(no));
        ::close(c);
        continue;
      }
      const std::size_t bytes = ring_bytes(64);
      const int memfd = ::memfd_create("fake-ring", MFD_CLOEXEC);
      REQUIRE(::ftruncate(memfd, static_cast<off_t>(bytes)) == 0);
      void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
      REQUIRE(ring_format(memory, bytes, 64));
      rings.emplace_back(memory, bytes);
      consumers.push_back(std::make_unique<RingConsumer>());
      RingConsumer* consumer = consumers.back().get();
      REQUIRE(consumer->attach(memory, bytes));
      const std::string answer = "{\"ring_bytes\":" + std::to_string(bytes) + ",\"timeout_ms\":500}\n";
      iovec iov{const_cast<char*>(answer.data()), answer.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &memfd, sizeof memfd);
      REQUIRE(::sendmsg(c, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(answer.size()));
      ::close(memfd);
      servers.emplace_back([this, consumer, c] { serve(*consumer, c); });
    }
  }
  void serve(RingConsumer& consumer, int connection) {
    RingRequest r;
    while (!stop) {
      if (!consumer.next(r, 20, 0)) continue;
      ++served;
      if (r.op == RingOp::store) {
        const bool ok = r.offset != store_fail_offset;
        if (ok) std::memcpy(registers + r.offset, &r.value, r.width);
        consumer.store_done(ok);
      } else {
        std::uint64_t v = 0;
        std::memcpy(&v, registers + r.offset, r.width);
        consumer.load_answer(true, v);
      }
    }
    ::close(connection);
  }
};

}  // namespace

TEST_CASE("bar_fd_bdf names the device directory of a BAR file") {
  DeviceDir d;
  const int fd = d.open_bar();
  char bdf[64];
  REQUIRE(bar_fd_bdf(fd, bdf, sizeof bdf));
  CHECK(std::string(bdf) == "10000:00:01.0");
  CHECK_FALSE(bar_fd_bdf(fd, bdf, 5));  // no room: refused, not truncated
  ::close(fd);
}

TEST_CASE("with a ring, accesses go to hostd's ring, not the file; one ring per device") {
  DeviceDir d;
  FakeHostd hostd(d.root + "/hostd.sock");
  DeviceRingPool* rings = new DeviceRingPool;
  const int fd = d.open_bar();
  BarFile file;
  REQUIRE(bar_probe(fd, file));
  DeviceRing* ring = rings->acquire(file.device, hostd.path.c_str(), fd);
  REQUIRE(ring != nullptr);
  CHECK(hostd.last_request == "{\"op\":\"mmio_ring\",\"bdf\":\"10000:00:01.0\"}\n");
  CHECK(ring->timeout_ms() == 1500);                                   // hostd's 500 ms plus the margin
  CHECK(rings->acquire(file.device, hostd.path.c_str(), fd) == ring);  // shared, no second request
  CHECK(hostd.requests == 1);

  MappingPort port;
  port.open(::dup(fd), file, nullptr, ring, rings);
  CHECK(port.ring_used());
  CHECK(port.store(0x10, 4, 0xcafef00d));
  std::uint64_t value = 0;
  CHECK(port.load(0x10, 4, value));
  CHECK(value == 0xcafef00d);
  CHECK(hostd.served == 2);
  CHECK(d.file_word(0x10) == 0);  // the file port was not used

  // hostd closes the ring: later accesses take the file.
  hostd.consumers.front()->close();
  CHECK(port.store(0x20, 4, 0x12345678));
  CHECK(d.file_word(0x20) == 0x12345678);
  CHECK(hostd.served == 2);
  port.close();
  rings->release(ring);  // the second acquire's reference
  ::close(fd);
  delete rings;
}

TEST_CASE("a store hostd could not perform is handed out once, after the next load; later accesses work") {
  DeviceDir d;
  FakeHostd hostd(d.root + "/hostd.sock");
  auto* rings = new DeviceRingPool;
  const int fd = d.open_bar();
  BarFile file;
  REQUIRE(bar_probe(fd, file));
  DeviceRing* ring = rings->acquire(file.device, hostd.path.c_str(), fd);
  REQUIRE(ring != nullptr);
  MappingPort port;
  port.open(::dup(fd), file, nullptr, ring, rings);
  REQUIRE(port.ring_used());
  CHECK(stores_dropped_take() == 0);
  hostd.store_fail_offset = 0x30;

  CHECK(port.store(0x30, 4, 0x11111111));  // posted: accepted, dropped later
  CHECK(port.store(0x10, 4, 0xabcd0123));
  std::uint64_t value = 0;
  CHECK(port.load(0x10, 4, value));  // served after both stores: their fate is known
  CHECK(value == 0xabcd0123);
  CHECK(stores_dropped_take() == 1);
  CHECK(stores_dropped_take() == 0);  // handed out once
  CHECK(ring->store_failures_take() == 0);
  std::uint32_t dropped_word = 0;
  std::memcpy(&dropped_word, hostd.registers + 0x30, 4);
  CHECK(dropped_word == 0);  // the device never got it

  // Two more dropped, between good stores: counted together at the next load.
  CHECK(port.store(0x30, 4, 1));
  CHECK(port.store(0x18, 8, 0x0102030405060708));
  CHECK(port.store(0x30, 2, 2));
  CHECK(port.load(0x18, 8, value));
  CHECK(value == 0x0102030405060708);
  CHECK(stores_dropped_take() == 2);
  CHECK(hostd.served == 7);
  CHECK(d.file_word(0x10) == 0);  // all through the ring

  // Drops hostd counted before it closed the ring are still handed out, by the file path.
  CHECK(port.store(0x30, 4, 3));
  // Wait until hostd has counted it (the 4th on this ring), without an access that would take it.
  for (int i = 0; i < 1000 && ring->producer().store_failures() < 4; ++i) ::usleep(1000);
  REQUIRE(ring->producer().store_failures() == 4);
  hostd.consumers.front()->close();
  CHECK(port.store(0x30, 4, 4));  // the file port now
  CHECK(stores_dropped_take() == 1);
  port.close();
  ::close(fd);
  delete rings;
}

TEST_CASE("DeviceRing::store_failures_take hands each failure to one taker among racing threads") {
  DeviceDir d;
  FakeHostd hostd(d.root + "/hostd.sock");
  auto* rings = new DeviceRingPool;
  const int fd = d.open_bar();
  BarFile file;
  REQUIRE(bar_probe(fd, file));
  DeviceRing* ring = rings->acquire(file.device, hostd.path.c_str(), fd);
  REQUIRE(ring != nullptr);
  hostd.store_fail_offset = 0x40;
  constexpr int kDropped = 500;
  std::atomic<bool> producing{true};
  std::atomic<std::uint64_t> taken{0};
  std::vector<std::thread> takers;
  for (int t = 0; t < 3; ++t)
    takers.emplace_back([&] {
      while (producing) taken += ring->store_failures_take();
    });
  std::uint64_t value = 0;
  for (int i = 0; i < kDropped; ++i) {
    REQUIRE(ring->producer().store(0, 0x40, 4, static_cast<std::uint64_t>(i), ring->timeout_ms()));
    if (i % 50 == 49) REQUIRE(ring->producer().load(0, 0x40, 4, value, ring->timeout_ms()));
  }
  producing = false;
  for (auto& t : takers) t.join();
  taken += ring->store_failures_take();
  CHECK(taken == kDropped);
  CHECK(ring->producer().store_failures() == kDropped);
  rings->release(ring);
  ::close(fd);
  delete rings;
}

TEST_CASE("a refusing or absent hostd: no ring, accesses through the file") {
  DeviceDir d;
  DeviceRingPool* rings = new DeviceRingPool;
  const int fd = d.open_bar();
  BarFile file;
  REQUIRE(bar_probe(fd, file));
  CHECK(rings->acquire(file.device, (d.root + "/nobody.sock").c_str(), fd) == nullptr);
  {
    FakeHostd hostd(d.root + "/hostd.sock");
    hostd.refuse = true;
    CHECK(rings->acquire(file.device, hostd.path.c_str(), fd) == nullptr);
    CHECK(hostd.requests == 1);
  }
  MappingPort port;
  port.open(::dup(fd), file, nullptr, nullptr, rings);
  CHECK_FALSE(port.ring_used());
  CHECK(port.store(0x8, 4, 0x55aa55aa));
  CHECK(d.file_word(0x8) == 0x55aa55aa);
  port.close();
  ::close(fd);
  delete rings;
}

TEST_CASE("the port pool hands out each port once and closes a released one") {
  auto* pool = new MappingPortPool;
  MappingPort* first = pool->take();
  REQUIRE(first != nullptr);
  const int fd = ::dup(0);
  first->open(fd, BarFile{}, nullptr, nullptr, nullptr);
  for (std::size_t i = 1; i < MappingPortPool::kCapacity; ++i) REQUIRE(pool->take() != nullptr);
  CHECK(pool->take() == nullptr);
  CHECK(fd_open(fd));
  pool->release(first);
  CHECK_FALSE(fd_open(fd));
  CHECK(pool->take() == first);
  delete pool;
}
