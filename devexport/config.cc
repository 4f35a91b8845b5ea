#include "config.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"
#include "rpcie/toml_file.hpp"
#include "rpcie/units.hpp"

namespace rpcie::dev {

namespace {

using toml_file::at;
using toml_file::keys_check;
using toml_file::string_get;

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
      e.allow_origin.push_back(e.origin);
    }
    if (e.allow.empty()) return fail(EINVAL, where + "allow needs at least one client name");
  } else if (key == "data-path") {
    auto choice = data_path_choice_parse(value);
    if (!choice) return fail(EINVAL, where + "data-path: " + choice.error().message);
    e.data_path = *choice;
  }
  return {};
}

bool exporter_key(const std::string& key) {
  return key == "dma" || key == "shared" || key == "allow" || key == "data-path";
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

DataPathChoice export_data_path_policy(const ExporterConfig& config, const ExportConfig& e) noexcept {
  return e.data_path.value_or(config.data_path);
}

bool export_config_same(const ExportConfig& a, const ExportConfig& b) noexcept {
  return a.spec.name == b.spec.name && a.spec.backend == b.spec.backend && a.spec.params == b.spec.params &&
         a.dma == b.dma && a.shared == b.shared && a.allow == b.allow && a.data_path == b.data_path;
}

namespace {

Result<std::uint32_t> count_get(const toml::node& n, const std::string& where, std::int64_t max) {
  auto v = n.value_exact<std::int64_t>();
  if (!v || *v < 1 || *v > max) return fail(EINVAL, where + "must be an integer from 1 to " + std::to_string(max));
  return static_cast<std::uint32_t>(*v);
}

// A data-path policy ("sealed", "open", "auto") from a string node.
Result<DataPathChoice> data_path_get(const toml::node& n, const std::string& where) {
  RPCIE_TRY_ASSIGN(auto s, string_get(n, where + "data-path "));
  auto choice = data_path_choice_parse(s);
  if (!choice) return fail(EINVAL, where + "data-path: " + choice.error().message);
  return *choice;
}

// A duration key ("5s", "250ms") of at least 100 ms.
Result<std::chrono::milliseconds> duration_key_get(const toml::node& n, const std::string& path,
                                                   const std::string& key) {
  RPCIE_TRY_ASSIGN(auto s, string_get(n, at(path, n) + key + " "));
  auto d = duration_parse(s);
  if (!d || *d < std::chrono::milliseconds(100))
    return fail(EINVAL, at(path, n) + key + ": '" + s + "' is not a duration of at least 100ms");
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

// listen, provider, psk-file, lease, handshake-timeout, access-log, data-path, data-nice,
// preauth-per-address, preauth-max.
Result<void> top_keys_apply(const toml::table& root, const std::string& path, ExporterConfig& config) {
  if (auto* n = root.get("listen")) {
    RPCIE_TRY_ASSIGN(auto s, string_get(*n, at(path, *n) + "listen "));
    auto a = address_parse(s, config.port);
    if (!a) return fail(EINVAL, at(path, *n) + "listen: " + a.error().message);
    config.listen_host = a->first;
    config.port = a->second;
    config.listen_origin = path + ":" + std::to_string(n->source().begin.line);
  }
  if (auto* n = root.get("provider")) {
    RPCIE_TRY_ASSIGN(auto s, string_get(*n, at(path, *n) + "provider "));
    auto p = providers::provider_parse(s);
    if (!p) return fail(EINVAL, at(path, *n) + "provider: unknown provider '" + s + "'");
    config.provider = *p;
  }
  if (auto* n = root.get("psk-file")) {
    RPCIE_TRY_ASSIGN(config.psk_file, string_get(*n, at(path, *n) + "psk-file "));
    config.psk_file_origin = path + ":" + std::to_string(n->source().begin.line);
  }
  if (auto* n = root.get("access-log")) {
    RPCIE_TRY_ASSIGN(config.access_log, string_get(*n, at(path, *n) + "access-log "));
    if (config.access_log.empty()) return fail(EINVAL, at(path, *n) + "access-log: an empty path");
    config.access_log_origin = path + ":" + std::to_string(n->source().begin.line);
  }
  if (auto* n = root.get("lease")) {
    RPCIE_TRY_ASSIGN(config.lease, duration_key_get(*n, path, "lease"));
  }
  if (auto* n = root.get("handshake-timeout")) {
    RPCIE_TRY_ASSIGN(config.handshake_timeout, duration_key_get(*n, path, "handshake-timeout"));
  }
  if (auto* n = root.get("data-path")) {
    RPCIE_TRY_ASSIGN(config.data_path, data_path_get(*n, at(path, *n)));
  }
  if (auto* n = root.get("preauth-per-address")) {
    RPCIE_TRY_ASSIGN(config.preauth_per_address, count_get(*n, at(path, *n) + "preauth-per-address ", 4096));
  }
  if (auto* n = root.get("data-nice")) {
    auto v = n->value_exact<std::int64_t>();
    if (!v || *v < -20 || *v > 19) return fail(EINVAL, at(path, *n) + "data-nice must be an integer from -20 to 19");
    config.data_nice = static_cast<int>(*v);
  }
  if (auto* n = root.get("preauth-max")) {
    RPCIE_TRY_ASSIGN(config.preauth_max, count_get(*n, at(path, *n) + "preauth-max ", 65536));
  }
  return {};
}

// Each table of an array of tables (`key` = [[key]]), with its place for error messages.
template <class Apply>
Result<void> tables_each(const toml::table& root, const std::string& path, const char* key, Apply&& apply) {
  auto* n = root.get(key);
  if (!n) return {};
  auto* arr = n->as_array();
  if (!arr) return fail(EINVAL, at(path, *n) + key + " must be an array of tables ([[" + key + "]])");
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const auto& item = (*arr)[i];
    auto* t = item.as_table();
    if (!t) return fail(EINVAL, at(path, item) + key + " " + std::to_string(i + 1) + ": not a table");
    RPCIE_TRY(apply(*t, path + ":" + std::to_string(t->source().begin.line), key + (" " + std::to_string(i + 1))));
  }
  return {};
}

// `origin` is "FILE:LINE" of the table, `what` its name in messages ("client 2").
Result<ClientConfig> client_table_parse(const toml::table& t, const std::string& path, const std::string& origin,
                                        const std::string& what) {
  RPCIE_TRY(keys_check(t, path, what + ": ", "name", "psk-file"));
  auto* name = t.get("name");
  auto* psk = t.get("psk-file");
  if (!name || !psk) return fail(EINVAL, origin + ": " + what + ": needs name and psk-file");
  ClientConfig c;
  c.origin = origin;
  RPCIE_TRY_ASSIGN(c.name, string_get(*name, at(path, *name) + what + ": name "));
  RPCIE_TRY_ASSIGN(c.psk_file, string_get(*psk, at(path, *psk) + what + ": psk-file "));
  return c;
}

// params = { key = value }: strings, integers and booleans, as the flag form's text.
Result<void> export_params_apply(const toml::node& params, const std::string& path, const std::string& what,
                                 ExportConfig& e) {
  auto* pt = params.as_table();
  if (!pt) return fail(EINVAL, at(path, params) + what + "params must be a table");
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
      return fail(EINVAL, at(path, pv) + what + "params." + key + " must be a string, integer or boolean");
    if (exporter_key(key)) return fail(EINVAL, at(path, pv) + what + "params." + key + " belongs at the export level");
    e.spec.params[key] = value;
  }
  return {};
}

Result<void> export_allow_apply(const toml::node& allow, const std::string& path, const std::string& what,
                                ExportConfig& e) {
  auto* list = allow.as_array();
  if (!list) return fail(EINVAL, at(path, allow) + what + "allow must be an array of client names");
  for (auto&& item : *list) {
    auto s = item.value<std::string>();
    if (!s || !auth::client_name_valid(*s))
      return fail(EINVAL, at(path, item) + what + "allow: entries must be client names");
    e.allow.push_back(*s);
    e.allow_origin.push_back(path + ":" + std::to_string(item.source().begin.line));
  }
  return {};
}

Result<ExportConfig> export_table_parse(const toml::table& t, const std::string& path, const std::string& origin,
                                        const std::string& table) {
  std::string what = table + ": ";
  RPCIE_TRY(keys_check(t, path, what, "name", "backend", "dma", "shared", "allow", "data-path", "params"));
  auto* name = t.get("name");
  auto* backend = t.get("backend");
  if (!name || !backend) return fail(EINVAL, origin + ": " + what + "needs name and backend");
  RPCIE_TRY_ASSIGN(auto ns, string_get(*name, at(path, *name) + what + "name "));
  RPCIE_TRY_ASSIGN(auto bs, string_get(*backend, at(path, *backend) + what + "backend "));
  // Build the flag form and parse it: one set of rules for both.
  auto e = export_config_parse(ns + "=" + bs);
  if (!e) return fail(EINVAL, at(path, *name) + what + e.error().message);
  e->origin = origin;
  // An allow list in the backend string ("edu,allow=a:b") was given on the backend's line.
  e->allow_origin.assign(e->allow.size(), path + ":" + std::to_string(backend->source().begin.line));
  if (auto* dma = t.get("dma")) {
    RPCIE_TRY_ASSIGN(auto s, string_get(*dma, at(path, *dma) + what + "dma "));
    auto r = exporter_key_apply(*e, "dma", s);
    if (!r) return fail(EINVAL, at(path, *dma) + r.error().message);
  }
  if (auto* shared = t.get("shared")) {
    auto b = shared->value<bool>();
    if (!b) return fail(EINVAL, at(path, *shared) + what + "shared must be true or false");
    e->shared = *b;
  }
  if (auto* dp = t.get("data-path")) {
    RPCIE_TRY_ASSIGN(e->data_path, data_path_get(*dp, at(path, *dp) + what));
  }
  if (auto* allow = t.get("allow")) RPCIE_TRY(export_allow_apply(*allow, path, what, *e));
  if (auto* params = t.get("params")) RPCIE_TRY(export_params_apply(*params, path, what, *e));
  return e;
}

}  // namespace

