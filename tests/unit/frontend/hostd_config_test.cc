// frontend: rpcie-hostd's configuration file (hostd_config.hpp) and hostd's edits of it
// (config_edit.hpp): options and [[attach]] entries read with their places, every bad file
// refused with FILE:LINE, drop-in files in name order, what a reload takes on, and appended
// or removed entries that keep every other line.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../../support/temp_dir.hpp"
#include "attach_request.hpp"
#include "config_edit.hpp"
#include "hostd_config.hpp"

using namespace rpcie;
using namespace rpcie::hostd;
using rpcie::test::TempDir;

namespace {

HostdConfig parsed(const std::string& text) {
  HostdConfig c;
  auto r = hostd_config_text_apply(text, "h.toml", c);
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  return c;
}

std::string error_of(const std::string& text) {
  HostdConfig c;
  auto r = hostd_config_text_apply(text, "h.toml", c);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EINVAL);
  return r.error().message;
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("hostd config: option keys are read as the options' texts, with their lines") {
  auto c = parsed(
      "provider = \"tcp\"\ntimeout = 2.5\nattach-timeout = \"500ms\"\ndma-window = 8388608\n"
      "allow-remote = [\"10.0.0.1\", \"h:7400\"]\nstate-file = \"\"\nsplice-writes = true\n");
  CHECK(c.options.at("provider").values == std::vector<std::string>{"tcp"});
  CHECK(c.options.at("provider").origin == "h.toml:1");
  CHECK(c.options.at("timeout").values.at(0) == "2.5");
  CHECK(c.options.at("attach-timeout").values.at(0) == "500ms");
  CHECK(c.options.at("dma-window").values.at(0) == "8388608");
  CHECK(c.options.at("allow-remote").values == std::vector<std::string>{"10.0.0.1", "h:7400"});
  CHECK(c.options.at("allow-remote").origin == "h.toml:5");
  CHECK(c.options.at("state-file").values.at(0).empty());
  CHECK(c.options.at("splice-writes").values == std::vector<std::string>{"on"});
  CHECK(parsed("splice-writes = false\n").options.at("splice-writes").values.at(0) == "off");
  CHECK(parsed("splice-writes = \"on\"\n").options.at("splice-writes").values.at(0) == "on");
  CHECK(c.attaches.empty());
}

TEST_CASE("hostd config: [[attach]] entries with defaults, device names and owners") {
  auto c = parsed(
      "[[attach]]\nhost = \"10.0.0.1\"\nexport = \"edu0\"\n\n"
      "[[attach]]\nhost = \"dev.example\"\nport = 7400\nexport = \"mb\"\ndma-window = \"1M\"\n"
      "device = \"rpcie7\"\ndata-path = \"open\"\nowner = 1000\n");
  REQUIRE(c.attaches.size() == 2);
  const auto& a = c.attaches[0];
  CHECK(a.host == "10.0.0.1");
  CHECK(a.port == 7385);
  CHECK(a.export_name == "edu0");
  CHECK_FALSE(a.dma_window);
  CHECK_FALSE(a.device);
  CHECK(a.owner == 0);
  CHECK(a.origin == "h.toml:1");
  const auto& b = c.attaches[1];
  CHECK(b.port == 7400);
  CHECK(b.dma_window == std::size_t{1} << 20);
  CHECK(b.device == 7u);
  CHECK(b.data_path == DataPathChoice::open);
  CHECK(b.owner == 1000);
  CHECK(b.origin == "h.toml:5");
}

TEST_CASE("hostd config: unknown keys, wrong types and bad values are EINVAL at FILE:LINE") {
  CHECK(error_of("provider = \"tcp\"\nfrobnicate = 1\n") == "h.toml:2: unknown key 'frobnicate'");
  CHECK(error_of("foreground = true\n") == "h.toml:1: unknown key 'foreground'");
  CHECK(error_of("\n\ntimeout = true\n") == "h.toml:3: timeout: must be a number or a string");
  CHECK(error_of("provider = 3\n") == "h.toml:1: provider: must be a string");
  CHECK(error_of("splice-writes = 1\n") == "h.toml:1: splice-writes: must be true, false, \"on\" or \"off\"");
  CHECK(error_of("allow-remote = \"h\"\n").starts_with("h.toml:1: allow-remote: must be an array"));
  CHECK(error_of("timeout = -1\n") == "h.toml:1: timeout: must not be negative");
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"e\"\nport = 70000\n") ==
        "h.toml:4: attach: port: expected 1-65535");
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"e\"\nport = \"7385\"\n") ==
        "h.toml:4: attach: port: expected 1-65535");
  CHECK(error_of("[[attach]]\nhost = \"h\"\n") == "h.toml:1: attach: needs host and export");
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"e\"\nspeed = 1\n") == "h.toml:4: attach: unknown key 'speed'");
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"e\"\ndevice = \"eth0\"\n") ==
        "h.toml:4: attach: device: expected rpcie0..rpcie4095");
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"e\"\ndma-window = \"5\"\n")
            .starts_with("h.toml:4: attach: dma-window: expected a positive multiple of the page size"));
  CHECK(error_of("[[attach]]\nhost = \"h/x\"\nexport = \"e\"\n").starts_with("h.toml:2: attach: "));
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"../e\"\n").starts_with("h.toml:3: attach: "));
  CHECK(error_of("attach = 1\n") == "h.toml:1: attach must be tables ([[attach]])");
  CHECK(error_of("timeout = \n").starts_with("h.toml:1:"));  // bad TOML: FILE:LINE:COLUMN
}

