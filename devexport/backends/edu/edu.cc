#include "edu.hpp"
namespace rpcie::dev {
Result<std::unique_ptr<Backend>> edu_create(const std::map<std::string, std::string>&) {
  return fail(ENOTSUP, "backend not built yet");
}
}  // namespace rpcie::dev
