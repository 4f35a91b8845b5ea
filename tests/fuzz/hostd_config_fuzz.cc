// libFuzzer target: rpcie-hostd's configuration — the TOML text of a file
// (hostd_config_text_apply, the text half of hostd_config_load), applied twice as two files
// of one configuration, and what hostd writes back into such a file (configured_text).
//
// Checks, beyond the sanitizers' (and no exception escaping: toml++ throws on bad TOML):
//  - every refusal is EINVAL and names the file ("fuzz.toml:LINE...");
//  - accepted option keys are hostd's long options, each with at least one value (exactly
//    one but allow-remote's) and an origin in the file;
//  - accepted [[attach]] entries have a host and export that hostd's checks accept, a port,
//    an origin in the file, and no two of them the same target or device; written back as
//    `rpcie attach --persist` does, each parses to the same entry;
//  - the same text as a second file of the configuration is refused when it has an
//    [[attach]] entry (each is a duplicate of the first file's).
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dev_links.hpp"
#include "fuzz_check.hpp"
#include "hostd_config.hpp"

namespace {

using namespace rpcie;
using namespace rpcie::hostd;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) fuzz::die("hostd_config_fuzz", what, detail);
}

void entry_check(const ConfiguredAttach& a) {
  check(a.origin.starts_with("fuzz.toml:"), "an entry's origin is not in the file", a.origin);
  check(host_name_check(a.host).has_value() && export_name_check(a.export_name).has_value(),
        "accepted an entry with a bad host or export", a.host + " " + a.export_name);
  check(a.port != 0, "accepted port 0");
  HostdConfig again;
  auto back = hostd_config_text_apply(configured_text(a), "again.toml", again);
  check(back.has_value(), "an entry written back does not parse", configured_text(a));
  check(again.attaches.size() == 1, "an entry written back is not one entry", configured_text(a));
  const auto& b = again.attaches[0];
  check(b.same_target(a) && b.dma_window == a.dma_window && b.device == a.device && b.data_path == a.data_path &&
            b.owner == a.owner,
        "an entry written back parses to another", configured_text(a));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  HostdConfig config;
  auto r = hostd_config_text_apply(text, "fuzz.toml", config);
  if (!r) {
    check(r.error().code == EINVAL, "refused with a code other than EINVAL", r.error().message);
    check(r.error().message.starts_with("fuzz.toml:"), "an error does not name the file", r.error().message);
    return 0;
  }
  for (const auto& [key, s] : config.options) {
    check(std::find(std::begin(kOptionKeys), std::end(kOptionKeys), key) != std::end(kOptionKeys),
          "accepted a key that is not an option", key);
    check(key == "allow-remote" || s.values.size() == 1, "an option key has not one value", key);
    check(s.origin.starts_with("fuzz.toml:"), "an option's origin is not in the file", s.origin);
  }
  for (std::size_t i = 0; i < config.attaches.size(); ++i) {
    entry_check(config.attaches[i]);
    for (std::size_t j = 0; j < i; ++j) {
      const auto& a = config.attaches[i];
      const auto& b = config.attaches[j];
      check(!a.same_target(b) && (!a.device || a.device != b.device), "accepted a duplicate entry", a.origin);
    }
  }
  auto second = hostd_config_text_apply(text, "fuzz.toml", config);
  check(config.attaches.empty() || !second, "the same entries in a second file were accepted");
  return 0;
}
