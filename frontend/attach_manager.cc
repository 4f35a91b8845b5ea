#include "attach_manager.hpp"

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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
          {"interrupts", s.interrupts}};
}

}  // namespace

Result<AttachParams> attach_request_parse(const json& r, std::size_t window_default) {
  if (!r.contains("host") || !r["host"].is_string() || !r.contains("export") || !r["export"].is_string())
    return fail(EINVAL, "attach needs \"host\" and \"export\"");
  AttachParams p;
  p.host = r["host"].get<std::string>();
  p.export_name = r["export"].get<std::string>();
  p.port = r.value("port", kDefaultPort);
  p.window_size = r.value("dma_window", static_cast<std::uint64_t>(window_default));
  if (p.port == 0) return fail(EINVAL, "port 0");
  return p;
}

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

AttachManager::AttachManager(const AttachContext& context, std::size_t window_default, Tree& tree)
    : context_(context), window_default_(window_default), tree_(tree) {}

AttachManager::~AttachManager() {
  std::lock_guard g(rings_lock_);
  for (auto& ring : rings_) ring->stop();
}

ControlServer::Reply AttachManager::request(const json& r, const ucred& peer) {
  if (r["op"].get<std::string>() == "mmio_ring") return mmio_ring(r, peer);
  return ControlServer::Reply{.answer = handle(r)};
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

json AttachManager::handle(const json& r) {
  const auto op = r["op"].get<std::string>();
  if (op == "attach") return attach(r);
  if (op == "detach") return detach(r);
  if (op == "status") return status();
  return {{"error", "unknown op '" + op + "'"}, {"errno", EINVAL}};
}

json AttachManager::attach(const json& r) {
  auto p = attach_request_parse(r, window_default_);
  if (!p) return control::error_answer(p.error());
  const unsigned index = tree_.index_reserve();
  auto dev = RemoteDevice::attach(*p, context_, index, Deadline::after(context_.timeout));
  if (!dev) {
    tree_.index_release(index);
    return control::error_answer(dev.error());
  }
  auto pub = tree_.publish(*dev);
  if (!pub) {
    (void)(*dev)->detach(Deadline::after(context_.timeout));
    tree_.index_release(index);
    return control::error_answer(pub.error());
  }
  return {{"device", pub->name}, {"path", pub->path}, {"sysfs", pub->sysfs}};
}

json AttachManager::detach(const json& r) {
  std::vector<std::string> names;
  if (r.value("all", false)) {
    names = tree_.names();
  } else if (r.contains("device") && r["device"].is_string()) {
    names.push_back(r["device"].get<std::string>());
  } else {
    return {{"error", "detach needs \"device\" or \"all\""}, {"errno", EINVAL}};
  }
  json done = json::array();
  std::string failures;
  for (const auto& n : names) {
    auto w = tree_.withdraw(n, Deadline::after(context_.timeout));
    // The device is gone from the tree either way; a failed goodbye is only reported.
    if (w || w.error().code != ENOENT) done.push_back(n);
    if (!w) failures += (failures.empty() ? "" : "; ") + n + ": " + w.error().message;
  }
  if (done.empty() && !failures.empty()) return {{"error", failures}, {"errno", ENOENT}};
  json out{{"detached", done}};
  if (!failures.empty()) out["warning"] = failures;
  return out;
}

json AttachManager::status() const {
  json list = json::array();
  for (const auto& v : tree_.devices()) {
    const auto s = v.device->status();
    const auto& p = v.device->params();
    const auto& d = v.device->desc();
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", d.vendor, d.device);
    json e{{"device", v.name},
           {"path", v.path},
           {"sysfs", v.sysfs},
           {"exporter", p.host + ":" + std::to_string(p.port)},
           {"export", p.export_name},
           {"id", id},
           {"state", link_state_name(s.state)},
           {"provider", s.provider},
           {"generation", s.generation},
           {"losses", s.losses},
           {"dma_window", p.window_size},
           {"dma", v.device->window_path()},
           {"counters", counters_of(s.stats)}};
    if (!s.last_error.empty()) e["error"] = s.last_error;
    list.push_back(std::move(e));
  }
  return {{"attachments", list}};
}

}  // namespace rpcie::hostd
