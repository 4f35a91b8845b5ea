// libFuzzer target: rpcie-exportd's configuration — the TOML file (config_text_apply, the
// text half of config_file_apply), --export specs (export_config_parse) and config_check.
//
// Input: lines that start with "--export=" first (each the text of one --export flag, as
// given), then the TOML text of a config file.
//
// Checks, beyond the sanitizers' (and no exception escaping: toml++ throws on bad TOML):
//  - every refusal is EINVAL; one of the file names the file ("fuzz.toml:LINE...");
//  - an accepted --export has a valid name (1-64 of A-Za-z0-9_.-), a backend, no exporter
//    key (dma, shared, allow, data-path) left in its backend params, and allow entries
//    that are client names; written back as NAME=BACKEND,k=v... (when no value holds a
//    ',') it parses to the same spec;
//  - an accepted file gives exports and clients whose origins name the file, and allow
//    lists whose origins run in step with them;
//  - config_check refuses with EINVAL only, and always when there is no export.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config.hpp"
#include "fuzz_check.hpp"
#include "rpcie/auth.hpp"

namespace {

using namespace rpcie;
using namespace rpcie::dev;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) fuzz::die("config_fuzz", what, detail);
}

bool name_ok(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (unsigned char c : n)
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

bool exporter_key(const std::string& k) { return k == "dma" || k == "shared" || k == "allow" || k == "data-path"; }

void export_check(const ExportConfig& e) {
  check(name_ok(e.spec.name), "accepted an export with a bad name", e.spec.name);
  check(!e.spec.backend.empty(), "accepted an export without a backend");
  for (const auto& [k, v] : e.spec.params) check(!exporter_key(k), "an exporter key was left in the backend params", k);
  for (const auto& a : e.allow) check(auth::client_name_valid(a), "an allow entry is not a client name", a);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ExporterConfig config;
  static constexpr std::string_view kFlag = "--export=";
  while (text.starts_with(kFlag)) {
    const std::size_t nl = text.find('\n');
    const std::string_view spec = text.substr(kFlag.size(), nl == std::string_view::npos ? nl : nl - kFlag.size());
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    auto e = export_config_parse(spec);
    if (!e) {
      check(e.error().code == EINVAL, "--export refused with a code other than EINVAL", e.error().message);
      continue;
    }
    export_check(*e);
    // Written back in the flag form, the backend part parses to the same spec.
    std::string again = e->spec.name + "=" + e->spec.backend;
    bool plain = e->spec.backend.find(',') == std::string::npos;
    for (const auto& [k, v] : e->spec.params) {
      again += "," + k + "=" + v;
      plain = plain && v.find(',') == std::string::npos && k.find(',') == std::string::npos;
    }
    if (plain) {
      auto back = export_config_parse(again);
      check(back.has_value(), "an accepted spec written back does not parse", again);
      check(back->spec.name == e->spec.name && back->spec.backend == e->spec.backend &&
                back->spec.params == e->spec.params,
            "an accepted spec written back parses to another spec", again);
    }
    config.exports.push_back(std::move(*e));
  }

  const std::size_t flag_exports = config.exports.size();
  auto applied = config_text_apply(text, "fuzz.toml", config);
  if (!applied) {
    check(applied.error().code == EINVAL, "the file was refused with a code other than EINVAL",
          applied.error().message);
    check(applied.error().message.starts_with("fuzz.toml:"), "a refusal of the file does not name the file",
          applied.error().message);
    return 0;
  }
  for (std::size_t i = flag_exports; i < config.exports.size(); ++i) {
    const auto& e = config.exports[i];
    export_check(e);
    check(e.origin.starts_with("fuzz.toml:"), "an export of the file has another origin", e.origin);
    check(e.allow_origin.size() == e.allow.size(), "allow and allow_origin are out of step");
  }
  for (const auto& c : config.clients)
    check(c.origin.starts_with("fuzz.toml:"), "a client of the file has another origin", c.origin);
  check(config.lease >= std::chrono::milliseconds(100), "accepted a lease under 100ms");
  check(config.preauth_per_address >= 1 && config.preauth_max >= 1, "accepted a pre-authentication cap of 0");

  auto checked = config_check(config);
  if (!checked) check(checked.error().code == EINVAL, "config_check with a code other than EINVAL");
  if (config.exports.empty()) check(!checked.has_value(), "config_check accepted a configuration without exports");
  return 0;
}
