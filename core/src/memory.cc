#include "rpcie/memory.hpp"

#include <cerrno>
#include <mutex>
#include <unordered_set>
#include <utility>

#include <rdma/fi_errno.h>
#include <sodium.h>

#include "rpcie/fabric.hpp"

namespace rpcie {
namespace {

// Keys requested by live regions of this process. Providers that let the application pick
// keys (mr_mode without FI_MR_PROV_KEY) refuse duplicates within a domain; keeping keys
// unique per process also keeps them unguessable per attachment.
struct KeyRegistry {
  std::mutex lock;
  std::unordered_set<std::uint64_t> live;
};
KeyRegistry& keys() {
  static KeyRegistry k;
  return k;
}

void key_release(std::uint64_t key) {
  std::lock_guard g(keys().lock);
  keys().live.erase(key);
}

class MrOpsFabric final : public MrOps {
 public:
  explicit MrOpsFabric(Fabric& f) : fabric_(f) {}
  int reg(const void* buf, std::size_t len, std::uint64_t access, std::uint64_t requested_key, fid_mr** mr) override {
    return fi_mr_reg(fabric_.domain(), buf, len, access, 0, requested_key, 0, mr, nullptr);
  }
  int bind_endpoint(fid_mr* mr) override {
    int rc = fi_mr_bind(mr, &fabric_.ep()->fid, 0);
    return rc ? rc : fi_mr_enable(mr);
  }
  std::uint64_t key(fid_mr* mr) override { return fi_mr_key(mr); }
  void* desc(fid_mr* mr) override { return fi_mr_desc(mr); }
  void close(fid_mr* mr) override { fi_close(&mr->fid); }

 private:
  Fabric& fabric_;
};

}  // namespace

MrPolicy MrPolicy::from_mode(std::uint64_t mr_mode) noexcept {
  MrPolicy p;
  p.local_desc = mr_mode & FI_MR_LOCAL;
  p.virt_addr = mr_mode & FI_MR_VIRT_ADDR;
  p.prov_key = mr_mode & FI_MR_PROV_KEY;
  p.allocated = mr_mode & FI_MR_ALLOCATED;
  p.endpoint_bind = mr_mode & FI_MR_ENDPOINT;
  return p;
}

std::uint64_t mr_key_random() noexcept {
  static const bool ready = sodium_init() >= 0;
  (void)ready;  // sodium_init failing leaves randombytes on its fallback, still random
  std::lock_guard g(keys().lock);
  for (;;) {
    std::uint64_t k = 0;
    randombytes_buf(&k, sizeof k);
    // Some providers reserve the top of the key space or treat 0 specially: keep 1..2^63.
    k &= 0x7fffffffffffffffULL;
    if (k != 0 && keys().live.insert(k).second) return k;
  }
}

Result<MemoryRegion> MemoryRegion::create(Fabric& fabric, void* base, std::size_t length, std::uint64_t access) {
  auto ops = std::make_shared<MrOpsFabric>(fabric);
  return create_with(*ops, fabric.mr_policy(), base, length, access, ops);
}

Result<MemoryRegion> MemoryRegion::create_with(MrOps& ops, MrPolicy policy, void* base, std::size_t length,
                                               std::uint64_t access, std::shared_ptr<MrOps> keep) {
  if (base == nullptr || length == 0) return fail(EINVAL, "memory region needs a non-empty buffer");
  MemoryRegion r;
  r.ops_owner_ = std::move(keep);
  r.ops_ = &ops;
  r.base_ = base;
  r.length_ = length;
  r.policy_ = policy;
  // A key clash (another domain user took it) is retried with a fresh key, a few times.
  for (int attempt = 0;; ++attempt) {
    std::uint64_t requested = policy.prov_key ? 0 : mr_key_random();
    int rc = ops.reg(base, length, access, requested, &r.mr_);
    if (rc == 0) {
      r.requested_key_ = !policy.prov_key;
      r.key_ = requested;
      break;
    }
    if (!policy.prov_key) key_release(requested);
    if (rc == -FI_ENOKEY && !policy.prov_key && attempt < 8) continue;
    return fail_fabric(rc, "fi_mr_reg");
  }
  if (policy.endpoint_bind) {
    int rc = ops.bind_endpoint(r.mr_);
    if (rc) return fail_fabric(rc, "fi_mr_bind/fi_mr_enable");  // r's destructor closes the mr
  }
  if (policy.prov_key) r.key_ = ops.key(r.mr_);
  r.desc_ = policy.local_desc ? ops.desc(r.mr_) : nullptr;
  return r;
}

MemoryRegion MemoryRegion::unregistered(void* base, std::size_t length, std::uint64_t key) noexcept {
  MemoryRegion r;
  r.base_ = base;
  r.length_ = length;
  r.key_ = key;
  return r;
}

proto::RegionDescriptor MemoryRegion::descriptor(std::uint32_t id) const noexcept {
  return proto::RegionDescriptor{id, policy_.remote_base(base_), length_, key_};
}

void MemoryRegion::reset() noexcept {
  if (mr_) ops_->close(mr_);
  if (requested_key_) key_release(key_);
  mr_ = nullptr;
  requested_key_ = false;
  ops_owner_.reset();
}

MemoryRegion::MemoryRegion(MemoryRegion&& o) noexcept { *this = std::move(o); }

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& o) noexcept {
  if (this != &o) {
    reset();
    ops_owner_ = std::move(o.ops_owner_);
    ops_ = o.ops_;
    mr_ = std::exchange(o.mr_, nullptr);
    base_ = o.base_;
    length_ = o.length_;
    key_ = o.key_;
    desc_ = o.desc_;
    requested_key_ = std::exchange(o.requested_key_, false);
    policy_ = o.policy_;
  }
  return *this;
}

MemoryRegion::~MemoryRegion() { reset(); }

}  // namespace rpcie
