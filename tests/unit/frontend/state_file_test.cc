// frontend: the state file (state_file.hpp): what is written reads back the same, every
// malformed file is refused with what is wrong, a store is atomic (no temporary left, mode
// 0600) and a missing file lists nothing.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "../../support/temp_dir.hpp"
#include "attach_manager.hpp"
#include "state_file.hpp"

using namespace rpcie;
using namespace rpcie::hostd;
using rpcie::test::TempDir;

namespace {

StateEntry entry(unsigned index, uid_t uid, const std::string& host, const std::string& name) {
  StateEntry e;
  e.index = index;
  e.uid = uid;
  e.params.host = host;
  e.params.port = 7400;
  e.params.export_name = name;
  e.params.window_size = 1u << 20;
  return e;
}

std::string error_of(const std::string& text) {
  auto r = state_parse(text, AttachPolicy{});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EINVAL);
  return r.error().message;
}

}  // namespace

TEST_CASE("a stored state file reads back every field") {
  TempDir dir;
  const auto path = dir.file("state.json");
  auto a = entry(0, 0, "169.254.1.1", "edu0");
  auto b = entry(7, 1001, "exporter.example", "mem0");
  b.params.data_path = DataPathChoice::open;
  REQUIRE(state_file_store(path, {a, b}));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(::stat((path + ".tmp").c_str(), &st) != 0);  // renamed, not left beside
  auto back = state_file_load(path, AttachPolicy{});
  REQUIRE(back);
  REQUIRE(back->size() == 2);
  const auto& x = (*back)[1];
  CHECK(x.index == 7);
  CHECK(x.uid == 1001);
  CHECK(x.params.host == "exporter.example");
  CHECK(x.params.port == 7400);
  CHECK(x.params.export_name == "mem0");
  CHECK(x.params.window_size == (1u << 20));
  REQUIRE(x.params.data_path);
  CHECK(*x.params.data_path == DataPathChoice::open);
  CHECK_FALSE((*back)[0].params.data_path);
  CHECK((*back)[0].params.export_name == "edu0");
}

TEST_CASE("a store replaces the whole list, and an empty list reads back empty") {
  TempDir dir;
  const auto path = dir.file("state.json");
  REQUIRE(state_file_store(path, {entry(0, 0, "h", "a"), entry(1, 0, "h", "b")}));
  REQUIRE(state_file_store(path, {}));
  auto back = state_file_load(path, AttachPolicy{});
  REQUIRE(back);
  CHECK(back->empty());
}

TEST_CASE("a missing state file lists nothing") {
  TempDir dir;
  auto back = state_file_load(dir.file("none.json"), AttachPolicy{});
  REQUIRE(back);
  CHECK(back->empty());
}

TEST_CASE("a malformed state file is refused with what is wrong") {
  const std::string ok = R"("uid":0,"host":"h","export":"e")";
  CHECK(error_of("{\"version\":1,") == "not JSON");
  CHECK(error_of(R"({"version":2,"attachments":[]})").find("version 1") != std::string::npos);
  CHECK(error_of(R"({"version":1})") == "\"attachments\" is not a list");
  CHECK(error_of(R"({"version":1,"attachments":[3]})") == "attachment 0 is not an object");
  CHECK(error_of(R"({"version":1,"attachments":[{)" + ok + "}]}").find("\"device\"") != std::string::npos);
  for (const char* bad : {"rpcie", "rpcie01", "rpcie4096", "rpcie-1", "eth0", "rpcie1x"})
    CHECK(error_of(std::string(R"({"version":1,"attachments":[{"device":")") + bad + "\"," + ok + "}]}")
              .find("is not rpcie0..rpcie4095") != std::string::npos);
  CHECK(error_of(R"({"version":1,"attachments":[{"device":"rpcie1",)" + ok + R"(},{"device":"rpcie1",)" + ok + "}]}") ==
        "attachment 1: rpcie1 twice");
  CHECK(error_of(R"({"version":1,"attachments":[{"device":"rpcie1","uid":-1,"host":"h","export":"e"}]})") ==
        "attachment 0: \"uid\" is not a user id");
  // The rules of an attach request hold: a file cannot ask for more than the socket could.
  CHECK(error_of(R"({"version":1,"attachments":[{"device":"rpcie1","uid":0,"host":"h/..","export":"e"}]})")
            .starts_with("attachment 0: "));
  CHECK(error_of(R"({"version":1,"attachments":[{"device":"rpcie1",)" + ok + R"(,"dma_window":1073741824}]})")
            .find("--max-dma-window") != std::string::npos);
  CHECK(error_of(R"({"version":1,"attachments":[{"device":"rpcie1",)" + ok + R"(,"data_path":"clear"}]})")
            .find("data_path") != std::string::npos);
}

TEST_CASE("a store into a directory that does not exist fails and names the file") {
  TempDir dir;
  auto r = state_file_store(dir.file("no/such/state.json"), {});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOENT);
  CHECK(r.error().message.find("state.json") != std::string::npos);
}
