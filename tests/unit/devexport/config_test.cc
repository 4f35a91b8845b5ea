// rpcie-exportd's configuration: the TOML file (every key, and the error each bad value
// gets, naming the file and the key or line), the --export flag form, and the whole-config
// checks.
#include "config.hpp"

#include <doctest/doctest.h>

#include <fstream>

#include "../../support/temp_dir.hpp"

using namespace rpcie;
using namespace rpcie::dev;

namespace {
struct ConfigFile {
  test::TempDir dir{"rpcie-config"};
  std::string path = dir.file("exportd.toml");
  explicit ConfigFile(const std::string& text) { std::ofstream(path) << text; }
  Result<ExporterConfig> load() const {
    ExporterConfig c;
    RPCIE_TRY(config_file_apply(path, c));
    return c;
  }
};

Error load_error(const std::string& text) {
  auto c = ConfigFile(text).load();
  REQUIRE_FALSE(c);
  return c.error();
}
}  // namespace

TEST_CASE("config: every key of a full file lands where it belongs") {
  ConfigFile f(R"(listen = "169.254.1.1:7400"
provider = "shm"
psk-file = "/k/psk"
lease = "2s"
handshake-timeout = "30s"
access-log = "/var/log/rpcie/access.log"

[[client]]
name = "alice"
psk-file = "/k/alice"

[[export]]
name = "edu0"
backend = "edu"
dma = "mirror"
shared = true
allow = ["alice"]

[[export]]
name = "mem0"
backend = "membar"
params = { size = "64M", readonly = false, alignment = 4096 }
)");
  auto c = f.load();
  REQUIRE(c);
  CHECK(c->listen_host == "169.254.1.1");
  CHECK(c->port == 7400);
  CHECK_FALSE(c->provider.automatic);
  CHECK(c->provider.kind == providers::ProviderKind::shm);
  CHECK(c->psk_file == "/k/psk");
  CHECK(c->lease == std::chrono::milliseconds(2000));
  CHECK(c->handshake_timeout == std::chrono::milliseconds(30000));
  CHECK(c->access_log == "/var/log/rpcie/access.log");
  REQUIRE(c->clients.size() == 1);
  CHECK(c->clients[0].name == "alice");
  CHECK(c->clients[0].psk_file == "/k/alice");
  REQUIRE(c->exports.size() == 2);
  CHECK(c->exports[0].spec.name == "edu0");
  CHECK(c->exports[0].dma == DmaMode::mirror);
  CHECK(c->exports[0].shared);
  CHECK(c->exports[0].allow == std::vector<std::string>{"alice"});
  CHECK(c->exports[1].spec.backend == "membar");
  CHECK(c->exports[1].spec.params.at("size") == "64M");
  CHECK(c->exports[1].spec.params.at("readonly") == "no");
  CHECK(c->exports[1].spec.params.at("alignment") == "4096");
  CHECK(config_check(*c));
}

TEST_CASE("config: a syntax error names the file, line and column") {
  auto e = load_error("lease = \"5s\"\nlisten = \"x\n");
  CHECK(e.code == EINVAL);
  CHECK(e.message.find("exportd.toml:2:") != std::string::npos);
}

TEST_CASE("config: a missing file is ENOENT") {
  ExporterConfig c;
  auto r = config_file_apply("/nonexistent/rpcie/exportd.toml", c);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOENT);
}

