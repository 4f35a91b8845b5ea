// tcp: libfabric's tcp provider under the ofi_rxm utility provider, which turns tcp's
// connected FI_EP_MSG endpoints into the reliable-datagram FI_EP_RDM endpoints rpcie uses.
#include "adapter_common.hpp"

namespace rpcie::providers {
namespace {

constexpr EnvVar kTcpEnvVars[] = {
    {"FI_TCP_IFACE", "network interface tcp listens and connects on (e.g. eth0)"},
    {"FI_TCP_PORT_LOW_RANGE", "lowest port tcp binds its endpoints to (firewalls)"},
    {"FI_TCP_PORT_HIGH_RANGE", "highest port tcp binds its endpoints to (firewalls)"},
    {"FI_TCP_NODELAY", "overrides the TCP_NODELAY socket setting"},
    {"FI_TCP_TX_SIZE", "tcp transmit context size (default 256)"},
    {"FI_TCP_RX_SIZE", "tcp receive context size (default 256)"},
    {"FI_TCP_ZEROCOPY_SIZE", "size from which tcp sends with MSG_ZEROCOPY (default: never)"},
    {"FI_OFI_RXM_BUFFER_SIZE", "rxm bounce buffer size (rpcie default 256 on a host without RDMA devices)"},
    {"FI_OFI_RXM_EAGER_LIMIT", "largest message rxm sends eagerly; set alike on both sides (rpcie: 16384)"},
    {"FI_OFI_RXM_SAR_LIMIT", "largest message rxm segments; above it rxm uses rendezvous"},
    {"FI_OFI_RXM_USE_SRX", "1: one shared receive context for all peers (less memory)"},
    {"FI_OFI_RXM_TX_SIZE", "rxm transmit context size (rpcie default 256)"},
    {"FI_OFI_RXM_RX_SIZE", "rxm receive context size (rpcie default 256)"},
    {"FI_OFI_RXM_MSG_RX_SIZE", "bounce buffers rxm posts per endpoint (rpcie default 256)"},
    {"FI_OFI_RXM_DATA_AUTO_PROGRESS", "1: rxm progresses data in a thread even with manual progress"},
    {"FI_OFI_RXM_DEF_TCP_WAIT_OBJ", "wait object rxm uses over tcp (fd or pollfd)"},
};

}  // namespace

// RdmAdapter's defaults hold: the tcp provider carries RMA in its own protocol (one-sided
// from rpcie's point of view), and tcp;ofi_rxm returns mr_mode 0 on 1.17 (accepting more is
// harmless and keeps newer versions usable should they start to require some of the bits).
// rxm over tcp grants FI_ORDER_SAW on 1.17 (checked with fi_getinfo), so it is asked for.
// Several interfaces give several infos; the bootstrap socket's address picks the one the
// peer can reach.
const ProviderAdapter& detail::tcp_adapter() noexcept {
  static constinit const detail::RdmAdapter adapter(
      {ProviderKind::tcp, "tcp", "tcp;ofi_rxm", detail::SawOrder::ask, detail::NodeAddress::binds, kTcpEnvVars});
  return adapter;
}

}  // namespace rpcie::providers
