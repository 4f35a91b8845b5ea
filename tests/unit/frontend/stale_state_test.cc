// frontend: what an earlier hostd left behind is found and removed, and nothing else: DMA
// window files, links in the device directory, mounts (mountinfo); the links' layout.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "../../support/temp_dir.hpp"
#include "dev_links.hpp"
#include "dma_window.hpp"
#include "mount.hpp"
#include "stale_state.hpp"

using namespace rpcie;
using namespace rpcie::hostd;
using rpcie::test::TempDir;

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void file_make(const std::string& path) { std::ofstream(path) << "x"; }

void link_make(const std::string& target, const std::string& path) {
  REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
}

// A pid no process has: a child that has been reaped.
pid_t pid_dead() {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

TEST_CASE("window file names carry the pid; other names have none") {
  CHECK(window_file_name(1234, 2, 7) == "rpcie-dma-1234-rpcie2-7");
  CHECK(window_file_pid(window_file_name(1234, 2, 7)) == 1234);
  CHECK_FALSE(window_file_pid("rpcie-dma-0-rpcie0-1").has_value());
  CHECK_FALSE(window_file_pid("something-else").has_value());
}

TEST_CASE("stale windows: a dead hostd's and our own pid's go, a live one's and other files stay") {
  TempDir d;
  const auto dead = d.file(window_file_name(pid_dead(), 0, 1));
  const auto ours = d.file(window_file_name(::getpid(), 1, 1));
  const auto live = d.file(window_file_name(::getppid(), 0, 1));
  const auto other = d.file("rpcie-something");
  for (const auto& f : {dead, ours, live, other}) file_make(f);
  windows_stale_remove(d.path);
  CHECK_FALSE(exists(dead));
  CHECK_FALSE(exists(ours));
  CHECK(exists(live));
  CHECK(exists(other));
}

TEST_CASE("stale links: links into the mount go (and empty host directories), others stay") {
  TempDir d;
  const std::string mount = "/run/rpcie-test-mount";
  link_make(mount + "/pci/devices/10000:00:00.0", d.file("rpcie0"));
  link_make("/elsewhere", d.file("rpcie1"));
  link_make(mount + "-not/pci", d.file("rpcie2"));  // a prefix, not inside the mount
  file_make(d.file("rpcie3"));
  REQUIRE(dirs_make(d.file("rpcie/by-export/hostA"), 0755));
  REQUIRE(dirs_make(d.file("rpcie/by-export/hostB:99"), 0755));
  link_make(mount + "/pci/devices/10000:00:00.0", d.file("rpcie/by-export/hostA/edu0"));
  link_make(mount + "/pci/devices/10001:00:00.0", d.file("rpcie/by-export/hostB:99/mem0"));
  link_make("/elsewhere", d.file("rpcie/by-export/hostB:99/keep"));
  links_stale_remove(mount, d.path);
  CHECK_FALSE(exists(d.file("rpcie0")));
  CHECK(exists(d.file("rpcie1")));
  CHECK(exists(d.file("rpcie2")));
  CHECK(exists(d.file("rpcie3")));
  CHECK_FALSE(exists(d.file("rpcie/by-export/hostA")));
  CHECK_FALSE(exists(d.file("rpcie/by-export/hostB:99/mem0")));
  CHECK(exists(d.file("rpcie/by-export/hostB:99/keep")));
}

TEST_CASE("stale state: nothing mounted is nothing to do; the other places are cleaned") {
  TempDir d;
  REQUIRE(dirs_make(d.file("mnt"), 0755));
  REQUIRE(dirs_make(d.file("dev"), 0755));
  REQUIRE(dirs_make(d.file("shm"), 0755));
  link_make(d.file("mnt") + "/pci", d.file("dev/rpcie4"));
  file_make(d.file("shm/" + window_file_name(::getpid(), 4, 1)));
  REQUIRE(stale_state_remove({d.file("mnt"), d.file("dev"), d.file("shm")}));
  CHECK_FALSE(exists(d.file("dev/rpcie4")));
  CHECK_FALSE(exists(d.file("shm/" + window_file_name(::getpid(), 4, 1))));
}

TEST_CASE("mountinfo: the topmost mount at the path, its device and type") {
  TempDir d;
  std::ofstream(d.file("mountinfo")) << "22 1 0:21 / /run rw,nosuid shared:5 - tmpfs tmpfs rw\n"
                                        "40 22 0:35 / /run/rpcie rw,nosuid,nodev - fuse.rpcie rpcie rw,user_id=0\n"
                                        "41 40 0:36 / /run/rpcie rw,nosuid,nodev - fuse.rpcie rpcie rw,user_id=0\n"
                                        "42 22 0:37 / /run/rpcie2 rw shared:9 - tmpfs tmpfs rw\n";
  auto m = mountinfo_find("/run/rpcie", d.file("mountinfo"));
  CHECK(m.dev == "0:36");
  CHECK(m.fstype == "fuse.rpcie");
  CHECK(mountinfo_find("/run/rpcie2", d.file("mountinfo")).fstype == "tmpfs");
  CHECK(mountinfo_find("/run/none", d.file("mountinfo")).fstype.empty());
  CHECK(mountinfo_find("/run", d.file("nonexistent")).dev.empty());
}

TEST_CASE("device links: rpcieN and by-export/<host>[:port]/<export>, removed with their empty directory") {
  TempDir d;
  AttachParams p;
  p.host = "10.0.0.2";
  p.port = 7385;  // the default: no port in the name
  p.export_name = "edu0";
  auto links = dev_links_create(d.path, "rpcie0", p, "/run/rpcie/pci/devices/10000:00:00.0");
  REQUIRE(links.has_value());
  REQUIRE(links->size() == 2);
  CHECK((*links)[0] == d.file("rpcie0"));
  CHECK((*links)[1] == d.file("rpcie/by-export/10.0.0.2/edu0"));
  char target[256] = {};
  REQUIRE(::readlink((*links)[1].c_str(), target, sizeof target - 1) > 0);
  CHECK(std::string(target) == "/run/rpcie/pci/devices/10000:00:00.0");
  p.port = 9000;
  auto other = dev_links_create(d.path, "rpcie1", p, "/x");
  REQUIRE(other.has_value());
  CHECK((*other)[1] == d.file("rpcie/by-export/10.0.0.2:9000/edu0"));
  dev_links_remove(*links, "/run/rpcie/pci/devices/10000:00:00.0");
  CHECK_FALSE(exists(d.file("rpcie0")));
  CHECK_FALSE(exists(d.file("rpcie/by-export/10.0.0.2")));
  CHECK(exists(d.file("rpcie1")));
}

TEST_CASE("device links: a by-export link another attachment took over is left to it") {
  TempDir d;
  AttachParams p;
  p.host = "10.0.0.2";
  p.port = 7385;
  p.export_name = "mem0";
  auto first = dev_links_create(d.path, "rpcie0", p, "/t/0");
  REQUIRE(first.has_value());
  auto second = dev_links_create(d.path, "rpcie1", p, "/t/1");  // the same shared export again
  REQUIRE(second.has_value());
  dev_links_remove(*first, "/t/0");
  CHECK_FALSE(exists(d.file("rpcie0")));
  char target[64] = {};
  REQUIRE(::readlink(d.file("rpcie/by-export/10.0.0.2/mem0").c_str(), target, sizeof target - 1) > 0);
  CHECK(std::string(target) == "/t/1");
  dev_links_remove(*second, "/t/1");
  CHECK_FALSE(exists(d.file("rpcie/by-export/10.0.0.2")));
}

TEST_CASE("device links: host and export names that are not names make no path") {
  TempDir d;
  AttachParams p;
  p.host = "10.0.0.2";
  p.port = 7385;
  for (const std::string& bad : std::vector<std::string>{"../../escape", "..", "a/b", ""}) {
    p.export_name = bad;
    auto links = dev_links_create(d.path, "rpcie0", p, "/t/0");
    REQUIRE_FALSE(links.has_value());
    CHECK(links.error().code == EINVAL);
  }
  p.export_name = "edu0";
  p.host = "../..";
  REQUIRE_FALSE(dev_links_create(d.path, "rpcie0", p, "/t/0").has_value());
  CHECK_FALSE(exists(d.file("rpcie")));  // not even the by-export directory
  CHECK_FALSE(exists(d.file("rpcie0")));
}
