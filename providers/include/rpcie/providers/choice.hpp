// Which libfabric provider to use, as an operator names it (--provider, FI_PROVIDER): the
// part of the provider layer that users of the client API see. Free of libfabric headers.
// Thread-safe; no state.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rpcie::providers {

enum class ProviderKind { efa, verbs, shm, tcp };

// A parsed --provider / FI_PROVIDER value.
struct ProviderChoice {
  bool automatic = true;                  // "auto"
  ProviderKind kind = ProviderKind::tcp;  // meaningful when !automatic
};

// Accepts "auto", "tcp", "shm", "verbs", "efa", "tcp;ofi_rxm", "verbs;ofi_rxm"
// (case-sensitive, as fi_info prints them). Anything else: nullopt and *why says what is
// accepted.
std::optional<ProviderChoice> provider_parse(std::string_view text, std::string* why = nullptr);

// The choice in effect: `flag` (from --provider) if not empty, else $FI_PROVIDER if set and
// not empty, else auto.
std::optional<ProviderChoice> provider_choice_resolve(std::string_view flag, std::string* why = nullptr);

}  // namespace rpcie::providers