TEST_CASE("config: bad values are EINVAL naming FILE:LINE and the key") {
  struct Case {
    const char* text;
    int line;
    const char* names;
  };
  for (const Case& c : {
           Case{"listn = \"a\"\n", 1, "listn"},
           Case{"lease = \"50ms\"\n", 1, "lease"},
           Case{"lease = 5\n", 1, "lease"},
           Case{"\nhandshake-timeout = \"10ms\"\n", 2, "handshake-timeout: '10ms' is not a duration of at least 100ms"},
           Case{"provider = \"udp\"\n", 1, "provider"},
           Case{"access-log = 1\n", 1, "access-log"},
           Case{"\naccess-log = \"\"\n", 2, "access-log"},
           Case{"listen = \"[::1\"\n", 1, "listen"},
           Case{"preauth-per-address = 0\n", 1, "preauth-per-address"},
           Case{"preauth-max = \"many\"\n", 1, "preauth-max"},
           Case{"\ndata-nice = -21\n", 2, "data-nice must be an integer from -20 to 19"},
           Case{"data-nice = 20\n", 1, "data-nice must be an integer from -20 to 19"},
           Case{"data-nice = \"-5\"\n", 1, "data-nice must be an integer"},
           Case{"lease = \"2s\"\ndata-path = \"closed\"\n", 2, "data-path: data path must be sealed, open or auto"},
           Case{"data-path = true\n", 1, "data-path must be a string"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\ndata-path = \"Sealed\"\n", 4,
                "export 1: data-path: data path must be sealed, open or auto, not 'Sealed'"},
           Case{"[[client]]\nname = \"bob\"\n", 1, "client 1: needs name and psk-file"},
           Case{"[[client]]\nname = \"bob\"\npsk-file = \"/k\"\ncolour = 1\n", 4, "colour"},
           Case{"client = 3\n", 1, "client must be an array of tables"},
           Case{"[[export]]\nname = \"a\"\n", 1, "export 1: needs name and backend"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nshared = \"yes\"\n", 4, "shared must be true or false"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nallow = [\"bad name\"]\n", 4, "allow"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\ndma = \"sometimes\"\n", 4, "dma"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nparams = { x = 1.5 }\n", 4, "params.x"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nparams = { dma = \"mirror\" }\n", 4, "export level"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\n\n[[export]]\nname = \"b c\"\nbackend = \"edu\"\n", 6,
                "export 2: "},
       }) {
    CAPTURE(c.text);
    auto e = load_error(c.text);
    CHECK(e.code == EINVAL);
    CHECK(e.message.find("exportd.toml:" + std::to_string(c.line) + ": ") != std::string::npos);
    CHECK(e.message.find(c.names) != std::string::npos);
  }
}

TEST_CASE("config: data-path at the top level is every export's policy unless the export sets its own") {
  ConfigFile f(R"(data-path = "sealed"
[[export]]
name = "a"
backend = "edu"

[[export]]
name = "b"
backend = "edu"
data-path = "open"

[[export]]
name = "c"
backend = "edu"
data-path = "auto"
)");
  auto c = f.load();
  REQUIRE(c);
  CHECK(c->data_path == DataPathChoice::sealed);
  REQUIRE(c->exports.size() == 3);
  CHECK_FALSE(c->exports[0].data_path);
  CHECK(c->exports[1].data_path == DataPathChoice::open);
  CHECK(c->exports[2].data_path == DataPathChoice::automatic);
  CHECK(export_data_path_policy(*c, c->exports[0]) == DataPathChoice::sealed);
  CHECK(export_data_path_policy(*c, c->exports[1]) == DataPathChoice::open);
  CHECK(export_data_path_policy(*c, c->exports[2]) == DataPathChoice::automatic);
}

TEST_CASE("config: without data-path anywhere the policy is auto") {
  ConfigFile f("[[export]]\nname = \"a\"\nbackend = \"edu\"\n");
  auto c = f.load();
  REQUIRE(c);
  CHECK(c->data_path == DataPathChoice::automatic);
  CHECK(export_data_path_policy(*c, c->exports[0]) == DataPathChoice::automatic);
}

TEST_CASE("config: preauth caps from the file") {
  ConfigFile f("preauth-per-address = 2\npreauth-max = 100\n");
  auto c = f.load();
  REQUIRE(c);
  CHECK(c->preauth_per_address == 2);
  CHECK(c->preauth_max == 100);
  CHECK(ExporterConfig{}.preauth_per_address == 4);
  CHECK(ExporterConfig{}.preauth_timeout == std::chrono::milliseconds(1000));
  CHECK(ExporterConfig{}.handshake_timeout == std::chrono::milliseconds(5000));
}

TEST_CASE("config: data-nice from the file, the daemon's own unless given") {
  ConfigFile f("data-nice = -20\n");
  auto c = f.load();
  REQUIRE(c);
  CHECK(c->data_nice == -20);
  ConfigFile zero("data-nice = 0\n");
  auto z = zero.load();
  REQUIRE(z);
  CHECK(z->data_nice == 0);
  CHECK_FALSE(ExporterConfig{}.data_nice.has_value());
}

TEST_CASE("config: an allow name without a [[client]] key of its own is refused at the allow entry's line") {
  ConfigFile f(R"(psk-file = "/k/psk"

[[client]]
name = "alice"
psk-file = "/k/alice"

[[export]]
name = "edu0"
backend = "edu"
allow = ["alice",
         "bob"]
)");
  auto c = f.load();
  REQUIRE(c);
  REQUIRE(c->exports[0].allow_origin.size() == 2);
  CHECK(c->exports[0].origin == f.path + ":7");
  CHECK(c->clients[0].origin == f.path + ":3");
  auto r = config_check(*c);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EINVAL);
  CHECK(r.error().message.rfind(f.path + ":11: export 'edu0': allow: client 'bob' has no [[client]] entry", 0) == 0);
  // With bob's own key the same allow list is fine.
  c->clients.push_back({"bob", "/k/bob"});
  CHECK(config_check(*c));
}

