// Small helpers shared by rpcie's programs (not part of the core contract).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rpcie::tools {

// Pins the calling process to one CPU; false (and a warning) if that CPU is not available.
bool cpu_pin(int cpu);

}  // namespace rpcie::tools