namespace {

Result<void> config_table_apply(const toml::table& root, const std::string& path, ExporterConfig& config) {
  RPCIE_TRY(keys_check(root, path, "", "listen", "provider", "psk-file", "lease", "handshake-timeout", "access-log",
                       "data-path", "data-nice", "preauth-per-address", "preauth-max", "client", "export"));
  RPCIE_TRY(top_keys_apply(root, path, config));
  RPCIE_TRY(tables_each(root, path, "client",
                        [&](const toml::table& t, const std::string& origin, const std::string& what) -> Result<void> {
                          RPCIE_TRY_ASSIGN(auto c, client_table_parse(t, path, origin, what));
                          config.clients.push_back(std::move(c));
                          return {};
                        }));
  return tables_each(root, path, "export",
                     [&](const toml::table& t, const std::string& origin, const std::string& what) -> Result<void> {
                       RPCIE_TRY_ASSIGN(auto e, export_table_parse(t, path, origin, what));
                       config.exports.push_back(std::move(e));
                       return {};
                     });
}

}  // namespace

Result<void> config_file_apply(const std::string& path, ExporterConfig& config) {
  RPCIE_TRY_ASSIGN(const toml::table root, toml_file::file_load(path));
  return config_table_apply(root, path, config);
}

Result<void> config_text_apply(std::string_view text, const std::string& path, ExporterConfig& config) {
  RPCIE_TRY_ASSIGN(const toml::table root, toml_file::text_load(text, path));
  return config_table_apply(root, path, config);
}

