// frontend: inode numbering, the files of a device directory, the node table and attributes.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <string>

#include "inode.hpp"

using namespace rpcie;
using namespace rpcie::hostd;

namespace {

client::ExportDesc desc_with(std::uint16_t vectors) {
  client::ExportDesc d;
  d.vectors = vectors;
  d.bars.push_back({0, pci::BarKind::registers, 4096, false, false, false});
  d.bars.push_back({2, pci::BarKind::memory, 1 << 20, true, true, true});
  return d;
}

std::shared_ptr<Node> node_named(const std::string& name) {
  auto n = std::make_shared<Node>();
  n->name = name;
  n->bdf = "bdf-" + name;
  return n;
}

}  // namespace

TEST_CASE("inode numbers: serial and file id round trip, and never name a fixed directory") {
  for (std::uint64_t serial : {1ull, 2ull, 255ull, 1ull << 40})
    for (unsigned id : {unsigned(kDir), unsigned(kConfig), unsigned(kBar0) + pci::kBarMax, unsigned(kEvents) + 63}) {
      const fuse_ino_t ino = ino_make(serial, id);
      CHECK(ino_serial(ino) == serial);
      CHECK(ino_file(ino) == id);
      CHECK_FALSE(ino_fixed(ino));
    }
  CHECK(ino_fixed(kInoRoot));
  CHECK(ino_fixed(kInoPci));
  CHECK(ino_fixed(kInoDevices));
}

TEST_CASE("device directory: files listed are the files that exist, BARs and events by the description") {
  const auto d = desc_with(3);
  const auto files = files_list(d);
  auto named = [&](const std::string& n) {
    return std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == n; }) != files.end();
  };
  for (const auto& file : files) CHECK_MESSAGE(file_exists(d, file.second), file.first);
  CHECK(named("config"));
  CHECK(named("resource0"));
  CHECK(named("resource2"));
  CHECK_FALSE(named("resource1"));
  CHECK(named("events"));
  CHECK(named("events2"));
  CHECK_FALSE(named("events3"));
  CHECK_FALSE(file_exists(d, kBar0 + 1));
  CHECK_FALSE(file_exists(d, kEvents + 3));
  // A BAR numbered past the last one is not a resource file even if described.
  auto odd = d;
  odd.bars.push_back({pci::kBarCount, pci::BarKind::memory, 4096, false, false, false});
  CHECK(file_bar(odd, kBar0 + pci::kBarCount) == nullptr);
  CHECK(files_list(odd).size() == files.size());
}

TEST_CASE("events files: one even without vectors, at most kEventFilesMax") {
  CHECK(event_files(0) == 1);
  CHECK(event_files(5) == 5);
  CHECK(event_files(1000) == kEventFilesMax);
}

TEST_CASE("device names: rpcieN and a domain of 0x10000 + N") {
  CHECK(device_name(3) == "rpcie3");
  CHECK(device_bdf(0) == "10000:00:00.0");
  CHECK(device_bdf(0x1f) == "1001f:00:00.0");
}

TEST_CASE("node table: any inode of a device finds it; serials are never reused") {
  NodeTable t;
  auto a = node_named("rpcie0");
  auto b = node_named("rpcie1");
  t.insert(a);
  t.insert(b);
  CHECK(a->serial != b->serial);
  CHECK(t.find(a->ino()) == a);
  CHECK(t.find(a->ino(kConfig)) == a);
  CHECK(t.find(b->ino(kEvents + 7)) == b);
  CHECK(t.find_named("rpcie1") == b);
  CHECK(t.find_named("bdf-rpcie0") == a);
  const fuse_ino_t old = a->ino(kConfig);
  CHECK(t.remove_named("rpcie0") == a);
  CHECK(t.remove_named("rpcie0") == nullptr);
  auto c = node_named("rpcie0");
  t.insert(c);
  CHECK(t.find(old) == nullptr);  // the kernel's old inode does not reach the new device
  const auto list = t.list();
  REQUIRE(list.size() == 2);
  CHECK(list[0] == b);  // in publishing order
  CHECK(list[1] == c);
}

TEST_CASE("node table: indices are the lowest free") {
  NodeTable t;
  CHECK(t.index_reserve() == 0);
  CHECK(t.index_reserve() == 1);
  CHECK(t.index_reserve() == 2);
  t.index_release(1);
  CHECK(t.index_reserve() == 1);
  CHECK(t.index_reserve() == 3);
}

TEST_CASE("attributes: device files take the mode, a read-only BAR loses its write bits, text files are 0444") {
  auto d = desc_with(1);
  d.bars[1].readonly = true;
  struct stat st {};
  file_attr_fill(kConfig, d, 4096, 0, 0771, &st);
  CHECK(st.st_mode == (S_IFREG | 0660));  // never executable
  CHECK(st.st_size == 4096);
  st = {};
  file_attr_fill(kBar0, d, 256, 0, 0660, &st);
  CHECK(st.st_mode == (S_IFREG | 0660));
  CHECK(st.st_size == 4096);
  st = {};
  file_attr_fill(kBar0 + 2, d, 256, 0, 0660, &st);
  CHECK(st.st_mode == (S_IFREG | 0440));
  CHECK(st.st_size == 1 << 20);
  st = {};
  file_attr_fill(kVendor, d, 256, 0, 0666, &st);
  CHECK(st.st_mode == (S_IFREG | 0444));
  st = {};
  file_attr_fill(kDma, d, 256, 27, 0660, &st);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(st.st_size == 27);
  st = {};
  file_attr_fill(kEvents, d, 256, 0, 0640, &st);
  CHECK(st.st_mode == (S_IFREG | 0640));
}

TEST_CASE("attributes: fixed directories always, device inodes only with their node") {
  struct stat st {};
  CHECK(attr_fill(kInoDevices, nullptr, 7, 0660, &st));
  CHECK(S_ISDIR(st.st_mode));
  CHECK(st.st_gid == 7);
  CHECK(st.st_ino == kInoDevices);
  CHECK_FALSE(attr_fill(ino_make(5, kConfig), nullptr, 0, 0660, &st));
}
