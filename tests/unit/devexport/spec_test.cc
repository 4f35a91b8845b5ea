// --export NAME=BACKEND[,key=value...] parsing, backend selection, and the access check
// every backend shares.
#include <doctest/doctest.h>

#include "backend.hpp"
#include "rpcie/units.hpp"

using namespace rpcie;
using namespace rpcie::dev;

TEST_CASE("export spec: name, backend and parameters") {
  auto s = export_spec_parse("dev0=edu,dma=mirror,delay=10ms");
  REQUIRE(s);
  CHECK(s->name == "dev0");
  CHECK(s->backend == "edu");
  CHECK(s->params.size() == 2);
  CHECK(s->params.at("dma") == "mirror");
  CHECK(s->params.at("delay") == "10ms");
  auto bare = export_spec_parse("m.1_x-y=membar");
  REQUIRE(bare);
  CHECK(bare->params.empty());
  auto empty_value = export_spec_parse("a=edu,k=");
  REQUIRE(empty_value);
  CHECK(empty_value->params.at("k").empty());
}

TEST_CASE("export spec: malformed input is EINVAL with the reason") {
  for (const char* bad : {"", "noequals", "=edu", "a=", "a=edu,", "a=edu,novalue", "a=edu,=v", "a b=edu",
                          "a=edu,k=1,k=2", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=edu"}) {
    CAPTURE(bad);
    auto s = export_spec_parse(bad);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == EINVAL);
  }
  CHECK(export_spec_parse("a=edu,k=1,k=2").error().message.find("twice") != std::string::npos);
}

TEST_CASE("backend_create: unknown backend names the known ones") {
  auto s = export_spec_parse("x=floppy");
  REQUIRE(s);
  auto b = backend_create(*s);
  REQUIRE_FALSE(b);
  CHECK(b.error().code == EINVAL);
  CHECK(b.error().message.find("edu, membar, pci-sysfs") != std::string::npos);
}

TEST_CASE("units: sizes and durations") {
  CHECK(size_parse("64M") == 64ULL << 20);
  CHECK(size_parse("4KiB") == 4096);
  CHECK(size_parse("1G") == 1ULL << 30);
  CHECK_FALSE(size_parse("0"));
  CHECK_FALSE(size_parse("12X"));
  CHECK_FALSE(size_parse("-1"));
  CHECK_FALSE(size_parse("99999999999999999999G"));
  CHECK(duration_parse("10ms") == std::chrono::milliseconds(10));
  CHECK(duration_parse("250us") == std::chrono::microseconds(250));
  CHECK(duration_parse("1.5s") == std::chrono::milliseconds(1500));
  CHECK(duration_parse("2") == std::chrono::seconds(2));
  CHECK(duration_parse("0") == std::chrono::nanoseconds(0));
  CHECK_FALSE(duration_parse("-1s"));
  CHECK_FALSE(duration_parse("ms"));
  CHECK_FALSE(duration_parse("5 s"));
  CHECK_FALSE(duration_parse("2d"));
  CHECK_FALSE(duration_parse("25h"));
}
