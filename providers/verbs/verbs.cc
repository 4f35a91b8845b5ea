// verbs: InfiniBand / RoCE / iWARP through rdma-core, under ofi_rxm (verbs' own endpoints are
// connected FI_EP_MSG; rxm provides FI_EP_RDM on top).
#include "adapter_common.hpp"

namespace rpcie::providers {
namespace {

constexpr EnvVar kVerbsEnvVars[] = {
    {"FI_VERBS_IFACE", "prefix or name of the network interface whose verbs device to use (e.g. ib0)"},
    {"FI_VERBS_DEVICE_NAME", "prefix or name of the verbs device to use (e.g. mlx5_0)"},
    {"FI_VERBS_GID_IDX", "GID index (RoCE: selects the IPv4/IPv6, v1/v2 GID)"},
    {"FI_VERBS_TX_SIZE", "verbs transmit queue depth (default 384)"},
    {"FI_VERBS_RX_SIZE", "verbs receive queue depth (default 384)"},
    {"FI_VERBS_INLINE_SIZE", "verbs inline data size (default 256)"},
    {"FI_VERBS_MIN_RNR_TIMER", "min_rnr_timer QP attribute, 0-31 (default 12)"},
    {"FI_VERBS_USE_ODP", "1: on-demand-paging registrations (needed for DAX mappings)"},
    {"FI_VERBS_PREFER_XRC", "1: prefer XRC over RC (combine with FI_OFI_RXM_USE_SRX=1)"},
    {"FI_OFI_RXM_BUFFER_SIZE", "rxm bounce buffer size; over verbs equal to FI_OFI_RXM_EAGER_LIMIT"},
    {"FI_OFI_RXM_EAGER_LIMIT", "largest message rxm sends eagerly; set alike on both sides"},
    {"FI_OFI_RXM_SAR_LIMIT", "largest message rxm segments; above it rxm uses rendezvous"},
    {"FI_OFI_RXM_USE_SRX", "1: one shared receive context for all peers (less memory)"},
    {"FI_OFI_RXM_USE_RNDV_WRITE", "1: rendezvous with RDMA writes instead of reads"},
    {"FI_OFI_RXM_TX_SIZE", "rxm transmit context size (rpcie default 256)"},
    {"FI_OFI_RXM_RX_SIZE", "rxm receive context size (rpcie default 256)"},
};

}  // namespace

// RdmAdapter's defaults hold: RDMA read and write are the hardware's own operations, and
// verbs needs local registration and hands out its own keys (rxm passes that through).
// verbs devices are found by their IPoIB (or RoCE netdev) address: the bootstrap socket's
// local address selects the HCA that reaches the peer.
const ProviderAdapter& detail::verbs_adapter() noexcept {
  static constinit const detail::RdmAdapter adapter({ProviderKind::verbs, "verbs", "verbs;ofi_rxm",
                                                     detail::SawOrder::ask, detail::NodeAddress::binds, kVerbsEnvVars});
  return adapter;
}

}  // namespace rpcie::providers
