// shm: libfabric's shared-memory provider, for two processes on one host.
#include <dirent.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "adapter_common.hpp"

namespace rpcie::providers {
namespace {

constexpr EnvVar kShmEnvVars[] = {
    {"FI_SHM_DISABLE_CMA", "1: never use process_vm_readv/writev (CMA), e.g. under ptrace restrictions"},
    {"FI_SHM_SAR_THRESHOLD", "without CMA: largest message sent by segmentation before the mmap protocol"},
    {"FI_SHM_TX_SIZE", "outstanding transmit operations (default 1024)"},
    {"FI_SHM_RX_SIZE", "outstanding receive operations (default 1024)"},
    {"FI_SHM_USE_DSA_SAR", "1: offload segmented copies to Intel DSA when present"},
};

// RdmAdapter's defaults hold: RMA is a copy between the two address spaces (CMA, or through
// the shared region).
class ShmAdapter final : public detail::RdmAdapter {
 public:
  // shm 1.17 would grant FI_ORDER_SAW, at a price: asking for any order beyond
  // send-after-send switches off its "fast RMA" (single-copy) path. Measured with
  // rpcie-bench, RMA reads then ran at 25-50 % of the raw loop's. So SAS only: the core
  // orders write-then-message by delivery-complete writes instead. See README.md.
  // shm addresses are names (fi_shm://<pid>), not IPs.
  constexpr ShmAdapter() noexcept
      : RdmAdapter(
            {ProviderKind::shm, "shm", "shm", detail::SawOrder::skip, detail::NodeAddress::ignored, kShmEnvVars}) {}

  // shm names each endpoint's region /dev/shm/<pid>:<n>:<n>, and refuses to reuse a file of
  // that name when the PID written in it is alive — which it is when that PID is now ours
  // (a process killed with SIGKILL, or by the OOM killer, leaves its files; PIDs wrap at
  // pid_max): fi_enable then fails with EBUSY. Before this process's first shm endpoint,
  // every file named after its PID is such a leftover. Done once per PID (a forked child
  // has a PID of its own) and under a lock, so that no endpoint of this process exists yet.
  std::vector<std::string> fabric_prepare() const override {
    static std::mutex lock;
    static pid_t cleaned = 0;
    std::lock_guard g(lock);
    const pid_t pid = ::getpid();
    if (cleaned == pid) return {};
    cleaned = pid;
    std::vector<std::string> removed;
    const std::string prefix = std::to_string(pid) + ":";
    DIR* dir = ::opendir("/dev/shm");
    if (dir == nullptr) return {};
    while (const dirent* e = ::readdir(dir)) {
      if (std::string_view(e->d_name).substr(0, prefix.size()) != prefix) continue;
      if (::unlinkat(::dirfd(dir), e->d_name, 0) == 0) removed.push_back(std::string("/dev/shm/") + e->d_name);
    }
    ::closedir(dir);
    return removed;
  }
};

constinit const ShmAdapter kShm;

}  // namespace

const ProviderAdapter& detail::shm_adapter() noexcept { return kShm; }

}  // namespace rpcie::providers