Result<void> config_check(const ExporterConfig& config) {
  if (config.exports.empty()) return fail(EINVAL, "nothing to export: give --export or [[export]] in the config");
  std::map<std::string, std::string> names;  // export name -> origin
  for (const auto& e : config.exports) {
    auto [it, fresh] = names.emplace(e.spec.name, e.origin);
    if (!fresh)
      return fail(EINVAL, e.origin + ": export '" + e.spec.name + "' is defined twice (first at " + it->second + ")");
  }
  std::map<std::string, std::string> clients;  // client name -> origin
  for (const auto& c : config.clients) {
    if (!auth::client_name_valid(c.name))
      return fail(EINVAL, c.origin + ": client name '" + log_escape(c.name) + "' is not valid");
    auto [it, fresh] = clients.emplace(c.name, c.origin);
    if (!fresh)
      return fail(EINVAL, c.origin + ": client '" + c.name + "' is defined twice (first at " + it->second + ")");
  }
  for (const auto& e : config.exports) {
    for (std::size_t i = 0; i < e.allow.size(); ++i) {
      if (clients.count(e.allow[i])) continue;
      const std::string& where = i < e.allow_origin.size() ? e.allow_origin[i] : e.origin;
      return fail(EINVAL, where + ": export '" + e.spec.name + "': allow: client '" + e.allow[i] +
                              "' has no [[client]] entry with a key of its own (the shared key is accepted under "
                              "any such name, so the allow list would not restrict anything): add one");
    }
  }
  if (config.clients.empty() && config.psk_file.empty())
    return fail(EINVAL, "no keys: give a psk-file or [[client]] entries");
  return {};
}

}  // namespace rpcie::dev
