// efa: Amazon's Elastic Fabric Adapter. Its FI_EP_RDM endpoint is libfabric's own reliable
// protocol over the device's SRD queue pairs; the "-dgrm" domains expose raw datagrams.
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include "adapter_common.hpp"

namespace rpcie::providers {
namespace {

// FI_OPT_EFA_RNR_RETRY is the SRD queue pair's rnr_retry: 0-6 retries in firmware, after
// which the provider gets a receiver-not-ready error, queues the packet and backs off in
// software (FI_EFA_MAX_TIMEOUT / FI_EFA_TIMEOUT_INTERVAL); 7 makes the firmware retry
// indefinitely. 7 is the SRD queue pair's own default, which libfabric 1.17's RDM endpoint
// lowers to 3. We put 7 back (as NIXL does, and as later libfabric keeps for efa-direct
// endpoints): an RNR then costs a hardware retry instead of a trip through the software
// backoff, which with manual progress only runs when rpcie polls. A peer that stops
// receiving for good is rpcie's timeouts' business, as on every other provider.
constexpr std::size_t kRnrRetryInfinite = 7;
constexpr const char* kRnrRetryEnv = "RPCIE_EFA_RNR_RETRY";

// From fi_efa(7) of 1.17 and the parameter names compiled into Debian's libfabric 1.17.
// (FI_EFA_RNR_RETRY does not exist in 1.17: the only knob is FI_OPT_EFA_RNR_RETRY.)
constexpr EnvVar kEfaEnvVars[] = {
    {"RPCIE_EFA_RNR_RETRY", "rnr_retry set on every endpoint, 0-7 (default 7: retry in hardware forever)"},
    {"FI_EFA_USE_DEVICE_RDMA", "use the device's RDMA read (default: where the device has it)"},
    {"FI_EFA_ENABLE_SHM_TRANSFER", "1 (default): peers on the same host talk through shm"},
    {"FI_EFA_FORK_SAFE", "1: fork() support (needed if rpcie's process forks with registered memory)"},
    {"FI_EFA_TX_SIZE", "transmit operations before -FI_EAGAIN"},
    {"FI_EFA_RX_SIZE", "receive operations before -FI_EAGAIN"},
    {"FI_EFA_TX_QUEUE_SIZE", "depth of the transmit queue opened on the NIC"},
    {"FI_EFA_RECVWIN_SIZE", "reorder window in messages; messages beyond it abort the job"},
    {"FI_EFA_CQ_SIZE", "entries of every completion queue the provider opens"},
    {"FI_EFA_MR_CACHE_ENABLE", "1 (default): cache registrations instead of bounce-buffering"},
    {"FI_EFA_MAX_TIMEOUT", "cap (us) of the software backoff after a receiver-not-ready error"},
    {"FI_EFA_TIMEOUT_INTERVAL", "base (us) of that backoff; 0 = random"},
    {"FI_EFA_INTER_MIN_READ_MESSAGE_SIZE", "messages from this size use the RDMA-read protocol"},
    {"FI_EFA_INTER_MIN_READ_WRITE_SIZE", "writes from this size use the read-based write protocol"},
};

struct RnrRetry {
  std::size_t value = kRnrRetryInfinite;
  bool from_env = false;
};

// RPCIE_EFA_RNR_RETRY if set, else kRnrRetryInfinite; nullopt if set to anything but 0-7.
std::optional<RnrRetry> rnr_retry_resolve() noexcept {
  const char* text = std::getenv(kRnrRetryEnv);
  if (text == nullptr || *text == '\0') return RnrRetry{};
  const std::string_view value(text);
  std::size_t retry = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), retry);
  if (ec != std::errc{} || end != value.data() + value.size() || retry > kRnrRetryInfinite) return std::nullopt;
  return RnrRetry{.value = retry, .from_env = true};
}

class EfaAdapter final : public detail::RdmAdapter {
 public:
  // No FI_ORDER_SAW: SRD is unordered and the RDM protocol restores only send-after-send
  // (its msg_order is FI_ORDER_SAS plus atomic orders). Asking for SAW makes fi_getinfo
  // return -FI_ENODATA, as it does for any order bit a provider lacks (checked on tcp with
  // FI_ORDER_WAR). The core sees SAW missing from the granted order and waits for the RMA
  // completion before sending what depends on it.
  // EFA addresses are GID+QPN, not IPs; the device is chosen by domain.
  constexpr EfaAdapter() noexcept
      : RdmAdapter(
            {ProviderKind::efa, "efa", "efa", detail::SawOrder::skip, detail::NodeAddress::ignored, kEfaEnvVars}) {}

  // EFA's device path needs FI_MR_LOCAL and provider keys with virtual addresses; the RDM
  // endpoint drops FI_MR_LOCAL. No FI_MR_ENDPOINT (EFA never asks for it) and no FI_MR_HMEM:
  // that bit only goes with the FI_HMEM capability, which rpcie does not request.
  std::uint64_t mr_mode_accepted() const noexcept override {
    return FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  }

  bool info_accept(const fi_info& info) const noexcept override {
    if (!detail::info_accept_common(info)) return false;
    if (info.domain_attr == nullptr || info.domain_attr->name == nullptr) return true;
    const std::string_view domain(info.domain_attr->name);
    return !domain.ends_with("-dgrm");
  }

  // libfabric 1.17 implements fi_write on EFA with messages (device RDMA write arrived in
  // 1.18), and uses the device's RDMA read only if the hardware has it, with no way to ask
  // (FI_OPT_EFA_EMULATED_READ/WRITE are 1.18 additions). So on 1.17 we report neither as
  // native; both still work, emulated by libfabric. From 1.18 on we report what FI_RMA
  // promises; the exact answer there comes from fi_getopt(FI_OPT_EFA_EMULATED_READ/WRITE)
  // on an endpoint, since older devices still lack RDMA read and pre-gen2 devices RDMA write.
  RmaSupport rma_support(const fi_info& info, std::uint32_t fabric_version) const noexcept override {
    const bool native = (info.caps & FI_RMA) != 0 && fabric_version >= static_cast<std::uint32_t>(FI_VERSION(1, 18));
    return {.read_native = native, .write_native = native};
  }

  // Must run before fi_enable (the provider refuses the option afterwards).
  int endpoint_configure(fid_ep& ep, const fi_info& /*info*/) const noexcept override {
    const std::optional<RnrRetry> retry = rnr_retry_resolve();
    if (!retry) return -FI_EINVAL;  // a typo in the operator's setting must not pass silently
    const int rc = fi_setopt(&ep.fid, FI_OPT_ENDPOINT, FI_OPT_EFA_RNR_RETRY, &retry->value, sizeof retry->value);
    // Old devices / rdma-core cannot modify rnr_retry (-FI_ENOSYS). Unless the operator
    // asked for a value, the provider's default (3 + software backoff) is correct too.
    if (rc == -FI_ENOSYS && !retry->from_env) return 0;
    return rc;
  }
};

constinit const EfaAdapter kEfa;

}  // namespace

const ProviderAdapter& detail::efa_adapter() noexcept { return kEfa; }

}  // namespace rpcie::providers
