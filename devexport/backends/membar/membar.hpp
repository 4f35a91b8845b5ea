// membar backend (placeholder until the real one lands).
#pragma once
#include <map>
#include <memory>
#include <string>
#include "backend.hpp"
namespace rpcie::dev {
Result<std::unique_ptr<Backend>> membar_create(const std::map<std::string, std::string>& params);
}
