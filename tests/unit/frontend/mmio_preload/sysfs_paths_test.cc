// /sys/bus/pci/devices paths of rpcie functions (domain >= 0x10000) map to the rpcie device
// directory; everything else is left alone.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "sysfs_paths.hpp"

using namespace rpcie::mmio;

namespace {
bool rpcie_name(const char* s) { return bdf_is_rpcie(s, std::strlen(s)); }
std::string rewrite_at(const char* dir, const char* path) {
  char out[256];
  return sysfs_path_rewrite_at(dir, path, "/run/rpcie/pci/devices", out, sizeof out) ? std::string(out)
                                                                                     : std::string("-");
}
std::string rewrite(const char* path) {
  char out[256];
  return sysfs_path_rewrite(path, "/run/rpcie/pci/devices", out, sizeof out) ? std::string(out) : std::string("-");
}
}  // namespace

TEST_CASE("bdf_is_rpcie: five to eight domain digits, at least 0x10000, then :BB:DD.F") {
  CHECK(rpcie_name("10000:00:00.0"));
  CHECK(rpcie_name("1ffff:0a:1f.7"));
  CHECK(rpcie_name("ABCDE:00:01.2"));
  CHECK(rpcie_name("0010000:00:00.0"));
  CHECK_FALSE(rpcie_name("0000:00:01.0"));   // a real function
  CHECK_FALSE(rpcie_name("0ffff:00:00.0"));  // five digits, below 0x10000
  CHECK_FALSE(rpcie_name("10000:00:00.8"));  // function 0-7
  CHECK_FALSE(rpcie_name("10000:00:00"));
  CHECK_FALSE(rpcie_name("10000:0g:00.0"));
  CHECK_FALSE(rpcie_name("123456789:00:00.0"));
  CHECK_FALSE(rpcie_name("resource0"));
}

TEST_CASE("sysfs_path_rewrite: the device, its files; nothing else") {
  CHECK(rewrite("/sys/bus/pci/devices/10000:00:00.0") == "/run/rpcie/pci/devices/10000:00:00.0");
  CHECK(rewrite("/sys/bus/pci/devices/10000:00:00.0/resource0") == "/run/rpcie/pci/devices/10000:00:00.0/resource0");
  CHECK(rewrite("/sys/bus/pci/devices//10001:00:00.0/config") == "/run/rpcie/pci/devices/10001:00:00.0/config");
  CHECK(rewrite("/sys/bus/pci/devices/0000:00:01.0/config") == "-");
  CHECK(rewrite("/sys/bus/pci/devices") == "-");
  CHECK(rewrite("/sys/bus/pci/devices/") == "-");
  CHECK(rewrite("/sys/bus/pci/devicesX/10000:00:00.0") == "-");
  CHECK(rewrite("sys/bus/pci/devices/10000:00:00.0") == "-");  // relative: left alone
  CHECK(rewrite(nullptr) == "-");
  char small[16];
  CHECK_FALSE(sysfs_path_rewrite("/sys/bus/pci/devices/10000:00:00.0/config", "/run/rpcie/pci/devices", small,
                                 sizeof small));  // would not fit: refused, not cut
}

TEST_CASE("sysfs_path_is_devices_dir: the directory itself, with or without trailing slashes") {
  CHECK(sysfs_path_is_devices_dir("/sys/bus/pci/devices"));
  CHECK(sysfs_path_is_devices_dir("/sys/bus/pci/devices//"));
  CHECK_FALSE(sysfs_path_is_devices_dir("/sys/bus/pci/devices/0000:00:00.0"));
  CHECK_FALSE(sysfs_path_is_devices_dir("/sys/bus/pci"));
}

TEST_CASE("sysfs_relative_candidate: a relative path with an rpcie address among its components") {
  CHECK(sysfs_relative_candidate("10000:00:00.0"));
  CHECK(sysfs_relative_candidate("10000:00:00.0/resource0"));
  CHECK(sysfs_relative_candidate("devices/10000:00:00.0/config"));
  CHECK(sysfs_relative_candidate("./10000:00:00.0"));
  CHECK_FALSE(sysfs_relative_candidate("/sys/bus/pci/devices/10000:00:00.0"));  // absolute: not this test's
  CHECK_FALSE(sysfs_relative_candidate("0000:00:01.0/config"));
  CHECK_FALSE(sysfs_relative_candidate("resource0"));
  CHECK_FALSE(sysfs_relative_candidate("a:b/c"));
  CHECK_FALSE(sysfs_relative_candidate(""));
  CHECK_FALSE(sysfs_relative_candidate(nullptr));
}

TEST_CASE("sysfs_path_rewrite_at: relative to /sys/bus/pci/devices, /sys/bus/pci or /; nothing else") {
  CHECK(rewrite_at("/sys/bus/pci/devices", "10000:00:00.0/resource0") ==
        "/run/rpcie/pci/devices/10000:00:00.0/resource0");
  CHECK(rewrite_at("/sys/bus/pci/devices/", "./10000:00:00.0") == "/run/rpcie/pci/devices/10000:00:00.0");
  CHECK(rewrite_at("/sys/bus/pci", "devices/10000:00:02.0/config") == "/run/rpcie/pci/devices/10000:00:02.0/config");
  CHECK(rewrite_at("/", "sys/bus/pci/devices/10000:00:00.0") == "/run/rpcie/pci/devices/10000:00:00.0");
  CHECK(rewrite_at("/sys/bus/pci/drivers", "10000:00:00.0") == "-");
  CHECK(rewrite_at("/sys/bus/pci/devices", "0000:00:01.0/config") == "-");
  CHECK(rewrite_at("/sys/bus/pci/devices", "/abs/10000:00:00.0") == "-");  // absolute paths ignore the directory
  CHECK(rewrite_at("relative/dir", "10000:00:00.0") == "-");
  CHECK(rewrite_at(nullptr, "10000:00:00.0") == "-");
}
