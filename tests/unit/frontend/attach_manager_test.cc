// frontend: an attach request's parameters, as the control socket carries them.
#include <doctest/doctest.h>

#include <cerrno>

#include "attach_manager.hpp"
#include "rpcie/process.hpp"

using namespace rpcie;
using namespace rpcie::hostd;
using nlohmann::json;

TEST_CASE("attach request: host and export required, port and DMA window default") {
  auto p = attach_request_parse({{"op", "attach"}, {"host", "h"}, {"export", "edu0"}}, 4096);
  REQUIRE(p.has_value());
  CHECK(p->host == "h");
  CHECK(p->export_name == "edu0");
  CHECK(p->port == kDefaultPort);
  CHECK(p->window_size == 4096);
  p = attach_request_parse({{"host", "h"}, {"export", "e"}, {"port", 9000}, {"dma_window", 1 << 20}}, 4096);
  REQUIRE(p.has_value());
  CHECK(p->port == 9000);
  CHECK(p->window_size == 1 << 20);
}

TEST_CASE("attach request: missing or mistyped fields and port 0 are EINVAL") {
  for (const json& r : {json{{"host", "h"}}, json{{"export", "e"}}, json{{"host", 1}, {"export", "e"}},
                        json{{"host", "h"}, {"export", "e"}, {"port", 0}}}) {
    auto p = attach_request_parse(r, 4096);
    REQUIRE_FALSE(p.has_value());
    CHECK(p.error().code == EINVAL);
  }
}
