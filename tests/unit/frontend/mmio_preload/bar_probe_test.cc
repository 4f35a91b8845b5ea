// The probe that tells an rpcie BAR file from any other (a fake device directory in a
// tmpdir: resourceN beside a `remote` file), and the kernel's mapping-range rule.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "bar_probe.hpp"

using namespace rpcie::mmio;

namespace {

struct DeviceDir {
  std::string path = "/tmp/rpcie-probe-XXXXXX";
  DeviceDir() { REQUIRE(::mkdtemp(path.data()) != nullptr); }
  ~DeviceDir() { static_cast<void>(std::system(("rm -rf " + path).c_str())); }
  std::string file(const std::string& name, off_t size) const {
    const std::string p = path + "/" + name;
    const int fd = ::open(p.c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, size) == 0);
    ::close(fd);
    return p;
  }
};

}  // namespace

TEST_CASE("only resource0 to resource5 are BAR files") {
  CHECK(bar_path_number("/run/rpcie/pci/devices/10000:00:00.0/resource2") == 2);
  CHECK(bar_path_number("resource0") == 0);
  CHECK(bar_path_number("/x/resource5") == 5);
  CHECK(bar_path_number("/x/resource6") == -1);
  CHECK(bar_path_number("/x/resource") == -1);
  CHECK(bar_path_number("/x/resource01") == -1);
  CHECK(bar_path_number("/x/resource0_wc") == -1);
  CHECK(bar_path_number("/x/config") == -1);
  CHECK(bar_path_number("/resource2/config") == -1);
}

TEST_CASE("a resourceN beside a remote file is an rpcie BAR, with its size and access") {
  DeviceDir dir;
  const std::string bar = dir.file("resource2", 1 << 20);
  dir.file("remote", 10);
  const int rw = ::open(bar.c_str(), O_RDWR), ro = ::open(bar.c_str(), O_RDONLY);
  BarFile file;
  REQUIRE(bar_probe(rw, file));
  CHECK(file.bar == 2);
  CHECK(file.size == (1u << 20));
  CHECK(file.writable);
  struct stat st {};
  REQUIRE(::stat(dir.path.c_str(), &st) == 0);
  CHECK(file.device == DeviceKey{st.st_dev, st.st_ino});
  REQUIRE(bar_probe(ro, file));
  CHECK_FALSE(file.writable);
  ::close(rw);
  ::close(ro);
}

TEST_CASE("without a remote file, or with a remote directory, it is not") {
  DeviceDir dir;
  const std::string bar = dir.file("resource0", 4096);
  const int fd = ::open(bar.c_str(), O_RDONLY);
  BarFile file;
  CHECK_FALSE(bar_probe(fd, file));
  REQUIRE(::mkdir((dir.path + "/remote").c_str(), 0700) == 0);
  CHECK_FALSE(bar_probe(fd, file));
  ::close(fd);
  const std::string other = dir.file("config", 4096);
  dir.file("remote2", 1);
  const int cfd = ::open(other.c_str(), O_RDONLY);
  CHECK_FALSE(bar_probe(cfd, file));
  ::close(cfd);
}

TEST_CASE("a BAR maps from a page-aligned offset, whole pages within its own") {
  CHECK(bar_range_check(1 << 20, 0, 1 << 20) == 0);
  CHECK(bar_range_check(1 << 20, 0, 4) == 0);
  CHECK(bar_range_check(1 << 20, (1 << 20) - 4096, 4096) == 0);
  CHECK(bar_range_check(1 << 20, 0, (1 << 20) + 1) == EINVAL);
  CHECK(bar_range_check(1 << 20, 4096, 1 << 20) == EINVAL);
  CHECK(bar_range_check(1 << 20, 1 << 20, 4096) == EINVAL);
  CHECK(bar_range_check(1 << 20, 1, 4096) == EINVAL);
  CHECK(bar_range_check(1 << 20, 0, 0) == EINVAL);
  CHECK(bar_range_check(256, 0, 4096) == 0);  // a BAR smaller than a page maps one page
  CHECK(bar_range_check(256, 4096, 4096) == EINVAL);
  CHECK(bar_range_check(0, 0, 4096) == EINVAL);
}
