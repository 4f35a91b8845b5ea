// rpcie provider adapters — what rpcie knows about each libfabric provider.
//
// One adapter per provider (tcp, shm, verbs, efa), held in an explicit registry (no static
// self-registration: a static link would drop it). Adapters are stateless, immutable and
// thread-safe; the registry hands out pointers to objects with static storage duration.
//
// This layer sits directly on libfabric: it never includes core headers (dependencies
// flow core -> providers -> libfabric). Errors are reported as plain libfabric return
// codes (0 or negative FI_E*) or as an empty optional with a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#include "rpcie/providers/choice.hpp"

namespace rpcie::providers {

// The libfabric API version every rpcie fi_getinfo asks for (core's fabric, the provider
// registry, the tools): fields newer than 1.17 stay invisible, so rpcie sees the same
// structures whichever libfabric is installed.
inline constexpr std::uint32_t kFabricApiVersion = FI_VERSION(1, 17);

// Sets the libfabric environment variables rpcie has its own default for, unless the
// operator set them: FI_OFI_RXM_MSG_RX_SIZE=256 (rxm's bounce buffers posted per endpoint;
// its default of 4096 costs 64 MiB per attachment on each side), FI_OFI_RXM_TX_SIZE=256 and
// FI_OFI_RXM_RX_SIZE=256 (rxm's per-operation contexts: 0.8 MiB less per endpoint than at
// 2048), and, on a host without an RDMA device (nothing in /sys/class/infiniband) and
// without an operator's FI_OFI_RXM_BUFFER_SIZE, FI_OFI_RXM_BUFFER_SIZE=256 with
// FI_OFI_RXM_EAGER_LIMIT=16384 (rxm's bounce-buffer pools shrink from 2 x 17 MiB to
// 0.58 + 0.74 MiB per endpoint; the eager limit stays libfabric's default, so peers with
// default settings still connect; over verbs rxm needs the two equal, hence not with an
// RDMA device). libfabric reads its environment once, at its first fi_getinfo in the
// process, so every rpcie fi_getinfo calls this first. Idempotent: a set variable is left
// alone, so only a call that finds one unset changes the environment. Thread-safety: setenv
// races with a getenv in another thread, so the first call should come before other threads
// read the environment (in the daemons: their first fabric use); later calls change nothing
// and are safe anywhere.
void environment_defaults_apply() noexcept;
// The same with the RDMA-device test given (unit tests).
void environment_defaults_apply(bool rdma_devices) noexcept;

// Native one-sided RMA as opposed to emulation (by libfabric, e.g. EFA's emulated read,
// or by rpcie over messages).
struct RmaSupport {
  bool read_native = false;
  bool write_native = false;
};

struct EnvVar {
  std::string_view name;
  std::string_view meaning;
};

class ProviderAdapter {
 public:
  virtual ~ProviderAdapter() = default;

  virtual ProviderKind kind() const noexcept = 0;
  // Short name used on the command line and in messages: "tcp", "shm", "verbs", "efa".
  virtual std::string_view name() const noexcept = 0;
  // fi_info prov_name spelling asked for in the hints: "tcp;ofi_rxm", "shm", "verbs;ofi_rxm", "efa".
  virtual std::string_view fabric_name() const noexcept = 0;

  // Fill `hints` (allocated with fi_allocinfo by the caller) for an FI_EP_RDM endpoint with
  // FI_MSG | FI_RMA, the mr_mode bits this adapter accepts, msg_order FI_ORDER_SAW (asked
  // for; the caller checks what the provider granted) and the provider name.
  virtual void hints_fill(fi_info& hints) const = 0;

  // mr_mode bits rpcie accepts from this provider (the core adapts to each of them).
  virtual std::uint64_t mr_mode_accepted() const noexcept = 0;

  // Whether fi_getinfo should be given the local IP of the bootstrap socket as node (with
  // FI_SOURCE) so that the endpoint binds to that interface. shm addresses are names, and
  // EFA devices are chosen by domain rather than by IP: both return false.
  virtual bool node_binds_address() const noexcept = 0;

  // Whether one fi_info the provider returned is usable (e.g. EFA's "-dgrm" domains are not).
  virtual bool info_accept(const fi_info& info) const noexcept = 0;

  // Largest payload that may go through fi_inject for this info (0: never inject).
  virtual std::size_t inject_size(const fi_info& info) const noexcept = 0;

  // Native RMA support for this info. `fabric_version` is FI_VERSION(major, minor) of the
  // libfabric in use (fi_version()): EFA writes are native only from 1.18.
  virtual RmaSupport rma_support(const fi_info& info, std::uint32_t fabric_version) const noexcept = 0;

  // Options to set on the endpoint after binding and before fi_enable (EFA: RNR retry).
  // Returns 0 or a negative FI_E* code.
  virtual int endpoint_configure(fid_ep& ep, const fi_info& info) const noexcept = 0;

  // Environment variables the provider reads that matter to operators (documented in
  // providers/<name>/README.md).
  virtual std::span<const EnvVar> env_vars() const noexcept = 0;

  // The largest message this provider sends eagerly, without a rendezvous in which the
  // receiver fetches it by RMA (a round trip, and an RMA key on the wire): rxm's eager limit
  // (FI_OFI_RXM_EAGER_LIMIT, else FI_OFI_RXM_BUFFER_SIZE, default 16 KiB) less its header for
  // tcp and verbs; 0 for no limit that matters to rpcie. The sealed data path sizes its
  // chunks under it.
  virtual std::size_t eager_max() const noexcept { return 0; }

  // Called before every fi_getinfo for this provider (Fabric::open); thread-safe. Cleans
  // what a dead process left behind that would make this one's endpoint fail (shm: its
  // region files, named after a PID this process now has) and returns what it removed, for
  // the caller's log. Default: nothing.
  virtual std::vector<std::string> fabric_prepare() const { return {}; }
};

// All adapters in `auto` preference order: efa, verbs, shm, tcp.
std::span<const ProviderAdapter* const> provider_registry() noexcept;
const ProviderAdapter& provider_get(ProviderKind kind) noexcept;

// `auto`: the first adapter in preference order for which `available` is true, skipping shm
// unless both peers are on one host. nullptr if none.
const ProviderAdapter* provider_auto_select(const std::function<bool(const ProviderAdapter&)>& available,
                                            bool same_host);

// Asks libfabric (fi_getinfo with the adapter's hints) whether the provider is usable here.
bool provider_available(const ProviderAdapter& adapter);

}  // namespace rpcie::providers
