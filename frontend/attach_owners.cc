#include "attach_owners.hpp"

#include <cerrno>

namespace rpcie::hostd {

bool owner_match(uid_t peer, std::optional<uid_t> owner) noexcept { return peer == 0 || (owner && *owner == peer); }

Result<std::uint64_t> AttachOwners::claim(unsigned index, uid_t uid, const AttachParams& target) {
  std::lock_guard g(lock_);
  if (uid != 0)
    for (const auto& [n, e] : entries_)
      if (n != index && e.uid != uid && e.host == target.host && e.port == target.port &&
          e.export_name == target.export_name)
        return fail(EPERM, "export '" + target.export_name + "' on " + target.host + ":" + std::to_string(target.port) +
                               " is attached by another user (rpcie" + std::to_string(n) +
                               "); only that user or root may attach it again");
  entries_[index] = Entry{uid, ++serial_, target.host, target.port, target.export_name};
  return serial_;
}

void AttachOwners::release(unsigned index, std::uint64_t serial) {
  std::lock_guard g(lock_);
  auto it = entries_.find(index);
  if (it != entries_.end() && it->second.serial == serial) entries_.erase(it);
}

std::optional<uid_t> AttachOwners::owner(unsigned index) const {
  std::lock_guard g(lock_);
  auto it = entries_.find(index);
  if (it == entries_.end()) return std::nullopt;
  return it->second.uid;
}

std::optional<std::uint64_t> AttachOwners::serial(unsigned index) const {
  std::lock_guard g(lock_);
  auto it = entries_.find(index);
  if (it == entries_.end()) return std::nullopt;
  return it->second.serial;
}

Result<void> AttachOwners::detach_check(uid_t peer, const std::string& name, unsigned index) const {
  const auto o = owner(index);
  if (owner_match(peer, o)) return {};
  return fail(EPERM, name + " was attached by another user" + (o ? " (uid " + std::to_string(*o) + ")" : "") +
                         "; only that user or root may detach it");
}

}  // namespace rpcie::hostd
