// AttachManager's state file: saving what is held, and restoring at start what an earlier
// hostd held (attach_manager.hpp, restore_start).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "attach_manager.hpp"
#include "rpcie/control.hpp"
#include "rpcie/log.hpp"

namespace rpcie::hostd {

using nlohmann::json;

namespace {

// What retrying will not change (the exporter's verdict on our key, the export, the request).
bool restore_error_permanent(const Error& e) {
  const int code = e.to_errno();
  return code == EACCES || code == ENOENT || code == EPERM || code == EINVAL;
}

}  // namespace

void AttachManager::state_save_locked() {
  if (state_path_.empty()) return;
  std::vector<StateEntry> entries;
  for (const auto& [index, e] : held_) entries.push_back(e);
  for (const auto& [index, p] : pending_)
    if (!p.cancelled) entries.push_back(p.entry);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  if (auto stored = state_file_store(state_path_, entries); !stored)
    RPCIE_LOG_ERROR("hostd", "{} (a restarted hostd may not re-attach what it holds)", stored.error().describe());
}

void AttachManager::restore_start(const std::vector<ConfiguredAttach>& configured) {
  state_restore();
  std::lock_guard g(state_lock_);
  configured_apply_locked(configured);
  restorer_ensure_locked();
}

void AttachManager::restorer_ensure_locked() {
  if (restore_running_ || restore_stopping_ || pending_.empty()) return;
  // An ended restorer cleared restore_running_ under the lock and only returns after that.
  if (restorer_.joinable()) restorer_.join();
  restore_running_ = true;
  restorer_ = std::thread([this] { restore_run(); });
}

void AttachManager::state_restore() {
  if (state_path_.empty()) return;
  auto entries = state_file_load(state_path_, policy_);
  if (!entries) {
    // Not fatal: a daemon that refuses to start over a damaged file would take every new
    // attach down with it. The file is kept beside for whoever looks into it.
    const std::string bad = state_path_ + ".bad";
    const bool kept = ::rename(state_path_.c_str(), bad.c_str()) == 0;
    RPCIE_LOG_ERROR("hostd", "{}: nothing restored{}", entries.error().message, kept ? "; kept as " + bad : "");
    return;
  }
  std::lock_guard g(state_lock_);
  for (auto& e : *entries) {
    const std::string name = "rpcie" + std::to_string(e.index);
    if (!tree_.index_reserve_at(e.index)) {
      RPCIE_LOG_ERROR("hostd", "state file {}: {} is taken; not restored", state_path_, name);
      continue;
    }
    auto claim = owners_.claim(e.index, e.uid, e.params);
    if (!claim) {
      tree_.index_release(e.index);
      RPCIE_LOG_ERROR("hostd", "state file {}: {} not restored: {}", state_path_, name, claim.error().describe());
      continue;
    }
    RPCIE_LOG_INFO("hostd", "{}: restoring {} on {}:{} (uid {}) from {}", name, e.params.export_name, e.params.host,
                   e.params.port, e.uid, state_path_);
    Pending p;
    p.serial = *claim;
    p.next_try = std::chrono::steady_clock::now();
    const unsigned index = e.index;
    p.entry = std::move(e);
    pending_.emplace(index, std::move(p));
  }
  state_save_locked();  // without the entries that could not be restored
}

void AttachManager::restore_stop() {
  {
    std::lock_guard g(state_lock_);
    restore_stopping_ = true;
    restore_wake_.notify_all();
  }
  if (restorer_.joinable()) restorer_.join();
}

void AttachManager::pending_drop_locked(std::map<unsigned, Pending>::iterator it) {
  owners_.release(it->first, it->second.serial);
  tree_.index_release(it->first);
  pending_.erase(it);
}

Result<bool> AttachManager::pending_cancel(const std::string& name, uid_t peer) {
  std::lock_guard g(state_lock_);
  for (auto& [index, p] : pending_) {
    if ("rpcie" + std::to_string(index) != name || p.cancelled) continue;
    RPCIE_TRY(owners_.detach_check(peer, name, index));
    p.cancelled = true;
    state_save_locked();
    restore_wake_.notify_all();
    RPCIE_LOG_INFO("hostd", "{}: detached before it was restored", name);
    return true;
  }
  return false;
}

std::vector<std::string> AttachManager::pending_cancel_all(uid_t peer) {
  std::vector<std::string> names;
  std::lock_guard g(state_lock_);
  for (auto& [index, p] : pending_) {
    if (p.cancelled || !owner_match(peer, p.entry.uid)) continue;
    p.cancelled = true;
    names.push_back("rpcie" + std::to_string(index));
  }
  if (!names.empty()) {
    state_save_locked();
    restore_wake_.notify_all();
  }
  return names;
}

void AttachManager::restore_run() {
  std::unique_lock g(state_lock_);
  while (!restore_stopping_ && !pending_.empty()) {
    // Cancelled entries go first; then the one whose try is due soonest.
    for (auto it = pending_.begin(); it != pending_.end();) {
      const auto here = it++;
      if (here->second.cancelled && !here->second.trying) pending_drop_locked(here);
    }
    if (pending_.empty()) break;
    auto next = std::min_element(pending_.begin(), pending_.end(),
                                 [](const auto& a, const auto& b) { return a.second.next_try < b.second.next_try; });
    if (next->second.next_try > std::chrono::steady_clock::now()) {
      restore_wake_.wait_until(g, next->second.next_try);
      continue;  // stopped, cancelled, or due: look again
    }
    const StateEntry entry = next->second.entry;
    const unsigned index = next->first;
    const std::string name = "rpcie" + std::to_string(index);
    next->second.trying = true;
    g.unlock();
    auto dev = RemoteDevice::attach(entry.params, context_, index, Deadline::after(context_.attach_timeout));
    g.lock();
    auto it = pending_.find(index);  // still there: only this thread erases
    it->second.trying = false;
    if (dev && !it->second.cancelled && !restore_stopping_) {
      // Published and recorded in one step under the lock: a detach sees it either pending
      // or held, never in between.
      auto pub = tree_.publish(*dev);
      if (pub) {
        held_[index] = entry;
        pending_.erase(it);
        RPCIE_LOG_INFO("hostd", "{}: re-attached {} on {}:{} from the state file", name, entry.params.export_name,
                       entry.params.host, entry.params.port);
        continue;
      }
      RPCIE_LOG_WARN("hostd", "{}: cannot publish it: {}", name, pub.error().describe());
    }
    if (dev) {  // cancelled, stopping or not published: the exporter gets its device back
      auto d = std::move(*dev);
      g.unlock();
      (void)d->detach(Deadline::after(context_.timeout));
      d.reset();
      g.lock();
      it = pending_.find(index);
      it->second.next_try = std::chrono::steady_clock::now() + retry_delay_next(it->second);
      continue;
    }
    auto& p = it->second;
    if (!p.configured && restore_error_permanent(dev.error())) {
      RPCIE_LOG_ERROR("hostd", "{}: {} on {}:{} not restored, dropped from the state file: {}", name,
                      entry.params.export_name, entry.params.host, entry.params.port, dev.error().describe());
      pending_drop_locked(it);
      state_save_locked();
      continue;
    }
    // Logged when the reason changes, not at every try.
    if (dev.error().describe() != p.last_error)
      RPCIE_LOG_WARN("hostd", "{}: restoring {} on {}:{}: {}; retrying", name, entry.params.export_name,
                     entry.params.host, entry.params.port, dev.error().describe());
    p.last_error = dev.error().describe();
    p.next_try = std::chrono::steady_clock::now() + retry_delay_next(p);
  }
  // Stopping: what is still pending stays in the state file for the next start.
  restore_running_ = false;
}

}  // namespace rpcie::hostd