TEST_CASE("hostd config: the same exporter and export twice, or one device name twice, names both lines") {
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"e\"\n[[attach]]\nhost = \"h\"\nport = 7385\nexport = \"e\"\n") ==
        "h.toml:4: attach: e on h:7385 is configured twice (first at h.toml:1)");
  CHECK(error_of("[[attach]]\nhost = \"h\"\nexport = \"e\"\ndevice = \"rpcie1\"\n"
                 "[[attach]]\nhost = \"h\"\nexport = \"f\"\ndevice = \"rpcie1\"\n") ==
        "h.toml:5: attach: device rpcie1 is configured twice (first at h.toml:1)");
  // Another port is another exporter.
  CHECK(parsed("[[attach]]\nhost = \"h\"\nexport = \"e\"\n[[attach]]\nhost = \"h\"\nport = 7400\nexport = \"e\"\n")
            .attaches.size() == 2);
}

TEST_CASE("hostd config: the file, then the drop-in directory in name order; a later key wins") {
  TempDir dir;
  std::filesystem::create_directory(dir.file("hostd.d"));
  write(dir.file("hostd.toml"), "timeout = 3\n[[attach]]\nhost = \"h\"\nexport = \"a\"\n");
  write(dir.file("hostd.d/20-b.toml"), "timeout = 5\n[[attach]]\nhost = \"h\"\nexport = \"c\"\n");
  write(dir.file("hostd.d/10-a.toml"), "[[attach]]\nhost = \"h\"\nexport = \"b\"\n");
  write(dir.file("hostd.d/notes.txt"), "not toml at all [");
  auto c = hostd_config_load({dir.file("hostd.toml"), false, dir.file("hostd.d")});
  REQUIRE(c);
  CHECK(c->options.at("timeout").values.at(0) == "5");
  CHECK(c->options.at("timeout").origin == dir.file("hostd.d/20-b.toml") + ":1");
  REQUIRE(c->attaches.size() == 3);
  CHECK(c->attaches[0].export_name == "a");
  CHECK(c->attaches[1].export_name == "b");
  CHECK(c->attaches[2].export_name == "c");
  // A duplicate across files names both.
  write(dir.file("hostd.d/30-c.toml"), "[[attach]]\nhost = \"h\"\nexport = \"a\"\n");
  auto dup = hostd_config_load({dir.file("hostd.toml"), false, dir.file("hostd.d")});
  REQUIRE_FALSE(dup);
  CHECK(dup.error().message == dir.file("hostd.d/30-c.toml") +
                                   ":1: attach: a on h:7385 is configured twice (first at " + dir.file("hostd.toml") +
                                   ":2)");
}

TEST_CASE("hostd config: a missing default file is no configuration, a missing --config file is ENOENT") {
  TempDir dir;
  auto none = hostd_config_load({dir.file("hostd.toml"), false, dir.file("hostd.d")});
  REQUIRE(none);
  CHECK(none->files.empty());
  auto missing = hostd_config_load({dir.file("hostd.toml"), true, {}});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == ENOENT);
  CHECK(config_source_of("/x/h.toml").dropin_dir.empty());  // --config FILE reads FILE alone
  CHECK(config_source_of("").file == kConfigFileDefault);
  CHECK(config_source_of("").dropin_dir == "/etc/rpcie/hostd.d");
}

