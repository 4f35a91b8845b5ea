#include "attach_manager.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "dev_links.hpp"
#include "device_metrics.hpp"
#include "rpcie/client.hpp"
#include "rpcie/control.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"

namespace rpcie::hostd {

using nlohmann::json;

namespace {

json counters_of(const client::AttachmentStats& s) {
  return {{"config_reads", s.config_reads},
          {"config_writes", s.config_writes},
          {"mmio_reads", s.mmio_reads},
          {"mmio_writes", s.mmio_writes},
          {"bar_bytes_read", s.bar_bytes_read},
          {"bar_bytes_written", s.bar_bytes_written},
          {"posted_write_errors", s.posted_write_errors},
          {"messages_refused", s.messages_refused},
          {"messages_replayed", s.messages_replayed},
          {"interrupts", s.interrupts},
          {"window_bytes_pushed", s.window_bytes_pushed},
          {"operations_failed", s.operations_failed},
          {"heartbeats", s.heartbeats},
          {"resumes", s.resumes}};
}

}  // namespace

bool peer_may_use(const ucred& peer, gid_t group, mode_t mode) {
  if (peer.uid == 0 || (mode & 0006) == 0006) return true;
  if ((mode & 0060) != 0060) return false;
  if (peer.gid == group) return true;
  std::ifstream status("/proc/" + std::to_string(peer.pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Groups:", 0) != 0) continue;
    std::istringstream groups(line.substr(7));
    for (gid_t g; groups >> g;)
      if (g == group) return true;
  }
  return false;
}

AttachManager::AttachManager(const AttachContext& context, AttachPolicy policy, Tree& tree, std::string state_path)
    : context_(context), policy_(std::move(policy)), tree_(tree), state_path_(std::move(state_path)) {}

AttachManager::~AttachManager() {
  restore_stop();
  std::lock_guard g(rings_lock_);
  for (auto& ring : rings_) ring->stop();
}

ControlServer::Reply AttachManager::request(const json& r, const ucred& peer) {
  const auto op = r["op"].get<std::string>();
  if (op == "mmio_ring") return mmio_ring(r, peer);
  if (op == "attach") return {.answer = attach(r, peer.uid)};
  if (op == "detach") return {.answer = detach(r, peer.uid)};
  if (op == "status") {
    const auto t = r.find("device_telemetry");
    if (t != r.end() && !t->is_boolean())
      return {.answer = {{"error", "status: \"device_telemetry\" must be true or false"}, {"errno", EINVAL}}};
    return {.answer = status(peer.uid, t != r.end() && t->get<bool>())};
  }
  return {.answer = {{"error", "unknown op '" + log_escape(op.substr(0, 64)) + "'"}, {"errno", EINVAL}}};
}

ControlServer::Reply AttachManager::mmio_ring(const json& r, const ucred& peer) {
  const auto refuse = [](int code, const std::string& why) {
    return ControlServer::Reply{.answer = {{"error", why}, {"errno", code}}};
  };
  if (!r.contains("bdf") || !r["bdf"].is_string()) return refuse(EINVAL, "mmio_ring needs \"bdf\"");
  const auto bdf = r["bdf"].get<std::string>();
  if (!peer_may_use(peer, context_.group, context_.mode))
    return refuse(EACCES, "the requesting process may not use the device's files");
  std::shared_ptr<RemoteDevice> device;
  for (const auto& v : tree_.devices())
    if (v.sysfs.size() > bdf.size() && v.sysfs.ends_with("/" + bdf)) device = v.device;
  if (!device) return refuse(ENOENT, "no attached device " + bdf);
  auto ring = MmioRingServer::create(device, context_.timeout);
  if (!ring) return ControlServer::Reply{.answer = control::error_answer(ring.error())};
  MmioRingServer* server = ring->get();
  RPCIE_LOG_INFO("hostd", "{}: MMIO ring for process {} (uid {})", bdf, peer.pid, peer.uid);
  std::lock_guard g(rings_lock_);
  std::erase_if(rings_, [](const auto& s) { return s->done(); });
  rings_.push_back(std::move(*ring));
  return ControlServer::Reply{.answer = {{"ring_bytes", server->bytes()}, {"timeout_ms", context_.timeout.count()}},
                              .fds = {server->memfd()},
                              .keep = [server](Fd connection) { server->serve(std::move(connection)); }};
}

json AttachManager::attach(const json& r, uid_t peer) {
  auto p = attach_request_parse(r, policy_);
  if (!p) return control::error_answer(p.error());
  const bool persist = r.value("persist", false);
  // Held across the attach: the entry checked absent is the one written.
  std::unique_lock persisting(persist_lock_, std::defer_lock);
  if (persist) {
    persisting.lock();
    if (auto ok = persist_check(*p); !ok) return control::error_answer(ok.error());
  }
  if (peer != 0 && !policy_.remotes.empty() &&
      std::find(policy_.remotes.begin(), policy_.remotes.end(), std::pair{p->host, p->port}) == policy_.remotes.end())
    return control::error_answer(
        Error{ErrorDomain::posix, EPERM,
              p->host + ":" + std::to_string(p->port) +
                  " is not an exporter this hostd lets non-root users attach from (--allow-remote)"});
  const unsigned index = tree_.index_reserve();
  auto claim = owners_.claim(index, peer, *p);
  if (!claim) {
    tree_.index_release(index);
    return control::error_answer(claim.error());
  }
  const auto undo = [&] {
    owners_.release(index, *claim);
    tree_.index_release(index);
  };
  auto dev = RemoteDevice::attach(*p, context_, index, Deadline::after(context_.attach_timeout));
  if (!dev) {
    undo();
    return control::error_answer(dev.error());
  }
  auto pub = tree_.publish(*dev);
  if (!pub) {
    (void)(*dev)->detach(Deadline::after(context_.timeout));
    undo();
    return control::error_answer(pub.error());
  }
  RPCIE_LOG_INFO("hostd", "{}: attached for uid {}", pub->name, peer);
  {
    std::lock_guard g(state_lock_);
    held_[index] = StateEntry{index, peer, *p};
    state_save_locked();
  }
  json answer{{"device", pub->name}, {"path", pub->path}, {"sysfs", pub->sysfs}};
  if (persist) return persist_add(std::move(answer), r, *p, index, peer);
  return answer;
}

json AttachManager::detach(const json& r, uid_t peer) {
  const bool all = r.value("all", false);
  if (!all && !(r.contains("device") && r["device"].is_string()))
    return {{"error", "detach needs \"device\" or \"all\""}, {"errno", EINVAL}};
  // One detach at a time: between a device's ownership check and its withdraw, its name
  // cannot be withdrawn and given to another user's attach.
  std::lock_guard one_at_a_time(detach_lock_);
  if (r.value("persist", false)) {
    // The entry goes first: a removal that fails leaves the device attached.
    if (all) return {{"error", "detach --persist needs a device name"}, {"errno", EINVAL}};
    std::lock_guard persisting(persist_lock_);
    if (auto removed = persist_remove(r["device"].get<std::string>(), peer); !removed)
      return control::error_answer(removed.error());
  }
  std::vector<std::pair<std::string, unsigned>> targets;  // name, index
  std::uint64_t kept = 0;
  std::vector<std::string> cancelled;  // pending restores, which are not in the tree yet
  if (all) {
    cancelled = pending_cancel_all(peer);
    for (const auto& v : tree_.devices()) {
      if (owner_match(peer, owners_.owner(v.device->index())))
        targets.emplace_back(v.name, v.device->index());
      else
        ++kept;
    }
  } else {
    const auto name = r["device"].get<std::string>();
    for (const auto& v : tree_.devices())
      if (v.name == name) targets.emplace_back(v.name, v.device->index());
    if (targets.empty()) {
      auto c = pending_cancel(name, peer);
      if (!c) return control::error_answer(c.error());
      if (*c) return {{"detached", json::array({name})}};
      return {{"error", "no device " + log_escape(name.substr(0, 64))}, {"errno", ENOENT}};
    }
    if (auto allowed = owners_.detach_check(peer, name, targets[0].second); !allowed)
      return control::error_answer(allowed.error());
  }
  json done = json::array();
  for (const auto& n : cancelled) done.push_back(n);
  std::string failures;
  for (const auto& [n, index] : targets) {
    const auto serial = owners_.serial(index);
    auto w = tree_.withdraw(n, Deadline::after(context_.timeout));
    if (serial) owners_.release(index, *serial);
    {
      std::lock_guard g(state_lock_);
      held_.erase(index);
      state_save_locked();
    }
    // The device is gone from the tree either way; a failed goodbye is only reported.
    if (w || w.error().code != ENOENT) done.push_back(n);
    if (!w) failures += (failures.empty() ? "" : "; ") + n + ": " + w.error().message;
  }
  if (done.empty() && !failures.empty()) return {{"error", failures}, {"errno", ENOENT}};
  json out{{"detached", done}};
  if (all) out["kept"] = kept;  // other users' attachments, which only they or root detach
  if (!failures.empty()) out["warning"] = failures;
  return out;
}

std::string AttachManager::metrics() const {
  std::vector<DeviceSample> samples;
  for (const auto& v : tree_.devices()) samples.push_back({v.name, v.device->params(), v.device->status()});
  return metrics_text(samples);
}

json AttachManager::status(uid_t peer, bool telemetry) const {
  // One budget for all devices: a stalled exporter costs the answer this much at most.
  const Deadline telemetry_until = Deadline::after(kTelemetryBudget);
  json list = json::array();
  for (const auto& v : tree_.devices()) {
    const auto owner = owners_.owner(v.device->index());
    if (!owner_match(peer, owner)) {
      // Another user's: that it exists (its name is in the device directory anyway), no more.
      list.push_back({{"device", v.name}, {"hidden", true}});
      continue;
    }
    const auto s = v.device->status();
    const auto& p = v.device->params();
    const auto& d = v.device->desc();
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", d.vendor, d.device);
    json e{{"device", v.name},
           {"uid", owner ? json(*owner) : json(nullptr)},
           {"path", v.path},
           {"sysfs", v.sysfs},
           {"exporter", p.host + ":" + std::to_string(p.port)},
           {"export", p.export_name},
           {"id", id},
           {"state", link_state_name(s.state)},
           {"provider", s.provider},
           {"data_path", data_path_name(s.data_path)},
           {"generation", s.generation},
           {"losses", s.losses},
           {"dma_window", p.window_size},
           {"dma", v.device->window_path()},
           {"counters", counters_of(s.stats)},
           {"latency", latency_json(s)}};
    if (telemetry && s.state == LinkState::connected) {
      auto a = v.device->link();
      auto t = a ? (*a)->device_telemetry(telemetry_until) : Result<client::DeviceTelemetry>(tl::unexpected(a.error()));
      e["device_telemetry"] = t ? telemetry_json(*t) : json{{"error", t.error().describe()}};
    }
    // Only while it explains something: a connected device's last loss is history.
    if (s.state != LinkState::connected && !s.last_error.empty()) e["error"] = s.last_error;
    list.push_back(std::move(e));
  }
  // What the state file lists and is not back yet: state "restoring", with why the last try failed.
  std::lock_guard g(state_lock_);
  for (const auto& [index, p] : pending_) {
    if (p.cancelled) continue;
    const std::string name = "rpcie" + std::to_string(index);
    if (!owner_match(peer, p.entry.uid)) {
      list.push_back({{"device", name}, {"hidden", true}});
      continue;
    }
    const auto& prm = p.entry.params;
    json e{{"device", name},
           {"uid", p.entry.uid},
           {"exporter", prm.host + ":" + std::to_string(prm.port)},
           {"export", prm.export_name},
           {"state", "restoring"},
           {"dma_window", prm.window_size}};
    if (!p.last_error.empty()) e["error"] = p.last_error;
    list.push_back(std::move(e));
  }
  return {{"attachments", list}};
}

}  // namespace rpcie::hostd
