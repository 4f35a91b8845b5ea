#include "attach_owners.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace rpcie::hostd {

bool owner_match(uid_t peer, std::optional<uid_t> owner) noexcept { return peer == 0 || (owner && *owner == peer); }

std::set<std::string> host_addresses(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  std::set<std::string> out;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &list) == 0) {
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(list, ::freeaddrinfo);
    for (const addrinfo* ai = list; ai; ai = ai->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      if (ai->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr, text, sizeof text);
      } else if (ai->ai_family == AF_INET6) {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a))
          inet_ntop(AF_INET, a.s6_addr + 12, text, sizeof text);
        else
          inet_ntop(AF_INET6, &a, text, sizeof text);
      }
      if (text[0] != 0) out.insert(text);
    }
  }
  if (out.empty()) out.insert(host);
  return out;
}

Result<std::uint64_t> AttachOwners::claim(unsigned index, uid_t uid, const AttachParams& target) {
  std::set<std::string> addresses = host_addresses(target.host);
  const auto shares_address = [&](const Entry& e) {
    return std::any_of(addresses.begin(), addresses.end(), [&](const std::string& a) { return e.addresses.count(a); });
  };
  std::lock_guard g(lock_);
  if (uid != 0)
    for (const auto& [n, e] : entries_)
      if (n != index && e.uid != uid && e.port == target.port && e.export_name == target.export_name &&
          shares_address(e))
        return fail(EPERM, "export '" + target.export_name + "' on " + target.host + ":" + std::to_string(target.port) +
                               " is attached by another user (rpcie" + std::to_string(n) +
                               "); only that user or root may attach it again");
  entries_[index] = Entry{uid, ++serial_, std::move(addresses), target.port, target.export_name};
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
