#include "config.hpp"

#include <cerrno>
#include <cmath>
#include <map>

#include "rpcie/toml_file.hpp"

namespace rpcie::k8s {
namespace {

using toml_file::at;

Result<std::chrono::milliseconds> seconds_get(const toml::node& n, const std::string& where) {
  const auto v = n.value<double>();
  if (!v || !std::isfinite(*v) || *v < 0.1 || *v > 3600) return fail(EINVAL, where + "expected seconds 0.1-3600");
  return std::chrono::milliseconds(static_cast<std::int64_t>(*v * 1000));
}

Result<PoolDevice> device_parse(const toml::table& t, const std::string& path, const std::string& where) {
  RPCIE_TRY(toml_file::keys_check(t, path, "device: ", "host", "port", "export", "id"));
  PoolDevice d;
  const auto* host = t.get("host");
  const auto* exp = t.get("export");
  if (!host || !exp) return fail(EINVAL, where + "device: needs host and export");
  RPCIE_TRY_ASSIGN(d.host, toml_file::string_get(*host, at(path, *host) + "device: host: "));
  RPCIE_TRY_ASSIGN(d.export_name, toml_file::string_get(*exp, at(path, *exp) + "device: export: "));
  if (d.host.empty()) return fail(EINVAL, at(path, *host) + "device: host: must not be empty");
  if (const auto* port = t.get("port")) {
    const auto p = port->value_exact<std::int64_t>();
    if (!p || *p < 1 || *p > 65535) return fail(EINVAL, at(path, *port) + "device: port: expected 1-65535");
    d.port = static_cast<std::uint16_t>(*p);
  }
  d.id = d.export_name;
  if (const auto* id = t.get("id")) {
    RPCIE_TRY_ASSIGN(d.id, toml_file::string_get(*id, at(path, *id) + "device: id: "));
  }
  if (!name_valid(d.id))
    return fail(EINVAL, where + "device: id '" + d.id + "': expected 1-63 of A-Z a-z 0-9 _ . - (set id)");
  return d;
}

Result<void> top_key_parse(PluginConfig& c, std::string_view key, const toml::node& v, const std::string& path) {
  const std::string where = at(path, v) + std::string(key) + ": ";
  if (key == "resource") {
    RPCIE_TRY_ASSIGN(c.resource, toml_file::string_get(v, where));
    if (!name_valid(c.resource)) return fail(EINVAL, where + "expected 1-63 of A-Z a-z 0-9 _ . -");
  } else if (key == "control") {
    RPCIE_TRY_ASSIGN(c.control, toml_file::string_get(v, where));
  } else if (key == "psk-file") {
    RPCIE_TRY_ASSIGN(c.psk_file, toml_file::string_get(v, where));
  } else if (key == "name") {
    RPCIE_TRY_ASSIGN(c.client_name, toml_file::string_get(v, where));
  } else if (key == "check-interval") {
    RPCIE_TRY_ASSIGN(c.check_interval, seconds_get(v, where));
  } else if (key == "release-grace") {
    RPCIE_TRY_ASSIGN(c.release_grace, seconds_get(v, where));
  } else {
    return fail(EINVAL, at(path, v) + "unknown key '" + std::string(key) + "'");
  }
  return {};
}

Result<void> devices_parse(PluginConfig& c, const toml::node& v, const std::string& path) {
  const auto* arr = v.as_array();
  if (!arr) return fail(EINVAL, at(path, v) + "device: expected [[device]] entries");
  std::map<std::string, std::string> first;  // id -> FILE:LINE
  for (const auto& e : *arr) {
    const auto* t = e.as_table();
    if (!t) return fail(EINVAL, at(path, e) + "device: expected a table");
    RPCIE_TRY_ASSIGN(auto d, device_parse(*t, path, at(path, e)));
    auto [it, fresh] = first.emplace(d.id, toml_file::origin(path, e));
    if (!fresh) return fail(EINVAL, at(path, e) + "device: id '" + d.id + "' twice (first at " + it->second + ")");
    c.devices.push_back(std::move(d));
  }
  return {};
}

Result<PluginConfig> config_of(const toml::table& t, const std::string& path) {
  PluginConfig c;
  for (auto&& [k, v] : t) {
    if (k.str() == "device") {
      RPCIE_TRY(devices_parse(c, v, path));
    } else {
      RPCIE_TRY(top_key_parse(c, k.str(), v, path));
    }
  }
  if (c.resource.empty()) return fail(EINVAL, path + ": resource: missing (the name in rpcie.io/<name>)");
  if (c.devices.empty()) return fail(EINVAL, path + ": no [[device]] entries: nothing to advertise");
  return c;
}

}  // namespace

bool name_valid(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63 || name[0] == '.' || name[0] == '-') return false;
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                    ch == '.' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

Result<PluginConfig> config_parse(std::string_view text, const std::string& path) {
  RPCIE_TRY_ASSIGN(auto t, toml_file::text_load(text, path));
  return config_of(t, path);
}

Result<PluginConfig> config_load(const std::string& path) {
  RPCIE_TRY_ASSIGN(auto t, toml_file::file_load(path));
  return config_of(t, path);
}

}  // namespace rpcie::k8s
