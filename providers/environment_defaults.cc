// libfabric settings rpcie chooses where the operator chose none (provider.hpp).
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "rpcie/providers/provider.hpp"

namespace rpcie::providers {

namespace {

// Whether the kernel lists an RDMA device (verbs, efa): /sys/class/infiniband has an entry.
bool rdma_devices_present() noexcept {
  std::error_code absent;
  const std::filesystem::directory_iterator devices("/sys/class/infiniband", absent);
  return !absent && devices != std::filesystem::directory_iterator();
}

}  // namespace

void environment_defaults_apply(bool rdma_devices) noexcept {
  // rxm over tcp and verbs shares one receive context per endpoint and posts this many
  // bounce buffers of FI_OFI_RXM_BUFFER_SIZE to it at endpoint open: 4096 by default,
  // 64 MiB per endpoint, and rpcie opens an endpoint per attachment on both sides. A
  // channel keeps at most its window plus its sends in flight (ChannelOptions: 64 + 16),
  // so 256 buffers never run dry; overwrite 0 leaves the operator's value.
  (void)::setenv("FI_OFI_RXM_MSG_RX_SIZE", "256", 0);
  // rxm's transmit and receive contexts (2048 entries each by default) are arrays of
  // per-operation state, about 0.4 MiB each per endpoint and resident. A channel posts
  // recv_depth (32) receives and has at most its window plus its sends (64 + 16) in flight;
  // a post past the context's size gets -FI_EAGAIN, which the channel retries.
  (void)::setenv("FI_OFI_RXM_TX_SIZE", "256", 0);
  (void)::setenv("FI_OFI_RXM_RX_SIZE", "256", 0);
  // rxm also allocates its transmit and receive bounce buffers in pools of 1024, each
  // buffer FI_OFI_RXM_BUFFER_SIZE (16 KiB) plus a header (about 0.3 KiB received, 0.5 KiB
  // sent): 2 x 17 MiB per endpoint, all of it resident. Over tcp rxm sends a message larger
  // than its buffer from the caller's memory and receives it into the posted buffer (direct
  // send, dynamic receive buffers: both on by default in 1.17), so 256-byte buffers (1.3 MiB
  // for both pools) carry everything up to the eager limit, which stays 16384 — what peers
  // with libfabric's defaults use; rxm refuses a connection between different eager limits.
  // Over verbs the eager limit must equal the buffer size, so with an RDMA device on the
  // host both are left to libfabric. An operator's buffer size is theirs, and so is the
  // eager limit that follows from it.
  if (rdma_devices || std::getenv("FI_OFI_RXM_BUFFER_SIZE") != nullptr) return;
  (void)::setenv("FI_OFI_RXM_EAGER_LIMIT", "16384", 0);
  (void)::setenv("FI_OFI_RXM_BUFFER_SIZE", "256", 0);
}

void environment_defaults_apply() noexcept {
  static const bool rdma_devices = rdma_devices_present();
  environment_defaults_apply(rdma_devices);
}

}  // namespace rpcie::providers
