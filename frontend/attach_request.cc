#include "attach_request.hpp"

#include <cerrno>
#include <optional>
#include <string>

#include <unistd.h>

#include "dev_links.hpp"
#include "rpcie/process.hpp"

namespace rpcie::hostd {

using nlohmann::json;

namespace {

// A JSON integer that is not negative (nlohmann keeps non-negative numbers built from a
// signed type as signed); nullopt for anything else.
std::optional<std::uint64_t> unsigned_of(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

}  // namespace

Result<AttachParams> attach_request_parse(const json& r, const AttachPolicy& policy) {
  if (!r.contains("host") || !r["host"].is_string() || !r.contains("export") || !r["export"].is_string())
    return fail(EINVAL, "attach needs \"host\" and \"export\"");
  AttachParams p;
  p.host = r["host"].get<std::string>();
  p.export_name = r["export"].get<std::string>();
  RPCIE_TRY(host_name_check(p.host));
  RPCIE_TRY(export_name_check(p.export_name));
  p.port = kDefaultPort;
  if (r.contains("port")) {
    const auto port = unsigned_of(r["port"]);
    if (!port || *port == 0 || *port > 65535) return fail(EINVAL, "port: expected 1-65535, got " + r["port"].dump());
    p.port = static_cast<std::uint16_t>(*port);
  }
  p.window_size = policy.window_default;
  if (r.contains("dma_window")) {
    const auto window = unsigned_of(r["dma_window"]);
    if (!window) return fail(EINVAL, "dma_window: expected a size in bytes, got " + r["dma_window"].dump());
    const std::uint64_t bytes = *window;
    // Before anything is reserved or allocated: a request cannot commit memory beyond the cap.
    if (bytes > policy.window_max)
      return fail(EINVAL, "dma_window of " + std::to_string(bytes) + " bytes is over --max-dma-window (" +
                              std::to_string(policy.window_max) + " bytes)");
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    if (bytes == 0 || bytes % page != 0)
      return fail(EINVAL, "dma_window of " + std::to_string(bytes) +
                              " bytes is not a positive multiple of the page size (" + std::to_string(page) + ")");
    p.window_size = static_cast<std::size_t>(bytes);
  }
  if (r.contains("data_path")) {
    if (!r["data_path"].is_string())
      return fail(EINVAL, "data_path: expected \"sealed\", \"open\" or \"auto\", got " + r["data_path"].dump());
    auto choice = data_path_choice_parse(r["data_path"].get<std::string>());
    if (!choice) return fail(EINVAL, "data_path: " + choice.error().message);
    p.data_path = *choice;
  }
  return p;
}

}  // namespace rpcie::hostd
