// frontend: an attach request's parameters as the control socket carries them (names,
// port, the DMA window cap), and who owns which attachment.
#include <doctest/doctest.h>

#include <cerrno>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attach_manager.hpp"
#include "attach_owners.hpp"
#include "dev_links.hpp"
#include "rpcie/process.hpp"

using namespace rpcie;
using namespace rpcie::hostd;
using nlohmann::json;

namespace {

AttachPolicy policy_of(std::size_t window_default, std::size_t window_max = 256u << 20) {
  AttachPolicy p;
  p.window_default = window_default;
  p.window_max = window_max;
  return p;
}

// The error of parsing `r`; fails the test if it parsed.
Error parse_error(const json& r, const AttachPolicy& policy = policy_of(4096)) {
  auto p = attach_request_parse(r, policy);
  REQUIRE_FALSE(p.has_value());
  return p.error();
}

AttachParams target(const std::string& host, std::uint16_t port, const std::string& export_name) {
  AttachParams p;
  p.host = host;
  p.port = port;
  p.export_name = export_name;
  return p;
}

}  // namespace

TEST_CASE("attach request: host and export required, port and DMA window default") {
  auto p = attach_request_parse({{"op", "attach"}, {"host", "h"}, {"export", "edu0"}}, policy_of(4096));
  REQUIRE(p.has_value());
  CHECK(p->host == "h");
  CHECK(p->export_name == "edu0");
  CHECK(p->port == kDefaultPort);
  CHECK(p->window_size == 4096);
  p = attach_request_parse({{"host", "h"}, {"export", "e"}, {"port", 9000}, {"dma_window", 1 << 20}}, policy_of(4096));
  REQUIRE(p.has_value());
  CHECK(p->port == 9000);
  CHECK(p->window_size == 1 << 20);
}

TEST_CASE("attach request: data_path is optional; absent it is hostd's, else sealed, open or auto") {
  auto p = attach_request_parse({{"host", "h"}, {"export", "e"}}, policy_of(4096));
  REQUIRE(p.has_value());
  CHECK_FALSE(p->data_path);
  for (const auto& [word, choice] :
       {std::pair{"sealed", DataPathChoice::sealed}, std::pair{"open", DataPathChoice::open},
        std::pair{"auto", DataPathChoice::automatic}}) {
    p = attach_request_parse({{"host", "h"}, {"export", "e"}, {"data_path", word}}, policy_of(4096));
    REQUIRE(p.has_value());
    CHECK(p->data_path == choice);
  }
  CHECK(parse_error({{"host", "h"}, {"export", "e"}, {"data_path", "clear"}}).message ==
        "data_path: data path must be sealed, open or auto, not 'clear'");
  CHECK(parse_error({{"host", "h"}, {"export", "e"}, {"data_path", 1}}).code == EINVAL);
}

TEST_CASE("attach request: missing or mistyped fields, port 0 or over 65535 are EINVAL") {
  for (const json& r :
       {json{{"host", "h"}}, json{{"export", "e"}}, json{{"host", 1}, {"export", "e"}},
        json{{"host", "h"}, {"export", "e"}, {"port", 0}}, json{{"host", "h"}, {"export", "e"}, {"port", 65536}},
        json{{"host", "h"}, {"export", "e"}, {"port", -1}}, json{{"host", "h"}, {"export", "e"}, {"port", "7385"}}}) {
    CAPTURE(r.dump());
    CHECK(parse_error(r).code == EINVAL);
  }
  CHECK(parse_error({{"host", "h"}, {"export", "e"}, {"port", 70000}}).message == "port: expected 1-65535, got 70000");
}

