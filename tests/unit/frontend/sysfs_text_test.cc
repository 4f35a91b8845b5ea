// frontend: the sysfs text files, formatted as the kernel writes them.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sysfs_text.hpp"

using namespace rpcie;
using namespace rpcie::hostd;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("identity attributes: 0x, zero-padded lowercase hex, newline") {
  CHECK(sysfs_hex_line(0x1234, 4) == "0x1234\n");
  CHECK(sysfs_hex_line(0xed, 4) == "0x00ed\n");
  CHECK(sysfs_hex_line(0x00ff00, 6) == "0x00ff00\n");  // class: six digits
  CHECK(sysfs_hex_line(0x10, 2) == "0x10\n");
}

TEST_CASE("resource: seven lines of start, end, flags; regions by BAR number, the rest zero") {
  client::ExportDesc d;
  d.bars.push_back({0, pci::BarKind::registers, 0x1000, false, false, false});
  d.bars.push_back({2, pci::BarKind::memory, 0x100000, true, true, true});
  d.bars.push_back({5, pci::BarKind::io, 0x20, false, false, false});
  std::array<std::uint64_t, pci::kBarCount> at{};
  at[0] = 0xfe000000;
  at[2] = 0xf000000000;
  at[5] = 0xc000;
  const auto lines = lines_of(sysfs_resource_text(d, at));
  REQUIRE(lines.size() == pci::kBarCount + 1);
  CHECK(lines[0] == "0x00000000fe000000 0x00000000fe000fff 0x0000000000000200");  // MEM
  CHECK(lines[1] == "0x0000000000000000 0x0000000000000000 0x0000000000000000");
  // MEM | PREFETCH | READONLY | MEM_64
  CHECK(lines[2] == "0x000000f000000000 0x000000f0000fffff 0x0000000000106200");
  CHECK(lines[5] == "0x000000000000c000 0x000000000000c01f 0x0000000000000100");  // IO
  CHECK(lines[6] == "0x0000000000000000 0x0000000000000000 0x0000000000000000");  // no ROM
}

TEST_CASE("remote: where the device is; the error only while the link is down") {
  AttachParams p;
  p.host = "10.0.0.2";
  p.port = 7385;
  p.export_name = "edu0";
  RemoteDevice::Status s;
  s.provider = "tcp;ofi_rxm";
  s.generation = 3;
  s.last_error = "peer gone";
  s.data_path = DataPath::sealed;
  CHECK(sysfs_remote_text(p, s) ==
        "exporter 10.0.0.2:7385\nexport edu0\nprovider tcp;ofi_rxm\ndata_path sealed\nstate connected\ngeneration "
        "3\n");
  s.state = LinkState::reconnecting;
  s.provider.clear();
  s.data_path = DataPath::open;
  CHECK(sysfs_remote_text(p, s) ==
        "exporter 10.0.0.2:7385\nexport edu0\nprovider -\ndata_path open\nstate reconnecting\ngeneration 3\nerror "
        "peer gone\n");
}
