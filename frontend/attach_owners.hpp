// Who attached what: the uid of the process that asked for each attachment (SO_PEERCRED of
// its control-socket connection), and the rules that follow from it. A user detaches, and
// sees the details of, only attachments that user made; root (uid 0) all of them. A
// non-root user cannot attach an export (an address the host resolves to, port, export
// name) that another user's attachment holds — however the host is spelt: the exporter sees one client name for the
// whole of hostd and could not tell the two users apart (a shared device's state, the by-export link, the first user's
// reconnect would all be the second user's to disturb).
//
// Entries are keyed by the device's index N (rpcieN). An index is reserved by one attach at
// a time, so a claim for it always wins; each claim has a serial, and only its own serial
// releases it (a late release after the index was reserved anew is a no-op).
// Thread-safety: every member may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <sys/types.h>

#include "remote_device.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

// Whether `peer` may see details of, and detach, an attachment owned by `owner` (nullopt:
// not recorded, root's only).
bool owner_match(uid_t peer, std::optional<uid_t> owner) noexcept;

// Every numeric address `host` resolves to (an IPv4-mapped IPv6 address as IPv4), or the
// name itself when it resolves to none: "127.1", "localhost" and "127.0.0.1" share one.
std::set<std::string> host_addresses(const std::string& host);

class AttachOwners {
 public:
  // Records that `uid` attaches `target` as device index `index`. EPERM, with the device
  // name rpcieN that holds it, when `uid` is not root and another uid's attachment has the
  // port and export name and a host that resolves to an address in common (host_addresses).
  // Resolves the host (a DNS lookup) before taking the lock. Returns the claim's serial for
  // release().
  Result<std::uint64_t> claim(unsigned index, uid_t uid, const AttachParams& target);
  // Forgets the claim `serial` of `index` (attach failed, or the device was withdrawn).
  void release(unsigned index, std::uint64_t serial);
  std::optional<uid_t> owner(unsigned index) const;
  // The serial of the claim `index` has now, for releasing it after a withdraw.
  std::optional<std::uint64_t> serial(unsigned index) const;
  // EPERM unless `peer` may detach device `name` (index `index`): root or its owner. The
  // message names the device and says who may.
  Result<void> detach_check(uid_t peer, const std::string& name, unsigned index) const;

 private:
  struct Entry {
    uid_t uid;
    std::uint64_t serial;
    std::set<std::string> addresses;  // host_addresses(target.host)
    std::uint16_t port;
    std::string export_name;
  };
  mutable std::mutex lock_;
  std::map<unsigned, Entry> entries_;
  std::uint64_t serial_ = 0;
};

}  // namespace rpcie::hostd
