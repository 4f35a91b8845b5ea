#include "config.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/process.hpp"
#include "rpcie/units.hpp"

namespace rpcie::dev {

namespace {

Result<void> exporter_key_apply(ExportConfig& e, const std::string& key, const std::string& value) {
  const std::string where = "export '" + e.spec.name + "': ";
  if (key == "dma") {
    if (value == "on-demand")
      e.dma = DmaMode::on_demand;
    else if (value == "mirror")
      e.dma = DmaMode::mirror;
    else
      return fail(EINVAL, where + "dma must be on-demand or mirror, not '" + value + "'");
  } else if (key == "shared") {
    if (value == "yes" || value == "true")
      e.shared = true;
    else if (value == "no" || value == "false")
      e.shared = false;
    else
      return fail(EINVAL, where + "shared must be yes or no, not '" + value + "'");
  } else if (key == "allow") {
    std::stringstream in(value);
    for (std::string name; std::getline(in, name, ':');) {
      if (!auth::client_name_valid(name)) return fail(EINVAL, where + "allow: '" + name + "' is not a client name");
      e.allow.push_back(name);
    }
    if (e.allow.empty()) return fail(EINVAL, where + "allow needs at least one client name");
  }
  return {};
}

bool exporter_key(const std::string& key) { return key == "dma" || key == "shared" || key == "allow"; }

template <class... Known>
Result<void> keys_check(const toml::table& t, const std::string& where, Known... known) {
  for (auto&& [k, v] : t) {
    (void)v;
    const std::string_view key = k.str();
    if (((key != known) && ...)) return fail(EINVAL, where + "unknown key '" + std::string(key) + "'");
  }
  return {};
}

Result<std::string> string_get(const toml::node& n, const std::string& where) {
  if (auto s = n.value<std::string>()) return *s;
  return fail(EINVAL, where + "must be a string");
}

}  // namespace

Result<ExportConfig> export_config_parse(std::string_view text) {
  auto spec = export_spec_parse(text);
  if (!spec) return tl::unexpected(spec.error());
  ExportConfig e;
  e.spec = std::move(*spec);
  for (auto it = e.spec.params.begin(); it != e.spec.params.end();) {
    if (!exporter_key(it->first)) {
      ++it;
      continue;
    }
    auto r = exporter_key_apply(e, it->first, it->second);
    if (!r) return tl::unexpected(r.error());
    it = e.spec.params.erase(it);
  }
  return e;
}

namespace {

Result<toml::table> table_load(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    if (e.description().find("File could not be opened") != std::string_view::npos)
      return fail(ENOENT, path + ": cannot open the config file");
    return fail(EINVAL, path + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) + ": " +
                            std::string(e.description()));
  }
}

// listen, provider, psk-file, lease, access-log.
Result<void> top_keys_apply(const toml::table& root, const std::string& file, ExporterConfig& config) {
  if (auto* n = root.get("listen")) {
    RPCIE_TRY_ASSIGN(auto s, string_get(*n, file + "listen "));
    auto a = address_parse(s, config.port);
    if (!a) return fail(EINVAL, file + "listen: " + a.error().message);
    config.listen_host = a->first;
    config.port = a->second;
  }
  if (auto* n = root.get("provider")) {
    RPCIE_TRY_ASSIGN(auto s, string_get(*n, file + "provider "));
    auto p = providers::provider_parse(s);
    if (!p) return fail(EINVAL, file + "provider: unknown provider '" + s + "'");
    config.provider = *p;
  }
  if (auto* n = root.get("psk-file")) {
    RPCIE_TRY_ASSIGN(config.psk_file, string_get(*n, file + "psk-file "));
  }
  if (auto* n = root.get("access-log")) {
    RPCIE_TRY_ASSIGN(config.access_log, string_get(*n, file + "access-log "));
    if (config.access_log.empty()) return fail(EINVAL, file + "access-log: an empty path");
  }
  if (auto* n = root.get("lease")) {
    RPCIE_TRY_ASSIGN(auto s, string_get(*n, file + "lease "));
    auto d = duration_parse(s);
    if (!d || *d < std::chrono::milliseconds(100))
      return fail(EINVAL, file + "lease: '" + s + "' is not a duration of at least 100ms");
    config.lease = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  }
  return {};
}

// Each table of an array of tables (`key` = [[key]]), with its place for error messages.
template <class Apply>
Result<void> tables_each(const toml::table& root, const std::string& file, const char* key, Apply&& apply) {
  auto* n = root.get(key);
  if (!n) return {};
  auto* arr = n->as_array();
  if (!arr) return fail(EINVAL, file + key + " must be an array of tables ([[" + key + "]])");
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const std::string where = file + key + " " + std::to_string(i + 1) + ": ";
    auto* t = (*arr)[i].as_table();
    if (!t) return fail(EINVAL, where + "not a table");
    RPCIE_TRY(apply(*t, where));
  }
  return {};
}

