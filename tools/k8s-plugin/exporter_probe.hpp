// Whether each device of the pool could be attached now, as its exporter says: one
// exports_list (core's client API: an authenticated bootstrap connection, no fabric) per
// exporter. A device is available when its exporter answers, lists the export, and the
// export is free or shared. Used for the devices the plugin does not hold itself; a device
// another node holds (an exclusive export attached by another client) is not available.
// Thread-safety: no state; one call at a time per `options` is not required.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config.hpp"
#include "rpcie/client.hpp"
#include "rpcie/deadline.hpp"

namespace rpcie::k8s {

struct Availability {
  bool available = false;
  std::string why;  // when not: "exporter H:P unreachable: ...", "held by NAME", "not exported"
};

// Availability of every device of `devices` by id. Each exporter gets `per_exporter` to answer.
std::map<std::string, Availability> pool_probe(const std::vector<PoolDevice>& devices,
                                               const client::ClientOptions& options,
                                               std::chrono::milliseconds per_exporter);

}  // namespace rpcie::k8s
