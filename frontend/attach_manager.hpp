// The control socket's requests (rpcie/control.hpp) acted on: attach a remote device and
// publish it in the tree, withdraw devices, report their status. The answers' fields are in
// docs/rpcie-hostd.md. Every request carries the requester's credentials (SO_PEERCRED):
// attachments are owned by the uid that made them (attach_owners.hpp); a non-root user
// detaches and sees the details of only their own, root all.
// Thread-safety: request() is called concurrently by the control server; the tree serializes
// what must be, detaches are serialized here (an ownership check and its withdraw are one
// step: the name cannot change hands between them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "attach_owners.hpp"
#include "attach_request.hpp"
#include "control_server.hpp"
#include "mmio_ring_server.hpp"
#include "remote_device.hpp"
#include "rpcie/result.hpp"
#include "tree.hpp"

namespace rpcie::hostd {

// Whether a process with `peer`'s credentials may read and write a device's files, which are
// root:`group` with `mode`: root, or the mode's "other" read-write bits, or its group bits and
// `group` among the peer's groups (read from /proc/<pid>/status).
bool peer_may_use(const ucred& peer, gid_t group, mode_t mode);

class AttachManager {
 public:
  // `tree` must outlive the manager.
  AttachManager(const AttachContext& context, AttachPolicy policy, Tree& tree);

  ~AttachManager();  // stops the MMIO rings

  // One request ({"op": ...}, already checked to be an object with a string "op") from a
  // process with credentials `peer`; an unknown op or a failure is answered {"error",
  // "errno"} (EPERM: another user's attachment). Also serves {"op":"mmio_ring","bdf":B}
  // (the memfd of a new ring for the device's register BARs passed with the answer
  // {"ring_bytes":N,"timeout_ms":T}, the connection kept by the ring's server).
  ControlServer::Reply request(const nlohmann::json& request, const ucred& peer);

 private:
  ControlServer::Reply mmio_ring(const nlohmann::json& request, const ucred& peer);
  nlohmann::json attach(const nlohmann::json& request, uid_t peer);
  nlohmann::json detach(const nlohmann::json& request, uid_t peer);
  nlohmann::json status(uid_t peer) const;

  const AttachContext context_;
  const AttachPolicy policy_;
  Tree& tree_;
  AttachOwners owners_;
  std::mutex detach_lock_;
  std::mutex rings_lock_;
  std::vector<std::unique_ptr<MmioRingServer>> rings_;  // ended ones are reaped at the next request
};

}  // namespace rpcie::hostd
