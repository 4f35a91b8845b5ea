#include "hostd_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "attach_request.hpp"
#include "dev_links.hpp"
#include "remote_device.hpp"
#include "rpcie/toml_file.hpp"
#include "rpcie/units.hpp"
#include "state_file.hpp"

namespace rpcie::hostd {

namespace {

using toml_file::at;
using toml_file::string_get;

bool option_key(std::string_view key) {
  return std::find(std::begin(kOptionKeys), std::end(kOptionKeys), key) != std::end(kOptionKeys);
}

// Keys whose option takes a number: a TOML number is written as the option's text.
bool numeric_key(std::string_view key) {
  return key == "timeout" || key == "attach-timeout" || key == "dma-window" || key == "max-dma-window";
}

std::string number_text(const toml::node& n) {
  if (auto i = n.value_exact<std::int64_t>()) return std::to_string(*i);
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", *n.value_exact<double>());
  return text;
}

// One top-level key's value as text; the option itself checks the text (hostd's main()).
Result<OptionSetting> option_get(std::string_view key, const toml::node& n, const std::string& path) {
  const std::string where = at(path, n) + std::string(key) + ": ";
  OptionSetting s{{}, toml_file::origin(path, n)};
  if (key == "allow-remote") {
    auto* list = n.as_array();
    if (!list) return fail(EINVAL, where + "must be an array of \"HOST[:PORT]\" strings");
    for (auto&& item : *list) {
      auto v = item.value_exact<std::string>();
      if (!v) return fail(EINVAL, at(path, item) + "allow-remote: entries must be \"HOST[:PORT]\" strings");
      s.values.push_back(*v);
    }
    return s;
  }
  if (numeric_key(key) && (n.is_integer() || n.is_floating_point())) {
    if (n.value_exact<std::int64_t>().value_or(0) < 0 || n.value_exact<double>().value_or(0) < 0)
      return fail(EINVAL, where + "must not be negative");
    s.values.push_back(number_text(n));
    return s;
  }
  if (key == "splice-writes") {
    if (auto b = n.value_exact<bool>())
      s.values.push_back(*b ? "on" : "off");
    else if (auto text = n.value_exact<std::string>())
      s.values.push_back(*text);  // the option checks it
    else
      return fail(EINVAL, where + "must be true, false, \"on\" or \"off\"");
    return s;
  }
  auto v = n.value_exact<std::string>();
  if (!v) return fail(EINVAL, where + (numeric_key(key) ? "must be a number or a string" : "must be a string"));
  s.values.push_back(std::move(*v));
  return s;
}

Result<std::size_t> window_get(const toml::node& n, const std::string& where) {
  std::optional<std::uint64_t> bytes;
  if (auto i = n.value_exact<std::int64_t>()) {
    if (*i > 0) bytes = static_cast<std::uint64_t>(*i);
  } else if (auto s = n.value_exact<std::string>()) {
    bytes = size_parse(*s);
  } else {
    return fail(EINVAL, where + "must be a size (\"16M\") or a number of bytes");
  }
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (!bytes || *bytes == 0 || *bytes % page != 0 || *bytes > (std::uint64_t{1} << 40))
    return fail(EINVAL, where + "expected a positive multiple of the page size (" + std::to_string(page) + ")");
  return static_cast<std::size_t>(*bytes);
}

// The optional keys of an [[attach]] table (host and export are read by the caller).
Result<void> attach_optional_apply(const toml::table& t, const std::string& path, ConfiguredAttach& a) {
  if (auto* n = t.get("port")) {
    auto port = n->value_exact<std::int64_t>();
    if (!port || *port < 1 || *port > 65535) return fail(EINVAL, at(path, *n) + "attach: port: expected 1-65535");
    a.port = static_cast<std::uint16_t>(*port);
  }
  if (auto* n = t.get("dma-window")) {
    RPCIE_TRY_ASSIGN(a.dma_window, window_get(*n, at(path, *n) + "attach: dma-window: "));
  }
  if (auto* n = t.get("device")) {
    RPCIE_TRY_ASSIGN(auto name, string_get(*n, at(path, *n) + "attach: device: "));
    a.device = device_index_parse(name);
    if (!a.device) return fail(EINVAL, at(path, *n) + "attach: device: expected rpcie0..rpcie4095");
  }
  if (auto* n = t.get("data-path")) {
    RPCIE_TRY_ASSIGN(auto text, string_get(*n, at(path, *n) + "attach: data-path: "));
    auto choice = data_path_choice_parse(text);
    if (!choice) return fail(EINVAL, at(path, *n) + "attach: data-path: " + choice.error().message);
    a.data_path = *choice;
  }
  if (auto* n = t.get("owner")) {
    auto uid = n->value_exact<std::int64_t>();
    if (!uid || *uid < 0 || *uid > 0xfffffffe) return fail(EINVAL, at(path, *n) + "attach: owner: expected a uid");
    a.owner = static_cast<uid_t>(*uid);
  }
  return {};
}

Result<ConfiguredAttach> attach_table_parse(const toml::table& t, const std::string& path) {
  RPCIE_TRY(toml_file::keys_check(t, path, "attach: ", "host", "port", "export", "dma-window", "device", "data-path",
                                  "owner"));
  ConfiguredAttach a;
  a.origin = toml_file::origin(path, t);
  auto* host = t.get("host");
  auto* exp = t.get("export");
  if (!host || !exp) return fail(EINVAL, a.origin + ": attach: needs host and export");
  RPCIE_TRY_ASSIGN(a.host, string_get(*host, at(path, *host) + "attach: host "));
  if (auto ok = host_name_check(a.host); !ok) return fail(EINVAL, at(path, *host) + "attach: " + ok.error().message);
  RPCIE_TRY_ASSIGN(a.export_name, string_get(*exp, at(path, *exp) + "attach: export "));
  if (auto ok = export_name_check(a.export_name); !ok)
    return fail(EINVAL, at(path, *exp) + "attach: " + ok.error().message);
  RPCIE_TRY(attach_optional_apply(t, path, a));
  return a;
}

Result<void> duplicate_check(const ConfiguredAttach& a, const std::vector<ConfiguredAttach>& earlier) {
  for (const auto& e : earlier) {
    if (e.same_target(a))
      return fail(EINVAL, a.origin + ": attach: " + a.export_name + " on " + a.host + ":" + std::to_string(a.port) +
                              " is configured twice (first at " + e.origin + ")");
    if (a.device && e.device == a.device)
      return fail(EINVAL, a.origin + ": attach: device rpcie" + std::to_string(*a.device) +
                              " is configured twice (first at " + e.origin + ")");
  }
  return {};
}

Result<void> attaches_apply(const toml::node& n, const std::string& path, HostdConfig& config) {
  auto* arr = n.as_array();
  if (!arr || !arr->is_array_of_tables()) return fail(EINVAL, at(path, n) + "attach must be tables ([[attach]])");
  for (auto&& item : *arr) {
    RPCIE_TRY_ASSIGN(auto a, attach_table_parse(*item.as_table(), path));
    RPCIE_TRY(duplicate_check(a, config.attaches));
    config.attaches.push_back(std::move(a));
  }
  return {};
}

Result<void> table_apply(const toml::table& root, const std::string& path, HostdConfig& config) {
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    if (key == "attach") continue;
    if (!option_key(key)) return fail(EINVAL, at(path, v) + "unknown key '" + key + "'");
    RPCIE_TRY_ASSIGN(config.options[key], option_get(key, v, path));
  }
  if (auto* n = root.get("attach")) RPCIE_TRY(attaches_apply(*n, path, config));
  config.files.push_back(path);
  return {};
}

}  // namespace

