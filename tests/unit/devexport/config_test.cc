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

TEST_CASE("config: bad values are EINVAL naming the key") {
  struct Case {
    const char* text;
    const char* names;
  };
  for (const Case& c : {
           Case{"listn = \"a\"\n", "listn"},
           Case{"lease = \"50ms\"\n", "lease"},
           Case{"lease = 5\n", "lease"},
           Case{"provider = \"udp\"\n", "provider"},
           Case{"access-log = 1\n", "access-log"},
           Case{"access-log = \"\"\n", "access-log"},
           Case{"listen = \"[::1\"\n", "listen"},
           Case{"[[client]]\nname = \"bob\"\n", "client 1: needs name and psk-file"},
           Case{"[[client]]\nname = \"bob\"\npsk-file = \"/k\"\ncolour = 1\n", "colour"},
           Case{"client = 3\n", "client must be an array of tables"},
           Case{"[[export]]\nname = \"a\"\n", "export 1: needs name and backend"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nshared = \"yes\"\n", "shared must be true or false"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nallow = [\"bad name\"]\n", "allow"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\ndma = \"sometimes\"\n", "dma"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nparams = { x = 1.5 }\n", "params.x"},
           Case{"[[export]]\nname = \"a\"\nbackend = \"edu\"\nparams = { dma = \"mirror\" }\n", "export level"},
       }) {
    CAPTURE(c.text);
    auto e = load_error(c.text);
    CHECK(e.code == EINVAL);
    CHECK(e.message.find("exportd.toml: ") != std::string::npos);
    CHECK(e.message.find(c.names) != std::string::npos);
  }
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
  CHECK_FALSE(export_config_parse("noequals"));
  CHECK_FALSE(export_config_parse("a=edu,shared=maybe"));
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
}