TEST_CASE("config: an allow name from --export needs a [[client]] key too") {
  ExporterConfig c;
  c.psk_file = "/k/psk";
  c.exports.push_back(*export_config_parse("nic1=edu,allow=compute1"));
  auto r = config_check(c);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.rfind("--export: export 'nic1': allow: client 'compute1' has no [[client]] entry", 0) == 0);
}

TEST_CASE("config: names defined twice name both places") {
  ConfigFile f(
      "psk-file = \"/k\"\n[[export]]\nname = \"a\"\nbackend = \"edu\"\n[[export]]\nname = \"a\"\nbackend = "
      "\"membar\"\n");
  auto c = f.load();
  REQUIRE(c);
  auto r = config_check(*c);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == f.path + ":5: export 'a' is defined twice (first at " + f.path + ":2)");
}

TEST_CASE("config: the flag form splits the exporter's keys from the backend's") {
  auto e = export_config_parse("mem0=membar,size=64M,dma=mirror,shared=yes,allow=alice:bob");
  REQUIRE(e);
  CHECK(e->spec.name == "mem0");
  CHECK(e->spec.backend == "membar");
  CHECK(e->spec.params.size() == 1);
  CHECK(e->spec.params.at("size") == "64M");
  CHECK(e->dma == DmaMode::mirror);
  CHECK(e->shared);
  CHECK(e->allow == std::vector<std::string>{"alice", "bob"});
  CHECK_FALSE(e->data_path);
  CHECK_FALSE(export_config_parse("noequals"));
  CHECK_FALSE(export_config_parse("a=edu,shared=maybe"));
  auto sealed = export_config_parse("edu0=edu,data-path=sealed");
  REQUIRE(sealed);
  CHECK(sealed->data_path == DataPathChoice::sealed);
  CHECK(sealed->spec.params.empty());
  auto bad = export_config_parse("edu0=edu,data-path=clear");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == EINVAL);
  CHECK(bad.error().message.find("export 'edu0': data-path: data path must be sealed, open or auto") !=
        std::string::npos);
}

TEST_CASE("config: the whole configuration has exports, and distinct names") {
  ExporterConfig c;
  CHECK(config_check(c).error().message.find("nothing to export") != std::string::npos);
  c.exports.push_back(*export_config_parse("a=edu"));
  c.exports.push_back(*export_config_parse("a=membar"));
  CHECK(config_check(c).error().message.find("defined twice") != std::string::npos);
  c.exports.pop_back();
  c.clients.push_back({"alice", "/k"});
  c.clients.push_back({"alice", "/k2"});
  CHECK(config_check(c).error().message.find("client 'alice' is defined twice") != std::string::npos);
  c.clients.pop_back();
  c.clients.push_back({"bad\nname", "/k2"});
  CHECK(config_check(c).error().message.find("client name 'bad\\x0aname' is not valid") != std::string::npos);
}
