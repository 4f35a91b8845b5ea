// The control socket's requests (rpcie/control.hpp) acted on: attach a remote device and
// publish it in the tree, withdraw devices, report their status. The answers' fields are in
// docs/rpcie-hostd.md.
// Thread-safety: handle() is called concurrently by the control server; the tree serializes
// what must be.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "remote_device.hpp"
#include "rpcie/result.hpp"
#include "tree.hpp"

namespace rpcie::hostd {

// An attach request's parameters: "host" and "export" required, "port" (not 0) and
// "dma_window" (bytes) with defaults. EINVAL with the reason otherwise.
Result<AttachParams> attach_request_parse(const nlohmann::json& request, std::size_t window_default);

class AttachManager {
 public:
  // `tree` must outlive the manager; `window_default` is --dma-window.
  AttachManager(const AttachContext& context, std::size_t window_default, Tree& tree);

  // One request ({"op": ...}, already checked to be an object with a string "op"); an
  // unknown op or a failure is answered {"error", "errno"}.
  nlohmann::json handle(const nlohmann::json& request);

 private:
  nlohmann::json attach(const nlohmann::json& request);
  nlohmann::json detach(const nlohmann::json& request);
  nlohmann::json status() const;

  const AttachContext context_;
  const std::size_t window_default_;
  Tree& tree_;
};

}  // namespace rpcie::hostd