TEST_CASE("hostd config: entries become attach parameters under hostd's policy") {
  auto c = parsed(
      "[[attach]]\nhost = \"h\"\nexport = \"e\"\n\n[[attach]]\nhost = \"h\"\nexport = \"f\"\n"
      "dma-window = \"512M\"\n");
  AttachPolicy policy;
  auto p = configured_params(c.attaches[0], policy);
  REQUIRE(p);
  CHECK(p->window_size == policy.window_default);
  CHECK(p->port == 7385);
  auto big = configured_params(c.attaches[1], policy);
  REQUIRE_FALSE(big);
  CHECK(big.error().message.starts_with("h.toml:5: attach: dma_window of 536870912 bytes is over --max-dma-window"));
}

TEST_CASE("hostd config reload: only entries neither attached nor pending are taken on") {
  TempDir dir;
  const auto file = dir.file("hostd.toml");
  write(file, "[[attach]]\nhost = \"h\"\nexport = \"a\"\n");
  const ConfigSource source{file, true, {}};
  auto first = hostd_config_load(source);
  REQUIRE(first);
  std::vector<AttachParams> present;
  auto todo = configured_missing(first->attaches, present);
  REQUIRE(todo.size() == 1);
  present.push_back(*configured_params(todo[0], AttachPolicy{}));
  // The operator adds one entry, hostd is told to reload: only it is new.
  write(file, read(file) + "\n[[attach]]\nhost = \"h\"\nexport = \"b\"\n");
  auto second = hostd_config_load(source);
  REQUIRE(second);
  todo = configured_missing(second->attaches, present);
  REQUIRE(todo.size() == 1);
  CHECK(todo[0].export_name == "b");
  CHECK(todo[0].origin == file + ":5");
  // The same export on another spelling of the port is the same; on another port it is not.
  present.push_back(*configured_params(todo[0], AttachPolicy{}));
  CHECK(configured_missing(second->attaches, present).empty());
}

TEST_CASE("config edit: an appended entry reads back; the rest of the file is kept byte for byte") {
  TempDir dir;
  const auto file = dir.file("hostd.toml");
  const std::string head = "# site settings\ntimeout = 2 # seconds\n";
  write(file, head);
  ::chmod(file.c_str(), 0640);
  ConfiguredAttach a;
  a.host = "10.0.0.1";
  a.port = 7400;
  a.export_name = "edu0";
  a.device = 3;
  a.owner = 1000;
  a.dma_window = 1u << 20;
  REQUIRE(config_table_append(file, configured_text(a)));
  const auto text = read(file);
  CHECK(text.starts_with(head));
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(::access((file + ".tmp").c_str(), F_OK) != 0);
  auto c = hostd_config_load({file, true, {}});
  REQUIRE(c);
  REQUIRE(c->attaches.size() == 1);
  const auto& b = c->attaches[0];
  CHECK((b.host == a.host && b.port == a.port && b.export_name == a.export_name));
  CHECK(b.device == 3u);
  CHECK(b.owner == 1000);
  CHECK(b.dma_window == std::size_t{1} << 20);
  CHECK(b.origin == file + ":4");
}

TEST_CASE("config edit: a removed table takes its lines, keeping comments of the next table and other lines") {
  const std::string text =
      "# head\ntimeout = 2\n\n[[attach]]\nhost = \"h\"\nexport = \"a\"\n\n# the second one\n[[attach]]\nhost = "
      "\"h\"\nexport = \"b\"\n";
  auto first = config_text_table_remove(text, 4);
  REQUIRE(first);
  CHECK(*first == "# head\ntimeout = 2\n\n# the second one\n[[attach]]\nhost = \"h\"\nexport = \"b\"\n");
  auto last = config_text_table_remove(text, 9);
  REQUIRE(last);
  CHECK(*last == "# head\ntimeout = 2\n\n[[attach]]\nhost = \"h\"\nexport = \"a\"\n");
  CHECK_FALSE(config_text_table_remove(text, 5));   // not a header
  CHECK_FALSE(config_text_table_remove(text, 99));  // past the end
}

TEST_CASE("config edit: a directory that cannot be written is refused before anything is done") {
  TempDir dir;
  auto r = config_writable(dir.file("missing/hostd.toml"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOENT);
  CHECK(r.error().message.find(dir.file("missing/hostd.toml")) != std::string::npos);
  CHECK(config_writable(dir.file("hostd.toml")));
  CHECK_FALSE(config_table_append(dir.file("missing/hostd.toml"), "[[attach]]\n"));
}
