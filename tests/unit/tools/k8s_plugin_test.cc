// rpcie-k8s-plugin's parts that need no kubelet, hostd or exporter: the configuration file,
// the pool's health and generation, and the device list and preferred allocation the
// service answers.
#include <doctest/doctest.h>

#include "config.hpp"
#include "plugin_service.hpp"
#include "pool.hpp"

using namespace rpcie::k8s;

namespace {

const char* kGood = R"(# pool
resource = "edu"
check-interval = 0.5

[[device]]
host = "10.0.0.1"
export = "edu0"

[[device]]
host = "10.0.0.2"
port = 7400
export = "edu0"
id = "edu0-b"
)";

std::string error_of(const std::string& text) {
  auto c = config_parse(text, "k.toml");
  REQUIRE_FALSE(c);
  return c.error().message;
}

}  // namespace

TEST_CASE("config_parse_reads_a_pool_with_defaults_and_ids") {
  auto c = config_parse(kGood, "k.toml");
  REQUIRE(c);
  CHECK(c->resource_name() == "rpcie.io/edu");
  CHECK(c->check_interval == std::chrono::milliseconds(500));
  CHECK(c->release_grace == std::chrono::seconds(30));
  REQUIRE(c->devices.size() == 2);
  CHECK(c->devices[0].id == "edu0");
  CHECK(c->devices[0].exporter() == "10.0.0.1:7385");
  CHECK(c->devices[1].id == "edu0-b");
  CHECK(c->devices[1].exporter() == "10.0.0.2:7400");
}

TEST_CASE("config_load_reads_the_installed_example") {
  auto c = config_load(RPCIE_K8S_EXAMPLE);
  REQUIRE_MESSAGE(c, c.error().message);
  CHECK(c->resource_name() == "rpcie.io/edu");
  CHECK(c->devices.size() == 2);
}

TEST_CASE("config_parse_names_the_line_of_what_is_wrong") {
  CHECK(error_of("resource = \"edu\"\nbogus = 1\n[[device]]\nhost = \"h\"\nexport = \"e\"\n") ==
        "k.toml:2: unknown key 'bogus'");
  CHECK(error_of("resource = \"edu\"\n[[device]]\nhost = \"h\"\nexport = \"e\"\nport = 0\n") ==
        "k.toml:5: device: port: expected 1-65535");
  CHECK(
      error_of(
          "resource = \"edu\"\n[[device]]\nhost = \"a\"\nexport = \"e\"\n[[device]]\nhost = \"b\"\nexport = \"e\"\n") ==
      "k.toml:5: device: id 'e' twice (first at k.toml:2)");
  CHECK(error_of("resource = \"rpcie.io/edu\"\n") == "k.toml:1: resource: expected 1-63 of A-Z a-z 0-9 _ . -");
  CHECK(error_of("resource = \"edu\"\n") == "k.toml: no [[device]] entries: nothing to advertise");
  CHECK(error_of("[[device]]\nhost = \"h\"\nexport = \"e\"\n") ==
        "k.toml: resource: missing (the name in rpcie.io/<name>)");
  CHECK(error_of("resource = \"edu\"\n[[device]]\nhost = \"h\"\n") == "k.toml:2: device: needs host and export");
}

TEST_CASE("pool_health_change_raises_the_generation_and_wakes_a_watcher") {
  Pool pool(config_parse(kGood, "k.toml")->devices);
  std::uint64_t g0 = 0;
  auto views = pool.snapshot(&g0);
  REQUIRE(views.size() == 2);
  CHECK_FALSE(views[0].healthy);  // not checked yet
  pool.health_set("edu0", false, "still down");
  CHECK_FALSE(pool.changed_wait(g0, rpcie::Deadline::after(std::chrono::milliseconds(1))));  // no change
  pool.health_set("edu0", true, "");
  CHECK(pool.changed_wait(g0, rpcie::Deadline::after(std::chrono::seconds(1))));
  const auto list = device_list_of(pool.snapshot());
  REQUIRE(list.devices_size() == 2);
  CHECK(list.devices(0).id() == "edu0");
  CHECK(list.devices(0).health() == "Healthy");
  CHECK(list.devices(1).health() == "Unhealthy");
}

TEST_CASE("preferred_allocation_takes_must_include_then_healthy_free_devices") {
  auto c = config_parse(std::string(kGood) + "\n[[device]]\nhost = \"10.0.0.3\"\nexport = \"edu2\"\n", "k.toml");
  REQUIRE(c);
  Pool pool(c->devices);
  pool.health_set("edu2", true, "");
  AllocatorOptions o;
  Allocator allocator(pool, o);
  DevicePluginService service(pool, allocator);
  v1beta1::PreferredAllocationRequest request;
  auto* r = request.add_container_requests();
  for (const char* id : {"edu0", "edu0-b", "edu2"}) r->add_available_deviceids(id);
  r->add_must_include_deviceids("edu0-b");
  r->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse response;
  REQUIRE(service.GetPreferredAllocation(nullptr, &request, &response).ok());
  REQUIRE(response.container_responses_size() == 1);
  const auto& ids = response.container_responses(0).deviceids();
  REQUIRE(ids.size() == 2);
  CHECK(ids[0] == "edu0-b");
  CHECK(ids[1] == "edu2");  // healthy before the unhealthy edu0
}
