// rpcie::DataPath — how an attachment moves bulk data, DMA, pushes and mirrors
// (docs/security.md 5).
//
//   sealed  no memory is registered for remote access; what one-sided RMA would move
//           travels as AEAD-sealed messages (rma_put / rma_get / rma_data / rma_done) that
//           the Channel serves itself (channel.hpp, "Sealed RMA"). Needs an authenticated
//           attachment (the seal's keys come from the handshake).
//   open    one-sided RMA (fi_write / fi_read) on registered memory; the memory keys travel
//           with every operation, in clear on tcp. For fabrics the operator declares
//           isolated (an InfiniBand partition, an EFA security group, one host).
//
// Default per provider: sealed on tcp, open on shm, verbs and efa.
//
// Agreement (data_path_decide): the exporter's policy wins; a client that insists on the
// other mode is refused with a message naming both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rpcie/protocol.hpp"
#include "rpcie/providers/choice.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

enum class DataPath : std::uint8_t { sealed = proto::kDataPathSealed, open = proto::kDataPathOpen };

// What a side asks for: a mode, or the provider's default.
enum class DataPathChoice : std::uint8_t {
  automatic = 0,
  sealed = proto::kDataPathSealed,
  open = proto::kDataPathOpen
};

// "sealed" / "open"; "auto" for DataPathChoice::automatic.
const char* data_path_name(DataPath mode) noexcept;
const char* data_path_choice_name(DataPathChoice choice) noexcept;
// Parses "sealed", "open" or "auto" (EINVAL with the accepted words otherwise).
Result<DataPathChoice> data_path_choice_parse(std::string_view text);
// The wire byte (proto::kDataPath*) as a mode: EPROTO for any other value.
Result<DataPath> data_path_from_wire(std::uint8_t value);

// The mode a provider runs when nobody chose: open where the fabric is isolated by its nature
// or its operator's setup (shm: one host; verbs, efa), sealed on tcp.
DataPath data_path_default(providers::ProviderKind kind) noexcept;
// `choice` resolved against the provider's default.
DataPath data_path_resolve(DataPathChoice choice, providers::ProviderKind kind) noexcept;

// The exporter's decision for one attach.
//   policy         the export's (automatic: whatever the client asks)
//   wanted         the mode the client asks for (its choice, or its provider's default)
//   insist         the client takes no other mode
//   authenticated  the bootstrap connection is authenticated (sealed needs its keys)
// Without authentication a sealed default (nobody asked for it by name) becomes open.
// Errors (EPROTO): the policy and an insisting client disagree ("the client insists on the
// open data path; export X allows only sealed"), or sealed by name without authentication.
Result<DataPath> data_path_decide(DataPathChoice policy, DataPath wanted, bool insist, bool authenticated,
                                  std::string_view export_name);

}  // namespace rpcie