TEST_CASE("attach request: a DMA window over --max-dma-window is EINVAL naming the cap") {
  const auto policy = policy_of(16u << 20, 256u << 20);
  auto at_cap = attach_request_parse({{"host", "h"}, {"export", "e"}, {"dma_window", 256u << 20}}, policy);
  REQUIRE(at_cap.has_value());
  CHECK(at_cap->window_size == 256u << 20);
  auto e = parse_error({{"host", "h"}, {"export", "e"}, {"dma_window", (256u << 20) + 4096}}, policy);
  CHECK(e.code == EINVAL);
  CHECK(e.message == "dma_window of 268439552 bytes is over --max-dma-window (268435456 bytes)");
  // A negative number is not read as a huge unsigned one, nor a string as a size.
  e = parse_error({{"host", "h"}, {"export", "e"}, {"dma_window", -4096}}, policy);
  CHECK(e.message == "dma_window: expected a size in bytes, got -4096");
  CHECK(parse_error({{"host", "h"}, {"export", "e"}, {"dma_window", "1G"}}, policy).code == EINVAL);
  e = parse_error({{"host", "h"}, {"export", "e"}, {"dma_window", 0}}, policy);
  CHECK(e.message == "dma_window of 0 bytes is not a positive multiple of the page size (4096)");
  CHECK(parse_error({{"host", "h"}, {"export", "e"}, {"dma_window", 4097}}, policy).code == EINVAL);
}

TEST_CASE("attach request: export names that would leave by-export/HOST/ are EINVAL") {
  for (const std::string& bad : std::vector<std::string>{"../x", "..", ".", "", "a/b", "/etc", std::string("a\0b", 3),
                                                         "a\nb", "a b", std::string(65, 'e'), "e\x7f"}) {
    CAPTURE(bad);
    const auto e = parse_error({{"host", "h"}, {"export", bad}});
    CHECK(e.code == EINVAL);
    CHECK(e.message.find("export name '") == 0);
    CHECK(e.message.find('\n') == std::string::npos);  // a control character is escaped
  }
  CHECK(parse_error({{"host", "h"}, {"export", "../../etc"}}).message ==
        "export name '../../etc': use 1-64 of A-Z a-z 0-9 _ . - (not \".\" or \"..\")");
  CHECK(parse_error({{"host", "h"}, {"export", "a\nb"}}).message ==
        "export name 'a\\x0ab': use 1-64 of A-Z a-z 0-9 _ . - (not \".\" or \"..\")");
  for (const std::string& good : std::vector<std::string>{"edu0", "e", "a.b-c_d", "...", std::string(64, 'e')})
    CHECK(attach_request_parse({{"host", "h"}, {"export", good}}, policy_of(4096)).has_value());
}

TEST_CASE("attach request: hosts are IP literals or host names, nothing else") {
  for (const std::string& good :
       std::vector<std::string>{"10.0.0.2", "::1", "fe80::1%eth0", "localhost", "dev-server.example.org", "a_b",
                                "169.254.79.1", std::string(63, 'h') + ".x"}) {
    CAPTURE(good);
    CHECK(host_name_check(good).has_value());
  }
  for (const std::string& bad : std::vector<std::string>{
           "", "..", ".", "../../etc", "a/b", "a..b", ".a", "a.", "-a", "a-", "a b", "a\nb", std::string("a\0b", 3),
           "[::1]", "fe80::1%", "fe80::1%../x", std::string(64, 'h'), std::string(254, 'h')}) {
    CAPTURE(bad);
    const auto e = host_name_check(bad);
    REQUIRE_FALSE(e.has_value());
    CHECK(e.error().code == EINVAL);
  }
  CHECK(parse_error({{"host", "../../etc"}, {"export", "e"}}).message ==
        "host '../../etc': expected an IPv4 or IPv6 address or a host name (labels of A-Z a-z 0-9 _ -)");
}

