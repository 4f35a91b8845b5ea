#include "pci_sysfs.hpp"
namespace rpcie::dev {
Result<std::unique_ptr<Backend>> pci_sysfs_create(const std::map<std::string, std::string>&) {
  return fail(ENOTSUP, "backend not built yet");
}
}  // namespace rpcie::dev