Result<ClientConfig> client_table_parse(const toml::table& t, const std::string& where) {
  RPCIE_TRY(keys_check(t, where, "name", "psk-file"));
  auto* name = t.get("name");
  auto* psk = t.get("psk-file");
  if (!name || !psk) return fail(EINVAL, where + "needs name and psk-file");
  ClientConfig c;
  RPCIE_TRY_ASSIGN(c.name, string_get(*name, where + "name "));
  RPCIE_TRY_ASSIGN(c.psk_file, string_get(*psk, where + "psk-file "));
  return c;
}

// params = { key = value }: strings, integers and booleans, as the flag form's text.
Result<void> export_params_apply(const toml::node& params, const std::string& where, ExportConfig& e) {
  auto* pt = params.as_table();
  if (!pt) return fail(EINVAL, where + "params must be a table");
  for (auto&& [pk, pv] : *pt) {
    std::string key(pk.str());
    std::string value;
    if (auto s = pv.value_exact<std::string>())
      value = *s;
    else if (auto iv = pv.value_exact<std::int64_t>())
      value = std::to_string(*iv);
    else if (auto bv = pv.value_exact<bool>())
      value = *bv ? "yes" : "no";
    else
      return fail(EINVAL, where + "params." + key + " must be a string, integer or boolean");
    if (exporter_key(key)) return fail(EINVAL, where + "params." + key + " belongs at the export level");
    e.spec.params[key] = value;
  }
  return {};
}

Result<ExportConfig> export_table_parse(const toml::table& t, const std::string& where, const std::string& file) {
  RPCIE_TRY(keys_check(t, where, "name", "backend", "dma", "shared", "allow", "params"));
  auto* name = t.get("name");
  auto* backend = t.get("backend");
  if (!name || !backend) return fail(EINVAL, where + "needs name and backend");
  RPCIE_TRY_ASSIGN(auto ns, string_get(*name, where + "name "));
  RPCIE_TRY_ASSIGN(auto bs, string_get(*backend, where + "backend "));
  // Build the flag form and parse it: one set of rules for both.
  auto e = export_config_parse(ns + "=" + bs);
  if (!e) return fail(EINVAL, where + e.error().message);
  if (auto* dma = t.get("dma")) {
    RPCIE_TRY_ASSIGN(auto s, string_get(*dma, where + "dma "));
    auto r = exporter_key_apply(*e, "dma", s);
    if (!r) return fail(EINVAL, file + r.error().message);
  }
  if (auto* shared = t.get("shared")) {
    auto b = shared->value<bool>();
    if (!b) return fail(EINVAL, where + "shared must be true or false");
    e->shared = *b;
  }
  if (auto* allow = t.get("allow")) {
    auto* list = allow->as_array();
    if (!list) return fail(EINVAL, where + "allow must be an array of client names");
    for (auto&& item : *list) {
      auto s = item.value<std::string>();
      if (!s || !auth::client_name_valid(*s)) return fail(EINVAL, where + "allow: entries must be client names");
      e->allow.push_back(*s);
    }
  }
  if (auto* params = t.get("params")) RPCIE_TRY(export_params_apply(*params, where, *e));
  return e;
}

}  // namespace

Result<void> config_file_apply(const std::string& path, ExporterConfig& config) {
  RPCIE_TRY_ASSIGN(const toml::table root, table_load(path));
  const std::string file = path + ": ";
  RPCIE_TRY(keys_check(root, file, "listen", "provider", "psk-file", "lease", "access-log", "client", "export"));
  RPCIE_TRY(top_keys_apply(root, file, config));
  RPCIE_TRY(tables_each(root, file, "client", [&](const toml::table& t, const std::string& where) -> Result<void> {
    RPCIE_TRY_ASSIGN(auto c, client_table_parse(t, where));
    config.clients.push_back(std::move(c));
    return {};
  }));
  return tables_each(root, file, "export", [&](const toml::table& t, const std::string& where) -> Result<void> {
    RPCIE_TRY_ASSIGN(auto e, export_table_parse(t, where, file));
    config.exports.push_back(std::move(e));
    return {};
  });
}

Result<void> config_check(const ExporterConfig& config) {
  if (config.exports.empty()) return fail(EINVAL, "nothing to export: give --export or [[export]] in the config");
  std::set<std::string> names;
  for (const auto& e : config.exports)
    if (!names.insert(e.spec.name).second) return fail(EINVAL, "export '" + e.spec.name + "' is defined twice");
  std::set<std::string> clients;
  for (const auto& c : config.clients) {
    if (!auth::client_name_valid(c.name)) return fail(EINVAL, "client name '" + c.name + "' is not valid");
    if (!clients.insert(c.name).second) return fail(EINVAL, "client '" + c.name + "' is defined twice");
  }
  if (config.clients.empty() && config.psk_file.empty())
    return fail(EINVAL, "no keys: give a psk-file or [[client]] entries");
  return {};
}

}  // namespace rpcie::dev
