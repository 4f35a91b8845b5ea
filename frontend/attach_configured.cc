// AttachManager's configured attachments: the configuration file's [[attach]] entries
// (hostd_config.hpp) taken on at start and at a reload (attach_manager.hpp,
// configured_apply), and the back-off of every pending entry's retries.
#include <algorithm>
#include <random>

#include "attach_manager.hpp"
#include "rpcie/log.hpp"

namespace rpcie::hostd {

namespace {

// `d` varied by up to +-25%.
std::chrono::milliseconds jittered(std::chrono::milliseconds d) {
  thread_local std::minstd_rand random{std::random_device{}()};
  std::uniform_int_distribution<std::int64_t> spread(-d.count() / 4, d.count() / 4);
  return d + std::chrono::milliseconds(spread(random));
}

}  // namespace

std::chrono::milliseconds AttachManager::retry_delay_next(Pending& p) {
  const auto wait = p.configured ? jittered(p.backoff) : p.backoff;
  const auto max = p.configured ? kConfiguredBackoffMax : std::chrono::milliseconds(kRestoreBackoffMax);
  p.backoff = std::min<std::chrono::milliseconds>(p.backoff * 2, max);
  return wait;
}

void AttachManager::config_source_set(ConfigSource source) {
  config_source_ = std::move(source);
  config_source_known_ = true;
}

void AttachManager::configured_apply_locked(const std::vector<ConfiguredAttach>& configured) {
  std::vector<AttachParams> present;
  for (const auto& [index, h] : held_) present.push_back(h.params);
  for (auto& item : pending_) {
    Pending& p = item.second;  // not a structured binding: lambdas capture it
    if (p.cancelled) continue;
    present.push_back(p.entry.params);
    // Restored from the state file and configured too: retried the configured way.
    const auto& target = p.entry.params;
    const bool listed = std::any_of(configured.begin(), configured.end(), [&](const ConfiguredAttach& c) {
      return c.host == target.host && c.port == target.port && c.export_name == target.export_name;
    });
    if (listed && !p.configured) {
      p.configured = true;
      p.backoff = kConfiguredBackoffFirst;
    }
  }
  for (const auto& c : configured_missing(configured, present)) {
    auto params = configured_params(c, policy_);
    if (!params) {
      RPCIE_LOG_ERROR("hostd", "{}; not attached", params.error().message);
      continue;
    }
    // An entry a user persisted is held to what that user may attach now (--allow-remote).
    if (c.owner != 0 && !policy_.remotes.empty() &&
        std::find(policy_.remotes.begin(), policy_.remotes.end(), std::pair{params->host, params->port}) ==
            policy_.remotes.end()) {
      RPCIE_LOG_ERROR("hostd", "{}: not attached: {}:{} is not an exporter uid {} may attach from (--allow-remote)",
                      c.origin, params->host, params->port, c.owner);
      continue;
    }
    unsigned index = 0;
    if (c.device && tree_.index_reserve_at(*c.device)) {
      index = *c.device;
    } else {
      index = tree_.index_reserve();
      if (c.device) RPCIE_LOG_WARN("hostd", "{}: rpcie{} is taken; attaching as rpcie{}", c.origin, *c.device, index);
    }
    auto claim = owners_.claim(index, c.owner, *params);
    if (!claim) {
      tree_.index_release(index);
      RPCIE_LOG_ERROR("hostd", "{}: not attached: {}", c.origin, claim.error().describe());
      continue;
    }
    RPCIE_LOG_INFO("hostd", "rpcie{}: attaching {} on {}:{} (uid {}) from {}", index, params->export_name, params->host,
                   params->port, c.owner, c.origin);
    Pending p;
    p.entry = StateEntry{index, c.owner, *params};
    p.serial = *claim;
    p.next_try = std::chrono::steady_clock::now();
    p.backoff = kConfiguredBackoffFirst;
    p.configured = true;
    pending_.emplace(index, std::move(p));
  }
  state_save_locked();
}

Result<std::size_t> AttachManager::config_reload() {
  if (!config_source_known_) return fail(EINVAL, "hostd has no configuration source");
  RPCIE_TRY_ASSIGN(auto config, hostd_config_load(config_source_));
  for (const auto& c : config.attaches) RPCIE_TRY(configured_params(c, policy_));  // all or nothing
  std::lock_guard g(state_lock_);
  const auto before = pending_.size();
  configured_apply_locked(config.attaches);
  restorer_ensure_locked();
  RPCIE_LOG_INFO("hostd", "configuration reloaded: {} new [[attach]] entries", pending_.size() - before);
  return pending_.size() - before;
}

}  // namespace rpcie::hostd
