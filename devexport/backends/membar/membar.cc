#include "membar.hpp"
namespace rpcie::dev {
Result<std::unique_ptr<Backend>> membar_create(const std::map<std::string, std::string>&) {
  return fail(ENOTSUP, "backend not built yet");
}
}  // namespace rpcie::dev
