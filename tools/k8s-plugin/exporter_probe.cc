#include "exporter_probe.hpp"

namespace rpcie::k8s {
namespace {

Availability availability_of(const PoolDevice& d, const std::vector<client::ExportDesc>& exports) {
  for (const auto& e : exports) {
    if (e.name != d.export_name) continue;
    if (e.attached && !e.shared)
      return {false, "held by " + (e.holder.empty() ? std::string("another client") : e.holder)};
    return {true, ""};
  }
  return {false, "export " + d.export_name + " is not exported by " + d.exporter()};
}

}  // namespace

std::map<std::string, Availability> pool_probe(const std::vector<PoolDevice>& devices,
                                               const client::ClientOptions& options,
                                               std::chrono::milliseconds per_exporter) {
  // One question per exporter, whatever the number of its devices in the pool.
  std::map<std::string, Result<std::vector<client::ExportDesc>>> answers;
  for (const auto& d : devices) {
    if (answers.count(d.exporter())) continue;
    answers.emplace(d.exporter(), client::exports_list(d.host, d.port, options, Deadline::after(per_exporter)));
  }
  std::map<std::string, Availability> out;
  for (const auto& d : devices) {
    const auto& answer = answers.at(d.exporter());
    out[d.id] = answer ? availability_of(d, *answer)
                       : Availability{false, "exporter " + d.exporter() + " unreachable: " + answer.error().describe()};
  }
  return out;
}

}  // namespace rpcie::k8s
