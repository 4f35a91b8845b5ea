// edu's command-line glue: parameters in, a Device out. The device itself: edu_device.cc.
#include "edu.hpp"

#include <utility>

#include "edu_device.hpp"
#include "rpcie/units.hpp"

namespace rpcie::dev {

Result<std::unique_ptr<Backend>> edu_create(const std::map<std::string, std::string>& params) {
  std::chrono::nanoseconds delay{0};
  for (const auto& [key, value] : params) {
    if (key != "delay") return fail(EINVAL, "edu: unknown parameter '" + key + "' (edu takes: delay)");
    auto parsed = duration_parse(value);
    if (!parsed)
      return fail(EINVAL,
                  "edu: parameter delay='" + value + "' is not a duration (like 0, 250us, 200ms, 1.5s; at most a day)");
    delay = *parsed;
  }
  auto device = edu::Device::create(delay);
  if (!device) return tl::unexpected(std::move(device.error()));
  return std::unique_ptr<Backend>(std::move(*device));
}

}  // namespace rpcie::dev
