// The file port: exactly one pread/pwrite of the access's width at its offset, little-endian;
// any failure (short transfer, a descriptor that cannot seek) is false with errno kept.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "file_port.hpp"

using namespace rpcie::mmio;

namespace {

struct TempFile {
  std::string path = "/tmp/rpcie-file-port-XXXXXX";
  int fd;
  TempFile() : fd(::mkstemp(path.data())) {
    unsigned char bytes[64];
    for (unsigned i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(i);
    REQUIRE(::pwrite(fd, bytes, sizeof bytes, 0) == 64);
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

}  // namespace

TEST_CASE("loads read exactly the width at the offset, little-endian") {
  TempFile file;
  FilePort port;
  port.open(::dup(file.fd), {}, nullptr);
  std::uint64_t value = 0;
  REQUIRE(port.load(0x10, 1, value));
  CHECK(value == 0x10);
  REQUIRE(port.load(0x10, 2, value));
  CHECK(value == 0x1110);
  REQUIRE(port.load(0x10, 4, value));
  CHECK(value == 0x13121110);
  REQUIRE(port.load(0x18, 8, value));
  CHECK(value == 0x1f1e1d1c1b1a1918);
  CHECK_FALSE(port.load(0, 16, value));  // not a width the contract has
}

TEST_CASE("a store writes exactly its bytes and keeps errno") {
  TempFile file;
  FilePort port;
  port.open(::dup(file.fd), {}, nullptr);
  errno = 1234;
  REQUIRE(port.store(0x8, 4, 0xdeadbeefcafef00dull));
  CHECK(errno == 1234);
  unsigned char bytes[16];
  REQUIRE(::pread(file.fd, bytes, sizeof bytes, 0) == 16);
  CHECK(bytes[7] == 7);
  CHECK(bytes[8] == 0x0d);
  CHECK(bytes[9] == 0xf0);
  CHECK(bytes[10] == 0xfe);
  CHECK(bytes[11] == 0xca);
  CHECK(bytes[12] == 12);  // nothing past the width
}

TEST_CASE("a short read past the end fails") {
  TempFile file;
  FilePort port;
  port.open(::dup(file.fd), {}, nullptr);
  std::uint64_t value = 7;
  CHECK_FALSE(port.load(62, 4, value));
  CHECK(port.last_errno() == EIO);
}

TEST_CASE("a pipe cannot be read at an offset: false, errno kept") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  FilePort port;
  port.open(pipe_fds[0], {}, nullptr);
  errno = 0;
  std::uint64_t value = 0;
  CHECK_FALSE(port.load(0, 4, value));
  CHECK(port.last_errno() == ESPIPE);
  CHECK(errno == 0);
  CHECK_FALSE(port.store(0, 4, 1));
  ::close(pipe_fds[1]);
}
