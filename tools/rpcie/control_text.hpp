// How `rpcie attach`, `detach` and `status` print rpcie-hostd's answers (the fields are in
// docs/rpcie-hostd.md): as the JSON itself with -o json, else as text. Kept out of main.cc
// so that the fuzz target of the control socket reaches them.
#pragma once

#include <cstdio>

#include <nlohmann/json.hpp>

#include "rpcie/result.hpp"

namespace rpcie::cli {

enum class ControlCommand { attach, detach, status };

// Prints `answer` (an object, as control::call returns it) to `out`, and its "warning" to
// `err` as "rpcie: warning: TEXT". EPROTO when a field has another type than documented
// (what was printed before it stays printed).
Result<void> control_answer_print(ControlCommand command, const nlohmann::json& answer, bool json, std::FILE* out,
                                  std::FILE* err);

}  // namespace rpcie::cli
