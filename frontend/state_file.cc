#include "state_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attach_request.hpp"
#include "config_edit.hpp"
#include "rpcie/data_path.hpp"

namespace rpcie::hostd {

using nlohmann::json;

std::optional<unsigned> device_index_parse(const std::string& name) {
  constexpr std::string_view prefix = "rpcie";
  if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 4) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos || (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  const unsigned long n = std::stoul(digits);
  if (n > kStateIndexMax) return std::nullopt;
  return static_cast<unsigned>(n);
}

std::string state_text(const std::vector<StateEntry>& entries) {
  json list = json::array();
  for (const auto& e : entries) {
    json a{{"device", "rpcie" + std::to_string(e.index)},
           {"uid", e.uid},
           {"host", e.params.host},
           {"port", e.params.port},
           {"export", e.params.export_name},
           {"dma_window", e.params.window_size}};
    if (e.params.data_path) a["data_path"] = data_path_choice_name(*e.params.data_path);
    list.push_back(std::move(a));
  }
  return json{{"version", 1}, {"attachments", std::move(list)}}.dump(1) + "\n";
}

Result<std::vector<StateEntry>> state_parse(const std::string& text, const AttachPolicy& policy) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return fail(EINVAL, "not JSON");
  if (!doc.is_object() || !doc.contains("version") || doc["version"] != 1)
    return fail(EINVAL, "not a version 1 state file (expected {\"version\":1,\"attachments\":[...]})");
  if (!doc.contains("attachments") || !doc["attachments"].is_array())
    return fail(EINVAL, "\"attachments\" is not a list");
  std::vector<StateEntry> out;
  std::set<unsigned> seen;
  for (const auto& a : doc["attachments"]) {
    const std::string where = "attachment " + std::to_string(out.size());
    if (!a.is_object()) return fail(EINVAL, where + " is not an object");
    if (!a.contains("device") || !a["device"].is_string())
      return fail(EINVAL, where + ": \"device\" (rpcieN) is missing");
    const auto index = device_index_parse(a["device"].get<std::string>());
    if (!index) return fail(EINVAL, where + ": \"device\" " + a["device"].dump() + " is not rpcie0..rpcie4095");
    if (!seen.insert(*index).second) return fail(EINVAL, where + ": rpcie" + std::to_string(*index) + " twice");
    if (!a.contains("uid") || !a["uid"].is_number_unsigned() || a["uid"].get<std::uint64_t>() > 0xfffffffe)
      return fail(EINVAL, where + ": \"uid\" is not a user id");
    auto params = attach_request_parse(a, policy);
    if (!params) return fail(EINVAL, where + ": " + params.error().message);
    out.push_back(StateEntry{*index, static_cast<uid_t>(a["uid"].get<std::uint64_t>()), std::move(*params)});
  }
  return out;
}

Result<std::vector<StateEntry>> state_file_load(const std::string& path, const AttachPolicy& policy) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::vector<StateEntry>{};
    return fail(errno, "state file " + path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto entries = state_parse(text.str(), policy);
  if (!entries) return fail(entries.error().code, "state file " + path + ": " + entries.error().message);
  return entries;
}

Result<void> state_file_store(const std::string& path, const std::vector<StateEntry>& entries) {
  auto stored = file_store_atomic(path, state_text(entries), 0600);
  if (!stored) return fail(stored.error().code, "state file " + stored.error().message);
  return {};
}

}  // namespace rpcie::hostd
