// DataPath: the words, the wire bytes, the provider defaults, and the exporter's decision
// (data_path_decide) over every policy x wanted x insist x authenticated; the client's side
// of it (data_path_wanted, export_data_path, the export flags as a policy).
#include "rpcie/data_path.hpp"

#include <cerrno>
#include <string>

#include <doctest/doctest.h>

#include "rpcie/client.hpp"
#include "rpcie/client_protocol.hpp"

using namespace rpcie;
using providers::ProviderKind;

namespace {

constexpr DataPathChoice kChoices[] = {DataPathChoice::automatic, DataPathChoice::sealed, DataPathChoice::open};
constexpr DataPath kModes[] = {DataPath::sealed, DataPath::open};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What data_path_decide must answer, written out as the rule reads (data_path.hpp):
// the policy wins; an insisting client of the other mode is refused; sealed needs
// authentication. nullopt: refused.
std::optional<DataPath> decision_expected(DataPathChoice policy, DataPath wanted, bool insist, bool authenticated) {
  DataPath mode = wanted;
  if (policy != DataPathChoice::automatic) {
    const auto allowed = static_cast<DataPath>(policy);
    if (insist && wanted != allowed) return std::nullopt;
    mode = allowed;
  }
  // Nobody asked for sealed by name: without a key the attachment runs open.
  if (mode == DataPath::sealed && !authenticated && !insist && policy == DataPathChoice::automatic)
    return DataPath::open;
  if (mode == DataPath::sealed && !authenticated) return std::nullopt;
  return mode;
}

}  // namespace

TEST_CASE("data path: the words and the wire bytes") {
  CHECK(std::string(data_path_name(DataPath::sealed)) == "sealed");
  CHECK(std::string(data_path_name(DataPath::open)) == "open");
  CHECK(std::string(data_path_choice_name(DataPathChoice::automatic)) == "auto");
  CHECK(std::string(data_path_choice_name(DataPathChoice::sealed)) == "sealed");
  CHECK(std::string(data_path_choice_name(DataPathChoice::open)) == "open");
  for (auto c : kChoices) CHECK(data_path_choice_parse(data_path_choice_name(c)) == c);
  for (auto m : kModes) CHECK(data_path_from_wire(static_cast<std::uint8_t>(m)) == m);
  CHECK(static_cast<std::uint8_t>(DataPath::sealed) == proto::kDataPathSealed);
  CHECK(static_cast<std::uint8_t>(DataPath::open) == proto::kDataPathOpen);
}

TEST_CASE("data path: a choice that is no word of the three is EINVAL naming the accepted words") {
  for (const char* bad : {"", "Sealed", "closed", "auto ", "opened", "sealed,open"}) {
    CAPTURE(bad);
    auto r = data_path_choice_parse(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
    CHECK(contains(r.error().message, "sealed, open or auto"));
    CHECK(contains(r.error().message, "'" + std::string(bad) + "'"));
  }
}

TEST_CASE("data path: a wire byte other than sealed or open is EPROTO") {
  for (int v : {0, 3, 255}) {
    auto r = data_path_from_wire(static_cast<std::uint8_t>(v));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EPROTO);
  }
}

TEST_CASE("data path: sealed is tcp's default, open the isolated fabrics'") {
  CHECK(data_path_default(ProviderKind::tcp) == DataPath::sealed);
  for (auto k : {ProviderKind::shm, ProviderKind::verbs, ProviderKind::efa})
    CHECK(data_path_default(k) == DataPath::open);
  for (auto k : {ProviderKind::tcp, ProviderKind::shm, ProviderKind::verbs, ProviderKind::efa}) {
    CHECK(data_path_resolve(DataPathChoice::automatic, k) == data_path_default(k));
    CHECK(data_path_resolve(DataPathChoice::sealed, k) == DataPath::sealed);
    CHECK(data_path_resolve(DataPathChoice::open, k) == DataPath::open);
  }
}