TEST_CASE("attachment owners: a non-root user cannot claim an export another user holds") {
  AttachOwners owners;
  auto a = owners.claim(0, 1001, target("10.0.0.1", 7385, "edu0"));
  REQUIRE(a.has_value());
  auto b = owners.claim(1, 1002, target("10.0.0.1", 7385, "edu0"));
  REQUIRE_FALSE(b.has_value());
  CHECK(b.error().code == EPERM);
  CHECK(b.error().message ==
        "export 'edu0' on 10.0.0.1:7385 is attached by another user (rpcie0); only that user or root may attach it "
        "again");
  CHECK_FALSE(owners.owner(1).has_value());  // a refused claim records nothing
  // Another port, host or export is another target; the same user and root may share it.
  CHECK(owners.claim(1, 1002, target("10.0.0.1", 9000, "edu0")).has_value());
  CHECK(owners.claim(2, 1002, target("10.0.0.2", 7385, "edu0")).has_value());
  CHECK(owners.claim(3, 1001, target("10.0.0.1", 7385, "edu0")).has_value());
  CHECK(owners.claim(4, 0, target("10.0.0.1", 7385, "edu0")).has_value());
  CHECK(owners.owner(4) == 0u);
  // Once the holder let go, the export is free for the other user.
  owners.release(0, *a);
  owners.release(3, *owners.serial(3));
  owners.release(4, *owners.serial(4));
  CHECK(owners.claim(5, 1002, target("10.0.0.1", 7385, "edu0")).has_value());
}

TEST_CASE("attachment owners: another spelling of the same exporter is the same target") {
  AttachOwners owners;
  REQUIRE(owners.claim(0, 1001, target("127.0.0.1", 7385, "edu0")).has_value());
  for (const char* spelling : {"127.1", "2130706433", "::ffff:127.0.0.1", "localhost"}) {
    CAPTURE(spelling);
    auto b = owners.claim(1, 1002, target(spelling, 7385, "edu0"));
    REQUIRE_FALSE(b.has_value());
    CHECK(b.error().code == EPERM);
  }
  CHECK(host_addresses("::ffff:10.1.2.3") == std::set<std::string>{"10.1.2.3"});
  CHECK(host_addresses("no-such-host.invalid") == std::set<std::string>{"no-such-host.invalid"});
  CHECK(owners.claim(1, 1002, target("127.0.0.2", 7385, "edu0")).has_value());
}

TEST_CASE("attachment owners: the owner and root may detach, others get EPERM naming the device") {
  AttachOwners owners;
  REQUIRE(owners.claim(0, 1001, target("10.0.0.1", 7385, "edu0")).has_value());
  CHECK(owners.detach_check(1001, "rpcie0", 0).has_value());
  CHECK(owners.detach_check(0, "rpcie0", 0).has_value());
  auto e = owners.detach_check(1002, "rpcie0", 0);
  REQUIRE_FALSE(e.has_value());
  CHECK(e.error().code == EPERM);
  CHECK(e.error().message == "rpcie0 was attached by another user (uid 1001); only that user or root may detach it");
  // No recorded owner: root's only.
  CHECK_FALSE(owners.detach_check(1001, "rpcie7", 7).has_value());
  CHECK(owners.detach_check(0, "rpcie7", 7).has_value());
  CHECK(owner_match(0, std::nullopt));
  CHECK_FALSE(owner_match(1001, std::nullopt));
  CHECK(owner_match(1001, 1001u));
  CHECK_FALSE(owner_match(1002, 1001u));
}

TEST_CASE("attachment owners: a stale release does not drop a newer claim of the same index") {
  AttachOwners owners;
  auto first = owners.claim(0, 1001, target("10.0.0.1", 7385, "edu0"));
  REQUIRE(first.has_value());
  // rpcie0 was withdrawn and its index given to another attach before the release came.
  auto second = owners.claim(0, 1002, target("10.0.0.1", 7385, "mem0"));
  REQUIRE(second.has_value());
  owners.release(0, *first);
  CHECK(owners.owner(0) == 1002u);
  owners.release(0, *second);
  CHECK_FALSE(owners.owner(0).has_value());
}
