#include "backend.hpp"

#include <algorithm>
#include <cctype>

#include "backends/edu/edu.hpp"
#include "backends/membar/membar.hpp"
#include "backends/pci-sysfs/pci_sysfs.hpp"

namespace rpcie::dev {

namespace {

bool name_char_ok(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; }

}  // namespace

Result<ExportSpec> export_spec_parse(std::string_view text) {
  ExportSpec spec;
  auto eq = text.find('=');
  if (eq == std::string_view::npos)
    return fail(EINVAL, "export '" + std::string(text) + "': expected NAME=BACKEND[,key=value...]");
  spec.name = std::string(text.substr(0, eq));
  if (spec.name.empty() || spec.name.size() > 64 || !std::all_of(spec.name.begin(), spec.name.end(), name_char_ok))
    return fail(EINVAL, "export name '" + spec.name + "': use 1-64 of A-Z a-z 0-9 _ . -");
  std::string_view rest = text.substr(eq + 1);
  auto comma = rest.find(',');
  spec.backend = std::string(rest.substr(0, comma));
  if (spec.backend.empty()) return fail(EINVAL, "export '" + spec.name + "': no backend named");
  while (comma != std::string_view::npos) {
    rest = rest.substr(comma + 1);
    comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    auto kv = item.find('=');
    if (kv == std::string_view::npos || kv == 0)
      return fail(EINVAL, "export '" + spec.name + "': parameter '" + std::string(item) + "' is not key=value");
    std::string key(item.substr(0, kv));
    if (!spec.params.emplace(key, std::string(item.substr(kv + 1))).second)
      return fail(EINVAL, "export '" + spec.name + "': parameter '" + key + "' given twice");
  }
  return spec;
}

Result<std::unique_ptr<Backend>> backend_create(const ExportSpec& spec) {
  Result<std::unique_ptr<Backend>> made = fail(EINVAL, "");
  if (spec.backend == "edu")
    made = edu_create(spec.params);
  else if (spec.backend == "membar")
    made = membar_create(spec.params);
  else if (spec.backend == "pci-sysfs")
    made = pci_sysfs_create(spec.params);
  else
    return fail(EINVAL, "export '" + spec.name + "': unknown backend '" + spec.backend +
                            "' (backends: edu, membar, pci-sysfs)");
  if (!made) return fail(made.error().code, "export '" + spec.name + "': " + made.error().message);
  return made;
}

}  // namespace rpcie::dev
