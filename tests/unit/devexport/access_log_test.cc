// The exporter's access log: the line format, appending (never truncating), one whole line
// per access even with several threads writing at once, and a clear error for a bad path.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../support/temp_dir.hpp"
#include "access_log.hpp"

using rpcie::dev::AccessLog;
using rpcie::dev::AccessRecord;

namespace {

using rpcie::test::TempDir;

std::vector<std::string> lines_of(const std::string& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

}  // namespace

TEST_CASE("access log: lines name export, direction, BAR, offset, width and value in hex") {
  CHECK(AccessLog::line_format({"m", false, 2, 0x20, 8, 0xcbf29ce484222325, 0}) ==
        "m read bar=2 offset=0x20 width=8 value=0xcbf29ce484222325\n");
  CHECK(AccessLog::line_format({"edu0", true, 0, 0x4, 4, 0x0, 0}) == "edu0 write bar=0 offset=0x4 width=4 value=0x0\n");
  CHECK(AccessLog::line_format({"x", true, 5, 0xfff, 1, 0xff, 0}) == "x write bar=5 offset=0xfff width=1 value=0xff\n");
}

TEST_CASE("access log: a refused access says why; a refused read has no value") {
  CHECK(AccessLog::line_format({"m", false, 2, 0x3, 4, 0, EINVAL}) == "m read bar=2 offset=0x3 width=4 error=EINVAL\n");
  CHECK(AccessLog::line_format({"m", true, 2, 0x20, 8, 0x1, EINVAL}) ==
        "m write bar=2 offset=0x20 width=8 value=0x1 error=EINVAL\n");
  CHECK(AccessLog::line_format({"m", true, 0, 0, 4, 0x1, EPERM}) ==
        "m write bar=0 offset=0x0 width=4 value=0x1 error=EPERM\n");
}

TEST_CASE("access log: a 64-character export name and the largest values fit on one line") {
  const std::string name(64, 'n');
  const auto line = AccessLog::line_format({name, true, 5, ~std::uint64_t{0}, 8, ~std::uint64_t{0}, EINVAL});
  CHECK(line == name + " write bar=5 offset=0xffffffffffffffff width=8 value=0xffffffffffffffff error=EINVAL\n");
}

TEST_CASE("access log: records append in order to an existing file, never truncating it") {
  TempDir dir("rpcie-access-log");
  const std::string file = dir.file("access.log");
  std::ofstream(file) << "earlier line\n";
  {
    auto log = AccessLog::open(file);
    REQUIRE_MESSAGE(log, (log ? "" : log.error().message));
    (*log)->record({"m", true, 2, 0x8, 8, 0x10, 0});
    (*log)->record({"m", true, 2, 0x18, 4, 0x1, 0});
    (*log)->record({"m", false, 2, 0x20, 8, 0xabc, 0});
  }
  CHECK(lines_of(file) == std::vector<std::string>{"earlier line", "m write bar=2 offset=0x8 width=8 value=0x10",
                                                   "m write bar=2 offset=0x18 width=4 value=0x1",
                                                   "m read bar=2 offset=0x20 width=8 value=0xabc"});
}

TEST_CASE("access log: threads writing at once never split a line; each thread's order holds") {
  TempDir dir("rpcie-access-log");
  const std::string file = dir.file("access.log");
  auto log = AccessLog::open(file);
  REQUIRE(log);
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const std::string name = "t" + std::to_string(t);
      for (int i = 0; i < kEach; ++i)
        (*log)->record({name, true, 0, static_cast<std::uint64_t>(i) * 8, 8, static_cast<std::uint64_t>(i), 0});
    });
  for (auto& t : threads) t.join();
  const auto lines = lines_of(file);
  REQUIRE(lines.size() == kThreads * kEach);
  std::map<std::string, std::uint64_t> next;
  for (const auto& l : lines) {
    std::istringstream in(l);
    std::string name, dir_word, bar, offset, width, value;
    in >> name >> dir_word >> bar >> offset >> width >> value;
    const std::uint64_t i = next[name]++;
    std::ostringstream want;
    want << name << " write bar=0 offset=0x" << std::hex << i * 8 << " width=8 value=0x" << i;
    REQUIRE(l == want.str());
  }
}

TEST_CASE("access log: a batch's lines leave together, in order, whole lines even when it overflows") {
  TempDir dir("rpcie-access-log");
  const std::string file = dir.file("access.log");
  auto log = AccessLog::open(file);
  REQUIRE(log);
  constexpr std::uint64_t kWrites = 1000;  // ~40 KB of lines: more than one buffer
  {
    AccessLog::Lines lines(log->get());
    lines.record({"b", true, 0, 0, 4, 0, 0});
    CHECK(lines_of(file).empty());  // gathered, not written yet
    for (std::uint64_t i = 1; i < kWrites; ++i) lines.record({"b", true, 0, i * 4, 4, i, 0});
    const auto partial = lines_of(file);
    CHECK(!partial.empty());  // the buffer filled: whole lines went out
    CHECK(partial.size() < kWrites);
    lines.flush();
    CHECK(lines_of(file).size() == kWrites);
    lines.record({"b", false, 0, 0, 4, 7, 0});
  }  // the last line leaves with the batch
  const auto all = lines_of(file);
  REQUIRE(all.size() == kWrites + 1);
  for (std::uint64_t i = 0; i < kWrites; ++i) {
    std::ostringstream want;
    want << "b write bar=0 offset=0x" << std::hex << i * 4 << " width=4 value=0x" << i;
    REQUIRE(all[i] == want.str());
  }
  CHECK(all.back() == "b read bar=0 offset=0x0 width=4 value=0x7");
  AccessLog::Lines none(nullptr);
  none.record({"b", true, 0, 0, 4, 0, 0});  // no log: nothing, no crash
}

TEST_CASE("access log: a path that cannot be opened is an error naming it") {
  auto missing = AccessLog::open("/nonexistent-rpcie-dir/access.log");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ENOENT);
  CHECK(missing.error().message.find("/nonexistent-rpcie-dir/access.log") != std::string::npos);
  TempDir dir("rpcie-access-log");
  auto is_dir = AccessLog::open(dir.path);
  REQUIRE_FALSE(is_dir);
  CHECK(is_dir.error().code == EISDIR);
}
