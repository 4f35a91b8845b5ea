// `rpcie run`: where it finds librpcie-mmio.so and how it prepends it to LD_PRELOAD.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "run.hpp"

using rpcie::cli::mmio_library_installed;
using rpcie::cli::mmio_library_resolve;
using rpcie::cli::preload_prepend;

TEST_CASE("the installed library is the executable's directory plus bindir-to-libdir") {
  CHECK(mmio_library_installed("/usr/bin/rpcie", "../lib/x86_64-linux-gnu") ==
        "/usr/bin/../lib/x86_64-linux-gnu/librpcie-mmio.so");
  CHECK(mmio_library_installed("/stage/usr/local/bin/rpcie", "../lib") ==
        "/stage/usr/local/bin/../lib/librpcie-mmio.so");
  CHECK(mmio_library_installed("/opt/rpcie/sbin/rpcie", "../../lib64") ==
        "/opt/rpcie/sbin/../../lib64/librpcie-mmio.so");
  CHECK(mmio_library_installed("/rpcie", "lib") == "/lib/librpcie-mmio.so");
}

TEST_CASE("RPCIE_MMIO_LIBRARY wins, then the installed path, then the build tree") {
  std::set<std::string> present;
  auto exists = [&](const std::string& p) { return present.count(p) != 0; };
  const std::string installed = "/s/usr/bin/../lib/librpcie-mmio.so", built = "/b/frontend/mmio/librpcie-mmio.so";
  std::vector<std::string> tried;
  CHECK(mmio_library_resolve("/s/usr/bin/rpcie", "../lib", "/b/frontend/mmio", "", exists, tried).empty());
  CHECK(tried == std::vector<std::string>{installed, built});
  present = {built};
  tried.clear();
  CHECK(mmio_library_resolve("/s/usr/bin/rpcie", "../lib", "/b/frontend/mmio", "", exists, tried) == built);
  present = {built, installed};
  CHECK(mmio_library_resolve("/s/usr/bin/rpcie", "../lib", "/b/frontend/mmio", "", exists, tried) == installed);
  present = {built, installed, "/my/lib.so"};
  CHECK(mmio_library_resolve("/s/usr/bin/rpcie", "../lib", "/b/frontend/mmio", "/my/lib.so", exists, tried) ==
        "/my/lib.so");
  tried.clear();  // an override that is not there is an error, not a fallback
  CHECK(mmio_library_resolve("/s/usr/bin/rpcie", "../lib", "/b/frontend/mmio", "/gone.so", exists, tried).empty());
  CHECK(tried == std::vector<std::string>{"/gone.so"});
}

TEST_CASE("the library goes first in LD_PRELOAD") {
  CHECK(preload_prepend("/l/librpcie-mmio.so", nullptr) == "/l/librpcie-mmio.so");
  CHECK(preload_prepend("/l/librpcie-mmio.so", "") == "/l/librpcie-mmio.so");
  CHECK(preload_prepend("/l/librpcie-mmio.so", "/x/a.so /y/b.so") == "/l/librpcie-mmio.so:/x/a.so /y/b.so");
}
