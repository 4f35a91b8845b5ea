// AttachManager's --persist: `rpcie attach --persist` writes the attachment's [[attach]]
// entry into the configuration file hostd was started with, `rpcie detach --persist` removes
// it (attach_manager.hpp; the file edits are config_edit.hpp's). hostd writes, so the CLI
// needs no access to the file; who may persist follows the control socket's rules: whoever
// may attach, and for a removal whoever may detach the device (its owner or root).
#include <algorithm>
#include <cerrno>

#include "attach_manager.hpp"
#include "config_edit.hpp"
#include "rpcie/control.hpp"
#include "rpcie/log.hpp"

namespace rpcie::hostd {

using nlohmann::json;

namespace {

std::string target_text(const AttachParams& p) {
  return p.export_name + " on " + p.host + ":" + std::to_string(p.port);
}

// FILE and LINE of an origin "FILE:LINE".
std::pair<std::string, unsigned> origin_split(const std::string& origin) {
  const auto colon = origin.rfind(':');
  return {origin.substr(0, colon), static_cast<unsigned>(std::stoul(origin.substr(colon + 1)))};
}

}  // namespace

Result<void> AttachManager::persist_check(const AttachParams& p) {
  if (!config_source_known_) return fail(EINVAL, "this hostd has no configuration file to persist to");
  RPCIE_TRY(config_writable(config_source_.file));
  RPCIE_TRY_ASSIGN(auto config, hostd_config_load(config_source_));
  for (const auto& c : config.attaches)
    if (c.host == p.host && c.port == p.port && c.export_name == p.export_name)
      return fail(EEXIST, target_text(p) + " is configured already (" + c.origin + ")");
  return {};
}

json AttachManager::persist_add(json answer, const json& request, const AttachParams& p, unsigned index, uid_t peer) {
  ConfiguredAttach c;
  c.host = p.host;
  c.port = p.port;
  c.export_name = p.export_name;
  if (request.contains("dma_window")) c.dma_window = p.window_size;
  c.device = index;
  c.data_path = p.data_path;
  c.owner = peer;
  auto written = config_table_append(config_source_.file, configured_text(c));
  if (written) {
    RPCIE_LOG_INFO("hostd", "rpcie{}: {} added to {}", index, target_text(p), config_source_.file);
    answer["persisted"] = config_source_.file;
    return answer;
  }
  // Nothing half-done: the attachment goes too.
  const std::string name = answer["device"].get<std::string>();
  const auto serial = owners_.serial(index);
  (void)tree_.withdraw(name, Deadline::after(context_.timeout));
  if (serial) owners_.release(index, *serial);
  {
    std::lock_guard g(state_lock_);
    held_.erase(index);
    state_save_locked();
  }
  RPCIE_LOG_WARN("hostd", "{}: detached again: {}", name, written.error().message);
  return control::error_answer(written.error());
}

Result<void> AttachManager::persist_remove(const std::string& name, uid_t peer) {
  if (!config_source_known_) return fail(EINVAL, "this hostd has no configuration file to persist to");
  std::optional<std::pair<unsigned, AttachParams>> target;
  for (const auto& v : tree_.devices())
    if (v.name == name) target.emplace(v.device->index(), v.device->params());
  if (!target) {
    std::lock_guard g(state_lock_);
    for (const auto& [index, p] : pending_)
      if (!p.cancelled && "rpcie" + std::to_string(index) == name) target.emplace(index, p.entry.params);
  }
  if (!target) return fail(ENOENT, "no device " + log_escape(name.substr(0, 64)));
  RPCIE_TRY(owners_.detach_check(peer, name, target->first));
  RPCIE_TRY_ASSIGN(auto config, hostd_config_load(config_source_));
  const auto& p = target->second;
  auto entry = std::find_if(config.attaches.begin(), config.attaches.end(), [&](const ConfiguredAttach& c) {
    return c.host == p.host && c.port == p.port && c.export_name == p.export_name;
  });
  if (entry == config.attaches.end())
    return fail(ENOENT, name + " (" + target_text(p) + ") has no [[attach]] entry in the configuration");
  const auto [file, line] = origin_split(entry->origin);
  RPCIE_TRY(config_writable(file));
  RPCIE_TRY(config_table_remove(file, line));
  RPCIE_LOG_INFO("hostd", "{}: {} removed from {}", name, target_text(p), file);
  return {};
}

}  // namespace rpcie::hostd
