#include "allocator.hpp"

#include <cerrno>
#include <set>

#include "exporter_probe.hpp"
#include "pod_resources.hpp"
#include "rpcie/log.hpp"

namespace rpcie::k8s {
namespace {

bool attachment_of(const HostdAttachment& a, const PoolDevice& d) {
  return a.exporter == d.exporter() && a.export_name == d.export_name;
}

}  // namespace

void Allocator::holding_drop(const std::string& id, const Holding& h, const char* why) {
  // As long as an attach may take: hostd waits for the exporter's answer (its --timeout).
  auto r = hostd_detach(o_.control, h.hostd_device, Deadline::after(o_.attach_timeout));
  if (!r && r.error().code != ENOENT) {
    log(LogLevel::error, kLog, "{}: detach of {} ({}) failed: {}", id, h.hostd_device, why, r.error().describe());
    return;  // still ours: the next check tries again
  }
  log(LogLevel::info, kLog, "{}: {} detached ({})", id, h.hostd_device, why);
  pool_.holding_set(id, std::nullopt);
}

Result<Holding> Allocator::device_attach(const PoolDevice& d) {
  auto a = hostd_attach(o_.control, d, Deadline::after(o_.attach_timeout));
  if (!a) {
    const bool busy = a.error().code == EBUSY;
    pool_.health_set(d.id, false, (busy ? "held by another client: " : "attach failed: ") + a.error().describe());
    log(LogLevel::warn, kLog, "{}: attach of {} on {} failed: {}", d.id, d.export_name, d.exporter(),
        a.error().describe());
    return tl::unexpected(a.error());
  }
  Holding h{a->device, a->sysfs, std::chrono::steady_clock::now()};
  pool_.holding_set(d.id, h);
  pool_.health_set(d.id, true, "");
  log(LogLevel::info, kLog, "{}: attached as {} ({})", d.id, h.hostd_device, h.sysfs);
  return h;
}

Result<std::vector<Holding>> Allocator::allocate(const std::vector<std::string>& ids) {
  std::lock_guard g(ops_);
  std::vector<std::pair<std::string, Holding>> done;
  for (const auto& id : ids) {
    const PoolDevice* d = pool_.device_find(id);
    Result<Holding> h = fail(ENOENT, "no device '" + id + "' in the pool");
    if (d) {
      if (auto v = pool_.view(id); v && v->holding) holding_drop(id, *v->holding, "allocated again");
      h = device_attach(*d);
    }
    if (!h) {
      for (const auto& [done_id, held] : done) holding_drop(done_id, held, "the rest of the allocation failed");
      return tl::unexpected(h.error());
    }
    done.emplace_back(id, *h);
  }
  std::vector<Holding> out;
  for (auto& [id, h] : done) out.push_back(std::move(h));
  return out;
}

void Allocator::adopt() {
  std::lock_guard g(ops_);
  auto status = hostd_status(o_.control, Deadline::after(o_.call_timeout));
  if (!status) {
    log(LogLevel::warn, kLog, "hostd status: {}: no attachments adopted", status.error().describe());
    return;
  }
  for (const auto& d : pool_.devices()) {
    for (const auto& a : *status) {
      if (!attachment_of(a, d) || a.sysfs.empty()) continue;
      pool_.holding_set(d.id, Holding{a.device, a.sysfs, std::chrono::steady_clock::now()});
      log(LogLevel::info, kLog, "{}: adopted hostd's {} (released when no container has it)", d.id, a.device);
      break;
    }
  }
}

void Allocator::held_health_update() {
  std::lock_guard g(ops_);  // an attach in progress would be missing from the status
  auto status = hostd_status(o_.control, Deadline::after(o_.call_timeout));
  for (const auto& v : pool_.snapshot()) {
    if (!v.holding) continue;
    if (!status) {
      pool_.health_set(v.id, false, "hostd: " + status.error().describe());
      continue;
    }
    const HostdAttachment* found = nullptr;
    for (const auto& a : *status)
      if (a.device == v.holding->hostd_device) found = &a;
    if (!found) {
      pool_.health_set(v.id, false, "hostd no longer lists " + v.holding->hostd_device);
      pool_.holding_set(v.id, std::nullopt);
      continue;
    }
    const bool ok = found->state == "connected";
    pool_.health_set(v.id, ok, found->device + " " + found->state + (found->error.empty() ? "" : ": " + found->error));
  }
}

void Allocator::free_health_update() {
  std::vector<PoolDevice> free;
  for (const auto& v : pool_.snapshot())
    if (!v.holding) free.push_back(*pool_.device_find(v.id));
  if (free.empty()) return;
  const auto avail = pool_probe(free, o_.probe, o_.call_timeout);
  for (const auto& d : free) {
    // Held by now (an Allocate ran meanwhile): its health is its attachment's.
    if (auto v = pool_.view(d.id); !v || v->holding) continue;
    const auto& a = avail.at(d.id);
    pool_.health_set(d.id, a.available, a.why);
  }
}

void Allocator::unused_release() {
  if (o_.pod_resources.empty()) return;
  auto in_use = pod_devices_in_use(o_.pod_resources, o_.resource_name, Deadline::after(o_.call_timeout));
  if (!in_use) {
    static LogLimiter limiter;
    if (limiter.admit().admitted)
      log(LogLevel::warn, kLog, "pod resources: {}: nothing released this round", in_use.error().describe());
    return;
  }
  std::lock_guard g(ops_);
  const auto now = std::chrono::steady_clock::now();
  for (const auto& v : pool_.snapshot()) {
    if (!v.holding || in_use->count(v.id) || now - v.holding->since < o_.release_grace) continue;
    holding_drop(v.id, *v.holding, "no container has it");
  }
}

void Allocator::check() {
  held_health_update();
  free_health_update();
  unused_release();
}

}  // namespace rpcie::k8s
