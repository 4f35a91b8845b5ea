#include "hostd_client.hpp"

#include <cerrno>

#include <nlohmann/json.hpp>

#include "rpcie/control.hpp"

namespace rpcie::k8s {
namespace {

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Result<HostdAttachment> hostd_attach(const std::string& control, const PoolDevice& d, Deadline deadline) {
  const nlohmann::json request{{"op", "attach"}, {"host", d.host}, {"port", d.port}, {"export", d.export_name}};
  RPCIE_TRY_ASSIGN(auto answer, control::call(control, request, deadline));
  HostdAttachment a;
  a.device = string_field(answer, "device");
  a.sysfs = string_field(answer, "sysfs");
  if (a.device.empty() || a.sysfs.empty()) return fail(EPROTO, "hostd's attach answer has no device or sysfs");
  a.exporter = d.exporter();
  a.export_name = d.export_name;
  a.state = "connected";
  return a;
}

Result<void> hostd_detach(const std::string& control, const std::string& device, Deadline deadline) {
  RPCIE_TRY(control::call(control, {{"op", "detach"}, {"device", device}}, deadline));
  return {};
}

Result<std::vector<HostdAttachment>> hostd_status(const std::string& control, Deadline deadline) {
  RPCIE_TRY_ASSIGN(auto answer, control::call(control, {{"op", "status"}}, deadline));
  const auto list = answer.find("attachments");
  if (list == answer.end() || !list->is_array()) return fail(EPROTO, "hostd's status answer has no attachments");
  std::vector<HostdAttachment> out;
  for (const auto& e : *list) {
    if (!e.is_object() || e.contains("hidden")) continue;
    HostdAttachment a;
    a.device = string_field(e, "device");
    a.sysfs = string_field(e, "sysfs");
    a.exporter = string_field(e, "exporter");
    a.export_name = string_field(e, "export");
    a.state = string_field(e, "state");
    a.error = string_field(e, "error");
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace rpcie::k8s
