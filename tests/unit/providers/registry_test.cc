// Provider names, FI_PROVIDER resolution and automatic selection.
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "rpcie/providers/provider.hpp"

using rpcie::providers::provider_auto_select;
using rpcie::providers::provider_choice_resolve;
using rpcie::providers::provider_get;
using rpcie::providers::provider_parse;
using rpcie::providers::provider_registry;
using rpcie::providers::ProviderAdapter;
using rpcie::providers::ProviderChoice;
using rpcie::providers::ProviderKind;

namespace {

// Sets or unsets FI_PROVIDER for one test and puts the previous value back.
class FiProviderEnv {
 public:
  explicit FiProviderEnv(const char* value) {
    if (const char* old = std::getenv("FI_PROVIDER")) saved_ = old;
    if (value != nullptr) {
      setenv("FI_PROVIDER", value, 1);
    } else {
      unsetenv("FI_PROVIDER");
    }
  }
  ~FiProviderEnv() {
    if (saved_) {
      setenv("FI_PROVIDER", saved_->c_str(), 1);
    } else {
      unsetenv("FI_PROVIDER");
    }
  }
  FiProviderEnv(const FiProviderEnv&) = delete;
  FiProviderEnv& operator=(const FiProviderEnv&) = delete;

 private:
  std::optional<std::string> saved_;
};

bool is_kind(const std::optional<ProviderChoice>& choice, ProviderKind kind) {
  return choice && !choice->automatic && choice->kind == kind;
}

bool is_auto(const std::optional<ProviderChoice>& choice) { return choice && choice->automatic; }

// An availability predicate that says yes to the given kinds only, and records what it was asked.
struct FakeAvailability {
  std::set<ProviderKind> present{};
  std::vector<ProviderKind> asked{};
  bool operator()(const ProviderAdapter& adapter) {
    asked.push_back(adapter.kind());
    return present.contains(adapter.kind());
  }
};

}  // namespace

TEST_CASE("provider_parse accepts auto, the short names and the fi_info spellings") {
  CHECK(is_auto(provider_parse("auto")));
  CHECK(is_kind(provider_parse("tcp"), ProviderKind::tcp));
  CHECK(is_kind(provider_parse("shm"), ProviderKind::shm));
  CHECK(is_kind(provider_parse("verbs"), ProviderKind::verbs));
  CHECK(is_kind(provider_parse("efa"), ProviderKind::efa));
  CHECK(is_kind(provider_parse("tcp;ofi_rxm"), ProviderKind::tcp));
  CHECK(is_kind(provider_parse("verbs;ofi_rxm"), ProviderKind::verbs));
}

TEST_CASE("provider_parse rejects an unknown name, quoting it and listing what is accepted") {
  std::string why;
  CHECK_FALSE(provider_parse("psm3", &why));
  CHECK(why.find("\"psm3\"") != std::string::npos);
  for (const char* accepted : {"auto", "tcp", "shm", "verbs", "efa", "tcp;ofi_rxm", "verbs;ofi_rxm"}) {
    CHECK_MESSAGE(why.find(accepted) != std::string::npos, accepted);
  }
}

TEST_CASE("provider_parse is case-sensitive and rejects empty text and near misses") {
  for (const char* bad : {"TCP", "Auto", "", "tcp ", "ofi_rxm", "shm;ofi_rxm", "efa;ofi_rxd"}) {
    std::string why;
    CHECK_MESSAGE(!provider_parse(bad, &why), bad);
    // Built piecewise: g++ 12 -O3 warns (-Wrestrict, PR105651) on "literal" + std::string.
    std::string quoted(1, '"');
    quoted.append(bad).push_back('"');
    CHECK(why.find(quoted) != std::string::npos);
  }
}

TEST_CASE("provider_parse without a message pointer still rejects") { CHECK_FALSE(provider_parse("nope")); }

TEST_CASE("provider_choice_resolve prefers the flag over FI_PROVIDER") {
  FiProviderEnv env("shm");
  CHECK(is_kind(provider_choice_resolve("efa"), ProviderKind::efa));
  CHECK(is_auto(provider_choice_resolve("auto")));
}

TEST_CASE("provider_choice_resolve falls back to FI_PROVIDER when the flag is empty") {
  FiProviderEnv env("tcp;ofi_rxm");
  CHECK(is_kind(provider_choice_resolve(""), ProviderKind::tcp));
}

