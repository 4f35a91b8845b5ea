// Memory for the fabric: page-aligned host buffers and registered memory regions.
//
// MemoryRegion adapts to the mr_mode the provider returned:
//   FI_MR_LOCAL      local buffers must be registered and their descriptor passed: desc().
//   FI_MR_VIRT_ADDR  the peer addresses the region by virtual address, else by offset
//                    from 0: descriptor().address says which base the peer must use.
//   FI_MR_PROV_KEY   the provider picks the key; otherwise rpcie requests a unique random
//                    key (tcp and shm refuse a key already in use with -FI_ENOKEY, so a
//                    clash is retried with a fresh key).
//   FI_MR_ALLOCATED  only allocated memory may be registered: rpcie registers HostBuffer
//                    (mmap) or caller memory that is allocated by contract.
//   FI_MR_ENDPOINT   the region is bound to the endpoint and enabled before use.
// Ownership: a MemoryRegion owns its fid_mr (closed on destruction, which revokes the key);
// it does not own the memory, which must outlive it. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "rpcie/host_buffer.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

class Fabric;

struct MrPolicy {
  bool local_desc = false;     // FI_MR_LOCAL
  bool virt_addr = false;      // FI_MR_VIRT_ADDR
  bool prov_key = false;       // FI_MR_PROV_KEY
  bool allocated = false;      // FI_MR_ALLOCATED
  bool endpoint_bind = false;  // FI_MR_ENDPOINT

  static MrPolicy from_mode(std::uint64_t mr_mode) noexcept;
  // The address the peer uses for offset 0 of a region based at `base`.
  std::uint64_t remote_base(const void* base) const noexcept {
    return virt_addr ? reinterpret_cast<std::uint64_t>(base) : 0;
  }
};

// The operations registration needs, as an interface so unit tests can check the
// sequence for every mr_mode bit without hardware. MrOpsFabric is the real one.
class MrOps {
 public:
  virtual ~MrOps() = default;
  virtual int reg(const void* buf, std::size_t len, std::uint64_t access, std::uint64_t requested_key, fid_mr** mr) = 0;
  virtual int bind_endpoint(fid_mr* mr) = 0;  // fi_mr_bind(mr, ep) + fi_mr_enable
  virtual std::uint64_t key(fid_mr* mr) = 0;
  virtual void* desc(fid_mr* mr) = 0;
  virtual void close(fid_mr* mr) = 0;
};

// A unique random key not used by any live region of this process.
std::uint64_t mr_key_random() noexcept;

class MemoryRegion {
 public:
  // Registers [base, base+length) with `access` (FI_SEND|FI_RECV|FI_READ|FI_WRITE|
  // FI_REMOTE_READ|FI_REMOTE_WRITE as needed).
  static Result<MemoryRegion> create(Fabric& fabric, void* base, std::size_t length, std::uint64_t access);
  // Same, through explicit operations (unit tests).
  static Result<MemoryRegion> create_with(MrOps& ops, MrPolicy policy, void* base, std::size_t length,
                                          std::uint64_t access, std::shared_ptr<MrOps> keep = nullptr);

  // Memory that is not registered with the fabric at all (the sealed data path, data_path.hpp):
  // no descriptor, no remote access; `key` is what descriptor() offers the peer (the id of
  // the region in the channel's region table), `address` is 0.
  static MemoryRegion unregistered(void* base, std::size_t length, std::uint64_t key) noexcept;

  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  ~MemoryRegion();

  void* base() const noexcept { return base_; }
  std::uint8_t* bytes() const noexcept { return static_cast<std::uint8_t*>(base_); }
  std::size_t length() const noexcept { return length_; }
  std::uint64_t key() const noexcept { return key_; }
  // Descriptor to pass with local buffers (nullptr when FI_MR_LOCAL is not in effect).
  void* desc() const noexcept { return desc_; }
  bool registered() const noexcept { return mr_ != nullptr; }
  // What the peer needs to address this region.
  proto::RegionDescriptor descriptor(std::uint32_t id) const noexcept;

 private:
  MemoryRegion() = default;
  void reset() noexcept;
  std::shared_ptr<MrOps> ops_owner_;
  MrOps* ops_ = nullptr;
  fid_mr* mr_ = nullptr;
  void* base_ = nullptr;
  std::size_t length_ = 0;
  std::uint64_t key_ = 0;
  void* desc_ = nullptr;
  bool requested_key_ = false;
  MrPolicy policy_;
};

}  // namespace rpcie
