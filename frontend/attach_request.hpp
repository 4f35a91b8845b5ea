// An attach request of the control socket (rpcie/control.hpp) checked and turned into an
// attachment's parameters, before anything is allocated for it. Apart from the attach
// manager so that the fuzz target of the control socket reaches it without a FUSE tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "remote_device.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

// What attach requests may ask for: hostd's options.
struct AttachPolicy {
  std::size_t window_default = 16u << 20;  // --dma-window
  std::size_t window_max = 256u << 20;     // --max-dma-window: no request gets more
  // --allow-remote: the exporters (host as the request names it, port) that non-root users
  // may attach from; empty: any. Root may attach from any.
  std::vector<std::pair<std::string, std::uint16_t>> remotes;
};

// An attach request's parameters: "host" (host_name_check) and "export" (export_name_check)
// required; "port" (1-65535) and "dma_window" (bytes, a positive multiple of the page size, at
// most policy.window_max) with defaults; "data_path" ("sealed", "open" or "auto") optional
// (absent: hostd's --data-path). EINVAL with the reason otherwise; nothing is
// allocated before this passed.
Result<AttachParams> attach_request_parse(const nlohmann::json& request, const AttachPolicy& policy);

}  // namespace rpcie::hostd
