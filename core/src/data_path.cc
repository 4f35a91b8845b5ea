#include "rpcie/data_path.hpp"

#include <cerrno>

namespace rpcie {

const char* data_path_name(DataPath mode) noexcept { return mode == DataPath::sealed ? "sealed" : "open"; }

const char* data_path_choice_name(DataPathChoice choice) noexcept {
  switch (choice) {
    case DataPathChoice::sealed:
      return "sealed";
    case DataPathChoice::open:
      return "open";
    case DataPathChoice::automatic:
      break;
  }
  return "auto";
}

Result<DataPathChoice> data_path_choice_parse(std::string_view text) {
  if (text == "sealed") return DataPathChoice::sealed;
  if (text == "open") return DataPathChoice::open;
  if (text == "auto") return DataPathChoice::automatic;
  return fail(EINVAL, "data path must be sealed, open or auto, not '" + std::string(text) + "'");
}

Result<DataPath> data_path_from_wire(std::uint8_t value) {
  if (value == proto::kDataPathSealed) return DataPath::sealed;
  if (value == proto::kDataPathOpen) return DataPath::open;
  return fail(EPROTO, "unknown data path mode " + std::to_string(value));
}

DataPath data_path_default(providers::ProviderKind kind) noexcept {
  return kind == providers::ProviderKind::tcp ? DataPath::sealed : DataPath::open;
}

DataPath data_path_resolve(DataPathChoice choice, providers::ProviderKind kind) noexcept {
  if (choice == DataPathChoice::automatic) return data_path_default(kind);
  return static_cast<DataPath>(choice);
}

Result<DataPath> data_path_decide(DataPathChoice policy, DataPath wanted, bool insist, bool authenticated,
                                  std::string_view export_name) {
  DataPath mode = wanted;
  if (policy != DataPathChoice::automatic) {
    const auto allowed = static_cast<DataPath>(policy);
    if (insist && wanted != allowed)
      return fail(EPROTO, std::string("the client insists on the ") + data_path_name(wanted) + " data path; export " +
                              std::string(export_name) + " allows only " + data_path_name(allowed));
    mode = allowed;
  }
  // Without a key there is nothing to seal with: where nobody asked for sealed by name, the
  // attachment runs open (an exporter without keys protects nothing anyway).
  if (mode == DataPath::sealed && !authenticated && !insist && policy == DataPathChoice::automatic)
    return DataPath::open;
  if (mode == DataPath::sealed && !authenticated)
    return fail(EPROTO, "the sealed data path needs an authenticated connection (a pre-shared key); export " +
                            std::string(export_name) + (policy == DataPathChoice::sealed ? " allows only sealed" : ""));
  return mode;
}

}  // namespace rpcie
