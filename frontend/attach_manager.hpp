// The control socket's requests (rpcie/control.hpp) acted on: attach a remote device and
// publish it in the tree, withdraw devices, report their status. The answers' fields are in
// docs/rpcie-hostd.md.
// Thread-safety: handle() is called concurrently by the control server; the tree serializes
// what must be.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "control_server.hpp"
#include "mmio_ring_server.hpp"
#include "remote_device.hpp"
#include "rpcie/result.hpp"
#include "tree.hpp"

namespace rpcie::hostd {

// An attach request's parameters: "host" and "export" required, "port" (not 0) and
// "dma_window" (bytes) with defaults. EINVAL with the reason otherwise.
Result<AttachParams> attach_request_parse(const nlohmann::json& request, std::size_t window_default);

// Whether a process with `peer`'s credentials may read and write a device's files, which are
// root:`group` with `mode`: root, or the mode's "other" read-write bits, or its group bits and
// `group` among the peer's groups (read from /proc/<pid>/status).
bool peer_may_use(const ucred& peer, gid_t group, mode_t mode);

class AttachManager {
 public:
  // `tree` must outlive the manager; `window_default` is --dma-window.
  AttachManager(const AttachContext& context, std::size_t window_default, Tree& tree);

  ~AttachManager();  // stops the MMIO rings

  // One request ({"op": ...}, already checked to be an object with a string "op"); an
  // unknown op or a failure is answered {"error", "errno"}.
  nlohmann::json handle(const nlohmann::json& request);
  // The same, with the requester's credentials, for the control server: also serves
  // {"op":"mmio_ring","bdf":B} (the memfd of a new ring for the device's register BARs passed with the answer
  // {"ring_bytes":N,"timeout_ms":T}, the connection kept by the ring's server).
  ControlServer::Reply request(const nlohmann::json& request, const ucred& peer);

 private:
  ControlServer::Reply mmio_ring(const nlohmann::json& request, const ucred& peer);
  nlohmann::json attach(const nlohmann::json& request);
  nlohmann::json detach(const nlohmann::json& request);
  nlohmann::json status() const;

  const AttachContext context_;
  const std::size_t window_default_;
  Tree& tree_;
  std::mutex rings_lock_;
  std::vector<std::unique_ptr<MmioRingServer>> rings_;  // ended ones are reaped at the next request
};

}  // namespace rpcie::hostd
