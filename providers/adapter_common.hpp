// Private to the providers library: what the four adapters share, and their accessors
// (the registry lists them explicitly; nothing registers itself).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>

#include <rdma/fabric.h>

#include "rpcie/providers/provider.hpp"

namespace rpcie::providers::detail {

const ProviderAdapter& efa_adapter() noexcept;
const ProviderAdapter& verbs_adapter() noexcept;
const ProviderAdapter& shm_adapter() noexcept;
const ProviderAdapter& tcp_adapter() noexcept;

// Two-sided messages plus one-sided RMA in both directions. Nothing else: FI_SOURCE,
// FI_TAGGED, FI_HMEM, ... would only shrink the set of infos a provider is willing to return.
inline constexpr std::uint64_t kCapsRequested =
    FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE;

// Every mr_mode bit the core knows how to honour. FI_MR_RAW never: it needs
// fi_mr_raw_attr/fi_mr_map_raw key exchange, which the core does not implement.
inline constexpr std::uint64_t kMrModeAll =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;

// fi_inject copies the payload into a provider buffer before returning. rpcie injects only
// small control messages and the largest inject among our providers (shm) is one page; the
// cap keeps a provider or hook that advertises more from turning large sends into
// synchronous copies.
inline constexpr std::size_t kInjectSizeMax = 4096;

// The part of hints_fill common to every adapter. `ask_saw`: whether to request
// FI_ORDER_SAW; asking for an order a provider lacks gets no infos at all (efa lacks SAW).
inline void hints_fill_common(fi_info& hints, const ProviderAdapter& adapter, bool ask_saw) {
  hints.caps = kCapsRequested;
  hints.mode = FI_CONTEXT;  // every operation's context starts with a struct fi_context
  if (hints.ep_attr != nullptr) hints.ep_attr->type = FI_EP_RDM;
  if (hints.domain_attr != nullptr) {
    hints.domain_attr->mr_mode = static_cast<int>(adapter.mr_mode_accepted());
    hints.domain_attr->threading = FI_THREAD_SAFE;
    // av_type and progress stay unspecified: the core opens the AV itself and drives
    // progress manually, which also works when a provider makes it automatic.
  }
  // Send-after-send ordering always: the core delivers messages in send order and relies on
  // receives being matched in posting order (every provider here has it, efa included).
  const std::uint64_t order = FI_ORDER_SAS | (ask_saw ? FI_ORDER_SAW : 0);
  if (hints.tx_attr != nullptr) hints.tx_attr->msg_order = order;
  if (hints.rx_attr != nullptr) hints.rx_attr->msg_order = order;
  if (hints.fabric_attr != nullptr) {
    // fi_freeinfo frees prov_name, hence malloc'd memory. On allocation failure the
    // hints simply do not filter by provider; info_accept still vets the results.
    std::free(hints.fabric_attr->prov_name);
    hints.fabric_attr->prov_name = strndup(adapter.fabric_name().data(), adapter.fabric_name().size());
  }
}

// An RDM endpoint with messages: the minimum the core works with. One-sided RMA is the
// core's to require (Fabric: the open data path asks for FI_RMA, the sealed one opens
// without it); where the hardware lacks RMA, as on some EFA devices, libfabric emulates it
// and still grants FI_RMA.
inline bool info_accept_common(const fi_info& info) noexcept {
  return info.ep_attr != nullptr && info.ep_attr->type == FI_EP_RDM && (info.caps & FI_MSG) != 0;
}

inline std::size_t inject_size_capped(const fi_info& info, std::size_t cap) noexcept {
  return info.tx_attr == nullptr ? 0 : std::min(info.tx_attr->inject_size, cap);
}

// rxm's eager limit as rxm 1.17 reads it at endpoint open: FI_OFI_RXM_EAGER_LIMIT when set,
// else FI_OFI_RXM_BUFFER_SIZE, else 16384 (its log line "Protocol limits: Eager: N"), less
// 256 bytes for rxm's packet header and a margin; at least 4 KiB. Over tcp, rxm receives an
// eager message straight into the posted buffer whatever its size, so the eager limit can
// exceed the buffer size without costing memory (measured: 65536 with the default buffers,
// same peak RSS; a 65600-byte buffer size instead tripled it). rxm refuses a connection
// between endpoints whose eager limits differ, so both sides need the same setting.
inline std::size_t rxm_eager_max() noexcept {
  constexpr std::size_t kHeader = 256, kDefault = 16384, kLeast = 4096;
  auto env_size = [](const char* name) -> std::size_t {
    const char* env = std::getenv(name);
    if (env == nullptr || *env == '\0') return 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 0);
    return end != nullptr && *end == '\0' ? static_cast<std::size_t>(v) : 0;
  };
  std::size_t size = env_size("FI_OFI_RXM_EAGER_LIMIT");
  if (size == 0) size = env_size("FI_OFI_RXM_BUFFER_SIZE");
  if (size == 0) size = kDefault;
  return size > kHeader + kLeast ? size - kHeader : kLeast;
}

// What names an adapter and what it asks of fi_getinfo beyond the common hints.
enum class SawOrder { ask, skip };          // whether to request FI_ORDER_SAW (see hints_fill_common)
enum class NodeAddress { binds, ignored };  // see ProviderAdapter::node_binds_address
struct AdapterSpec {
  ProviderKind kind;
  std::string_view name;
  std::string_view fabric_name;
  SawOrder saw;
  NodeAddress node;
  std::span<const EnvVar> env_vars;
};

// What most adapters share: names and hints from an AdapterSpec, every mr_mode bit the core
// honours, the common info filter, injects capped at kInjectSizeMax, one-sided RMA native
// wherever FI_RMA is granted, and nothing to set before fi_enable. An adapter that differs
// derives and overrides; one that does not is an RdmAdapter with its spec.
class RdmAdapter : public ProviderAdapter {
 public:
  constexpr explicit RdmAdapter(const AdapterSpec& spec) noexcept : spec_(spec) {}

  ProviderKind kind() const noexcept override { return spec_.kind; }
  std::string_view name() const noexcept override { return spec_.name; }
  std::string_view fabric_name() const noexcept override { return spec_.fabric_name; }
  void hints_fill(fi_info& hints) const override { hints_fill_common(hints, *this, spec_.saw == SawOrder::ask); }
  bool node_binds_address() const noexcept override { return spec_.node == NodeAddress::binds; }
  std::span<const EnvVar> env_vars() const noexcept override { return spec_.env_vars; }

  std::uint64_t mr_mode_accepted() const noexcept override { return kMrModeAll; }
  bool info_accept(const fi_info& info) const noexcept override { return info_accept_common(info); }
  std::size_t inject_size(const fi_info& info) const noexcept override {
    return inject_size_capped(info, kInjectSizeMax);
  }
  RmaSupport rma_support(const fi_info& info, std::uint32_t /*fabric_version*/) const noexcept override {
    const bool rma = (info.caps & FI_RMA) != 0;
    return {.read_native = rma, .write_native = rma};
  }
  int endpoint_configure(fid_ep& /*ep*/, const fi_info& /*info*/) const noexcept override { return 0; }
  std::size_t eager_max() const noexcept override {
    return spec_.fabric_name.ends_with(";ofi_rxm") ? rxm_eager_max() : 0;
  }

 private:
  AdapterSpec spec_;
};

}  // namespace rpcie::providers::detail
