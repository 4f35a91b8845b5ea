#include "control_text.hpp"

#include <cerrno>
#include <string>

#include "rpcie/control.hpp"

namespace rpcie::cli {

namespace {

// A count of the answer, or 0 when it is missing or no unsigned integer: a float out of
// range (1e108) would be undefined behaviour to convert.
unsigned long long count_get(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<unsigned long long>() : 0;
}

void attach_print_text(const nlohmann::json& a, std::FILE* out) {
  std::fprintf(out, "%s %s %s\n", a.value("device", "").c_str(), a.value("path", "").c_str(),
               a.value("sysfs", "").c_str());
  if (a.contains("persisted") && a["persisted"].is_string())
    std::fprintf(out, "persisted in %s\n", a["persisted"].get<std::string>().c_str());
}

void detach_print_text(const nlohmann::json& a, std::FILE* out) {
  for (const auto& n : a.value("detached", nlohmann::json::array()))
    std::fprintf(out, "detached %s\n", n.get<std::string>().c_str());
  if (const auto kept = count_get(a, "kept"); kept > 0)
    std::fprintf(out, "kept %llu attachment%s of other users (only they or root may detach them)\n", kept,
                 kept == 1 ? "" : "s");
}

void status_print_text(const nlohmann::json& answer, std::FILE* out) {
  std::fprintf(out, "%-8s %-22s %-12s %-13s %-12s %-8s %4s %7s %10s %10s %8s\n", "DEVICE", "EXPORTER", "EXPORT",
               "STATE", "PROVIDER", "DATAPATH", "GEN", "RESUMED", "MMIO_RD", "MMIO_WR", "IRQS");
  for (const auto& a : answer.value("attachments", nlohmann::json::array())) {
    if (a.value("hidden", false)) {  // another user's: hostd tells only that it exists
      std::fprintf(out, "%-8s (another user's attachment; details hidden)\n", a.value("device", "").c_str());
      continue;
    }
    const auto& c = a.value("counters", nlohmann::json::object());
    std::fprintf(out, "%-8s %-22s %-12s %-13s %-12s %-8s %4llu %7llu %10llu %10llu %8llu\n",
                 a.value("device", "").c_str(), a.value("exporter", "").c_str(), a.value("export", "").c_str(),
                 a.value("state", "").c_str(), a.value("provider", "-").c_str(), a.value("data_path", "-").c_str(),
                 count_get(a, "generation"), count_get(c, "resumes"), count_get(c, "mmio_reads"),
                 count_get(c, "mmio_writes"), count_get(c, "interrupts"));
    if (a.contains("error") && a.value("state", "") != "connected")
      std::fprintf(out, "         %s\n", a["error"].get<std::string>().c_str());
  }
}

}  // namespace

Result<void> control_answer_print(ControlCommand command, const nlohmann::json& answer, bool json, std::FILE* out,
                                  std::FILE* err) try {
  if (json) {
    std::fprintf(out, "%s\n", control::json_line(answer).c_str());
  } else {
    switch (command) {
      case ControlCommand::attach:
        attach_print_text(answer, out);
        break;
      case ControlCommand::detach:
        detach_print_text(answer, out);
        break;
      case ControlCommand::status:
        status_print_text(answer, out);
        break;
    }
  }
  if (answer.contains("warning"))
    std::fprintf(err, "rpcie: warning: %s\n", answer["warning"].get<std::string>().c_str());
  return {};
} catch (const nlohmann::json::exception& e) {
  // A field of another type than docs/rpcie-hostd.md gives (value() and get() throw).
  return fail(EPROTO, std::string("rpcie-hostd's answer does not have the documented shape: ") + e.what());
}

}  // namespace rpcie::cli