Result<void> hostd_config_text_apply(std::string_view text, const std::string& path, HostdConfig& config) {
  RPCIE_TRY_ASSIGN(const toml::table root, toml_file::text_load(text, path));
  return table_apply(root, path, config);
}

ConfigSource config_source_of(const std::string& given) {
  if (!given.empty()) return {given, true, {}};
  const std::filesystem::path file(kConfigFileDefault);
  return {file.string(), false, (file.parent_path() / kConfigDirName).string()};
}

Result<HostdConfig> hostd_config_load(const ConfigSource& source) {
  HostdConfig config;
  std::error_code ec;
  std::vector<std::string> files;
  if (source.file_required || std::filesystem::exists(source.file, ec)) files.push_back(source.file);
  if (!source.dropin_dir.empty() && std::filesystem::is_directory(source.dropin_dir, ec)) {
    std::vector<std::string> dropins;
    for (const auto& e : std::filesystem::directory_iterator(source.dropin_dir, ec))
      if (e.path().extension() == ".toml" && e.is_regular_file(ec)) dropins.push_back(e.path().string());
    std::sort(dropins.begin(), dropins.end());
    files.insert(files.end(), dropins.begin(), dropins.end());
  }
  for (const auto& f : files) {
    RPCIE_TRY_ASSIGN(const toml::table root, toml_file::file_load(f));
    RPCIE_TRY(table_apply(root, f, config));
  }
  return config;
}

Result<AttachParams> configured_params(const ConfiguredAttach& a, const AttachPolicy& policy) {
  nlohmann::json request{{"host", a.host}, {"port", a.port}, {"export", a.export_name}};
  if (a.dma_window) request["dma_window"] = *a.dma_window;
  if (a.data_path) request["data_path"] = data_path_choice_name(*a.data_path);
  auto p = attach_request_parse(request, policy);
  if (!p) return fail(EINVAL, a.origin + ": attach: " + p.error().message);
  return p;
}

std::vector<ConfiguredAttach> configured_missing(const std::vector<ConfiguredAttach>& configured,
                                                 const std::vector<AttachParams>& present) {
  std::vector<ConfiguredAttach> out;
  for (const auto& c : configured) {
    const bool there = std::any_of(present.begin(), present.end(), [&](const AttachParams& p) {
      return p.host == c.host && p.port == c.port && p.export_name == c.export_name;
    });
    if (!there) out.push_back(c);
  }
  return out;
}

std::string configured_text(const ConfiguredAttach& a) {
  // Strings as TOML basic strings: host and export names hold no quote or backslash
  // (host_name_check, export_name_check), so no escaping is needed.
  std::string t = "[[attach]]\nhost = \"" + a.host + "\"\nport = " + std::to_string(a.port) + "\nexport = \"" +
                  a.export_name + "\"\n";
  if (a.dma_window) t += "dma-window = " + std::to_string(*a.dma_window) + "\n";
  if (a.device) t += "device = \"rpcie" + std::to_string(*a.device) + "\"\n";
  if (a.data_path) t += "data-path = \"" + std::string(data_path_choice_name(*a.data_path)) + "\"\n";
  if (a.owner != 0) t += "owner = " + std::to_string(a.owner) + "\n";
  return t;
}

}  // namespace rpcie::hostd
