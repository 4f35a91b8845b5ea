// The explicit list of adapters, provider names, and the choice between them.
#include <array>
#include <cstdlib>
#include <string>

#include <rdma/fabric.h>

#include "adapter_common.hpp"
#include "rpcie/providers/provider.hpp"

namespace rpcie::providers {
namespace {

struct Spelling {
  std::string_view text;
  ProviderChoice choice;
};

// Short names plus the fi_info spellings, so that a FI_PROVIDER already set for libfabric
// ("tcp;ofi_rxm") means the same thing to rpcie.
constexpr std::array<Spelling, 7> kSpellings{{
    {"auto", {.automatic = true}},
    {"tcp", {.automatic = false, .kind = ProviderKind::tcp}},
    {"shm", {.automatic = false, .kind = ProviderKind::shm}},
    {"verbs", {.automatic = false, .kind = ProviderKind::verbs}},
    {"efa", {.automatic = false, .kind = ProviderKind::efa}},
    {"tcp;ofi_rxm", {.automatic = false, .kind = ProviderKind::tcp}},
    {"verbs;ofi_rxm", {.automatic = false, .kind = ProviderKind::verbs}},
}};

std::string spellings_list() {
  std::string list;
  for (const Spelling& spelling : kSpellings) {
    if (!list.empty()) list += ", ";
    list += spelling.text;
  }
  return list;
}

}  // namespace

std::span<const ProviderAdapter* const> provider_registry() noexcept {
  // Auto preference order: kernel-bypass fabrics first, then same-host, then anything IP.
  static const std::array<const ProviderAdapter*, 4> registry{&detail::efa_adapter(), &detail::verbs_adapter(),
                                                              &detail::shm_adapter(), &detail::tcp_adapter()};
  return registry;
}

const ProviderAdapter& provider_get(ProviderKind kind) noexcept {
  switch (kind) {
    case ProviderKind::efa:
      return detail::efa_adapter();
    case ProviderKind::verbs:
      return detail::verbs_adapter();
    case ProviderKind::shm:
      return detail::shm_adapter();
    case ProviderKind::tcp:
      return detail::tcp_adapter();
  }
  return detail::tcp_adapter();  // unreachable for a valid enumerator
}

std::optional<ProviderChoice> provider_parse(std::string_view text, std::string* why) {
  for (const Spelling& spelling : kSpellings) {
    if (spelling.text == text) return spelling.choice;
  }
  if (why != nullptr) {
    *why = "unknown provider \"" + std::string(text) + "\" (accepted: " + spellings_list() + ")";
  }
  return std::nullopt;
}

std::optional<ProviderChoice> provider_choice_resolve(std::string_view flag, std::string* why) {
  if (!flag.empty()) return provider_parse(flag, why);
  const char* env = std::getenv("FI_PROVIDER");
  if (env == nullptr || *env == '\0') return ProviderChoice{};
  std::optional<ProviderChoice> choice = provider_parse(env, why);
  // Say where the value came from: the operator may have set FI_PROVIDER for another program.
  if (!choice && why != nullptr) *why = "FI_PROVIDER: " + *why;
  return choice;
}

const ProviderAdapter* provider_auto_select(const std::function<bool(const ProviderAdapter&)>& available,
                                            bool same_host) {
  for (const ProviderAdapter* adapter : provider_registry()) {
    if (adapter->kind() == ProviderKind::shm && !same_host) continue;
    if (available(*adapter)) return adapter;
  }
  return nullptr;
}

bool provider_available(const ProviderAdapter& adapter) {
  environment_defaults_apply();
  fi_info* hints = fi_allocinfo();
  if (hints == nullptr) return false;
  adapter.hints_fill(*hints);
  fi_info* infos = nullptr;
  const int rc = fi_getinfo(kFabricApiVersion, nullptr, nullptr, 0, hints, &infos);
  bool usable = false;
  if (rc == 0) {
    for (const fi_info* info = infos; info != nullptr && !usable; info = info->next) {
      usable = adapter.info_accept(*info);
    }
  }
  if (infos != nullptr) fi_freeinfo(infos);
  fi_freeinfo(hints);
  return usable;
}

}  // namespace rpcie::providers
