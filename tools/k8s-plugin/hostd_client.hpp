// What rpcie-k8s-plugin asks rpcie-hostd over its control socket (core's rpcie/control.hpp
// client, the one the rpcie CLI uses): attach, detach, status. Every call has a deadline.
// Errors as control::call() returns them: the errno hostd answered (EBUSY when the exporter
// refuses because another client holds an exclusive export), ENOENT / ECONNREFUSED when no
// hostd listens, ETIMEDOUT, EPROTO for an answer without the fields expected.
// Thread-safety: no state.
#pragma once

#include <string>
#include <vector>

#include "config.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie::k8s {

struct HostdAttachment {
  std::string device;    // hostd's name, rpcie0 ...
  std::string sysfs;     // the device directory <mount>/pci/devices/<bdf>
  std::string exporter;  // host:port as attached
  std::string export_name;
  std::string state;  // connected, reconnecting, failed, restoring
  std::string error;  // why, when not connected
};

Result<HostdAttachment> hostd_attach(const std::string& control, const PoolDevice& d, Deadline deadline);
Result<void> hostd_detach(const std::string& control, const std::string& device, Deadline deadline);
// Every attachment hostd shows us (hidden ones, of other users, are left out).
Result<std::vector<HostdAttachment>> hostd_status(const std::string& control, Deadline deadline);

}  // namespace rpcie::k8s