TEST_CASE("provider_choice_resolve is auto when neither the flag nor FI_PROVIDER is set") {
  {
    FiProviderEnv env(nullptr);
    CHECK(is_auto(provider_choice_resolve("")));
  }
  {
    FiProviderEnv env("");
    CHECK(is_auto(provider_choice_resolve("")));
  }
}

TEST_CASE("provider_choice_resolve names FI_PROVIDER when its value is not understood") {
  FiProviderEnv env("^psm3");
  std::string why;
  CHECK_FALSE(provider_choice_resolve("", &why));
  CHECK(why.find("FI_PROVIDER") != std::string::npos);
  CHECK(why.find("\"^psm3\"") != std::string::npos);
}

TEST_CASE("provider_choice_resolve reports a bad flag without blaming FI_PROVIDER") {
  FiProviderEnv env(nullptr);
  std::string why;
  CHECK_FALSE(provider_choice_resolve("infiniband", &why));
  CHECK(why.find("\"infiniband\"") != std::string::npos);
  CHECK(why.find("FI_PROVIDER") == std::string::npos);
}

TEST_CASE("the registry lists efa, verbs, shm and tcp in that order") {
  const auto registry = provider_registry();
  REQUIRE(registry.size() == 4);
  CHECK(registry[0]->kind() == ProviderKind::efa);
  CHECK(registry[1]->kind() == ProviderKind::verbs);
  CHECK(registry[2]->kind() == ProviderKind::shm);
  CHECK(registry[3]->kind() == ProviderKind::tcp);
}

TEST_CASE("provider_get returns the registry's adapter for each kind") {
  for (const ProviderAdapter* adapter : provider_registry()) {
    CHECK(&provider_get(adapter->kind()) == adapter);
  }
  CHECK(provider_get(ProviderKind::tcp).name() == "tcp");
  CHECK(provider_get(ProviderKind::shm).name() == "shm");
  CHECK(provider_get(ProviderKind::verbs).name() == "verbs");
  CHECK(provider_get(ProviderKind::efa).name() == "efa");
}

TEST_CASE("every adapter's names parse back to its own kind") {
  for (const ProviderAdapter* adapter : provider_registry()) {
    CHECK(is_kind(provider_parse(adapter->name()), adapter->kind()));
    CHECK(is_kind(provider_parse(adapter->fabric_name()), adapter->kind()));
  }
}

TEST_CASE("provider_auto_select takes the first available provider in preference order") {
  FakeAvailability everything{
      .present = {ProviderKind::efa, ProviderKind::verbs, ProviderKind::shm, ProviderKind::tcp}};
  const ProviderAdapter* chosen = provider_auto_select(std::ref(everything), true);
  REQUIRE(chosen != nullptr);
  CHECK(chosen->kind() == ProviderKind::efa);

  FakeAvailability no_efa{.present = {ProviderKind::verbs, ProviderKind::shm, ProviderKind::tcp}};
  chosen = provider_auto_select(std::ref(no_efa), true);
  REQUIRE(chosen != nullptr);
  CHECK(chosen->kind() == ProviderKind::verbs);
  CHECK(no_efa.asked == std::vector{ProviderKind::efa, ProviderKind::verbs});

  FakeAvailability shm_and_tcp{.present = {ProviderKind::shm, ProviderKind::tcp}};
  chosen = provider_auto_select(std::ref(shm_and_tcp), true);
  REQUIRE(chosen != nullptr);
  CHECK(chosen->kind() == ProviderKind::shm);
}

TEST_CASE("provider_auto_select considers shm only when both peers share a host") {
  FakeAvailability shm_and_tcp{.present = {ProviderKind::shm, ProviderKind::tcp}};
  const ProviderAdapter* chosen = provider_auto_select(std::ref(shm_and_tcp), false);
  REQUIRE(chosen != nullptr);
  CHECK(chosen->kind() == ProviderKind::tcp);
  // shm is not even asked about: probing it would cost an fi_getinfo for nothing.
  CHECK(shm_and_tcp.asked == std::vector{ProviderKind::efa, ProviderKind::verbs, ProviderKind::tcp});

  FakeAvailability only_shm{.present = {ProviderKind::shm}};
  CHECK(provider_auto_select(std::ref(only_shm), false) == nullptr);
}

TEST_CASE("provider_auto_select returns null when no provider is available") {
  FakeAvailability nothing;
  CHECK(provider_auto_select(std::ref(nothing), true) == nullptr);
  CHECK(nothing.asked.size() == 4);
}
