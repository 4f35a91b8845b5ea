// libfabric settings rpcie chooses where the operator chose none (provider.hpp).
#include <cstdlib>

#include "rpcie/providers/provider.hpp"

namespace rpcie::providers {

void environment_defaults_apply() noexcept {
  // rxm over tcp and verbs shares one receive context per endpoint and posts this many
  // bounce buffers of FI_OFI_RXM_BUFFER_SIZE (16 KiB) to it at endpoint open: 4096 by
  // default, 64 MiB per endpoint, and rpcie opens an endpoint per attachment on both
  // sides. A channel keeps at most its window plus its sends in flight (ChannelOptions:
  // 64 + 16), so 256 buffers never run dry; overwrite 0 leaves the operator's value.
  (void)::setenv("FI_OFI_RXM_MSG_RX_SIZE", "256", 0);
}

}  // namespace rpcie::providers