TEST_CASE("data path: the exporter's decision over every policy, wanted mode, insist and authentication") {
  int refused = 0, decided = 0;
  for (auto policy : kChoices)
    for (auto wanted : kModes)
      for (bool insist : {false, true})
        for (bool authenticated : {false, true}) {
          CAPTURE(data_path_choice_name(policy));
          CAPTURE(data_path_name(wanted));
          CAPTURE(insist);
          CAPTURE(authenticated);
          const auto expected = decision_expected(policy, wanted, insist, authenticated);
          auto r = data_path_decide(policy, wanted, insist, authenticated, "edu7");
          if (expected) {
            REQUIRE(r);
            CHECK(*r == *expected);
            ++decided;
            continue;
          }
          ++refused;
          REQUIRE_FALSE(r);
          CHECK(r.error().code == EPROTO);
          CHECK(r.error().to_errno() == EPROTO);
          CHECK(contains(r.error().message, "export edu7"));
          if (policy != DataPathChoice::automatic && insist && wanted != static_cast<DataPath>(policy)) {
            // The disagreement: both modes named, the client's and the export's.
            CHECK(contains(r.error().message, std::string("insists on the ") + data_path_name(wanted)));
            CHECK(contains(r.error().message,
                           std::string("allows only ") + data_path_name(static_cast<DataPath>(policy))));
          } else {
            CHECK(contains(r.error().message, "sealed data path needs an authenticated connection"));
          }
        }
  // 3 x 2 x 2 x 2 cases; refused: the 4 insisting disagreements (each policy, the other
  // mode, either authentication) and the 4 others that end sealed by name without
  // authentication (auto policy, the client insisting on sealed; sealed policy asked sealed
  // x 2 insist, asked open, not insisting). Auto policy with sealed only as the client's
  // default runs open without a key.
  CHECK(decided + refused == 24);
  CHECK(refused == 8);
  auto keyless = data_path_decide(DataPathChoice::automatic, DataPath::sealed, false, false, "edu7");
  REQUIRE(keyless);
  CHECK(*keyless == DataPath::open);
}

TEST_CASE("data path: without a policy the client's wish is what runs") {
  for (auto wanted : kModes) {
    CHECK(data_path_decide(DataPathChoice::automatic, wanted, false, true, "x") == wanted);
    CHECK(data_path_decide(DataPathChoice::automatic, wanted, true, true, "x") == wanted);
  }
}

TEST_CASE("data path: a client that does not insist takes the export's policy") {
  CHECK(data_path_decide(DataPathChoice::open, DataPath::sealed, false, true, "x") == DataPath::open);
  CHECK(data_path_decide(DataPathChoice::sealed, DataPath::open, false, true, "x") == DataPath::sealed);
  CHECK(data_path_decide(DataPathChoice::open, DataPath::sealed, false, false, "x") == DataPath::open);
}

TEST_CASE("data path: what a client asks for is its choice, else its provider's default, open unauthenticated") {
  using client::data_path_wanted;
  CHECK(data_path_wanted(DataPathChoice::automatic, ProviderKind::tcp, true) == DataPath::sealed);
  CHECK(data_path_wanted(DataPathChoice::automatic, ProviderKind::shm, true) == DataPath::open);
  CHECK(data_path_wanted(DataPathChoice::automatic, ProviderKind::tcp, false) == DataPath::open);
  CHECK(data_path_wanted(DataPathChoice::sealed, ProviderKind::shm, false) == DataPath::sealed);
  CHECK(data_path_wanted(DataPathChoice::open, ProviderKind::tcp, true) == DataPath::open);
}

TEST_CASE("data path: an export's flags are its policy, and the mode a client would get follows it") {
  proto::ExportEntry e;
  e.name = "edu0";
  e.backend = "edu";
  const std::pair<std::uint8_t, DataPathChoice> flags[] = {{0, DataPathChoice::automatic},
                                                           {proto::kExportSealedOnly, DataPathChoice::sealed},
                                                           {proto::kExportOpenOnly, DataPathChoice::open}};
  for (const auto& flag : flags) {
    const DataPathChoice policy = flag.second;  // not a structured binding: clang 14 cannot CAPTURE one
    e.flags = static_cast<std::uint8_t>(flag.first | proto::kExportShared);
    const client::ExportDesc d = client::export_desc_from(e);
    CAPTURE(data_path_choice_name(policy));
    CHECK(d.data_path_policy == policy);
    CHECK(d.shared);
    CHECK_FALSE(d.data_path);  // the entry alone does not say what a client gets
    for (auto kind : {ProviderKind::tcp, ProviderKind::shm})
      for (bool authenticated : {false, true}) {
        const DataPath got = client::export_data_path(d, kind, authenticated);
        if (policy != DataPathChoice::automatic)
          CHECK(got == static_cast<DataPath>(policy));
        else
          CHECK(got == (authenticated ? data_path_default(kind) : DataPath::open));
      }
  }
  // The client's own choice counts where the export has no policy.
  e.flags = 0;
  const client::ExportDesc d = client::export_desc_from(e);
  CHECK(client::export_data_path(d, ProviderKind::tcp, true, DataPathChoice::open) == DataPath::open);
  CHECK(client::export_data_path(d, ProviderKind::shm, true, DataPathChoice::sealed) == DataPath::sealed);
}
