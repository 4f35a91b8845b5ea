// Memory registration against a fake MrOps (every mr_mode bit, key handling, ownership),
// HostBuffer, Mapping, Fd, and the process-wide key allocator.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "rpcie/fd.hpp"
#include "rpcie/mapping.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/result.hpp"

using rpcie::ErrorDomain;
using rpcie::HostBuffer;
using rpcie::MemoryRegion;
using rpcie::MrOps;
using rpcie::MrPolicy;

namespace {

// Records every call; each reg() hands out a distinct fake fid_mr. `reg_results` is consumed
// one per reg() call (0 when exhausted).
class FakeMrOps final : public MrOps {
 public:
  struct Reg {
    const void* buf;
    std::size_t len;
    std::uint64_t access;
    std::uint64_t requested_key;
  };

  int reg(const void* buf, std::size_t len, std::uint64_t access, std::uint64_t requested_key, fid_mr** mr) override {
    regs.push_back({buf, len, access, requested_key});
    int rc = 0;
    if (!reg_results.empty()) {
      rc = reg_results.front();
      reg_results.erase(reg_results.begin());
    }
    if (rc != 0) return rc;
    auto fid = std::make_unique<fid_mr>();
    fid->key = requested_key;
    *mr = fid.get();
    mrs.push_back(std::move(fid));
    return 0;
  }
  int bind_endpoint(fid_mr* mr) override {
    binds.push_back(mr);
    return bind_result;
  }
  std::uint64_t key(fid_mr* mr) override {
    ++key_calls;
    return provider_key + static_cast<std::uint64_t>(index_of(mr));
  }
  void* desc(fid_mr* mr) override {
    ++desc_calls;
    return &descs[static_cast<std::size_t>(index_of(mr)) % descs.size()];
  }
  void close(fid_mr* mr) override { closes.push_back(mr); }

  long index_of(fid_mr* mr) const {
    for (std::size_t i = 0; i < mrs.size(); ++i)
      if (mrs[i].get() == mr) return static_cast<long>(i);
    FAIL("unknown fid_mr");
    return -1;
  }
  std::size_t close_count(fid_mr* mr) const {
    return static_cast<std::size_t>(std::count(closes.begin(), closes.end(), mr));
  }

  std::vector<int> reg_results;
  int bind_result = 0;
  std::uint64_t provider_key = 0x5000;
  std::vector<Reg> regs;
  std::vector<fid_mr*> binds;
  std::vector<fid_mr*> closes;
  int key_calls = 0;
  int desc_calls = 0;
  std::vector<std::unique_ptr<fid_mr>> mrs;
  std::array<int, 4> descs{};
};

constexpr std::uint64_t kAccess = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

MrPolicy policy_of(std::uint64_t mode) { return MrPolicy::from_mode(mode); }

struct Buffer {
  alignas(64) std::uint8_t bytes[8192] = {};
};

}  // namespace

// --- MrPolicy -----------------------------------------------------------------------------

TEST_CASE("MrPolicy::from_mode maps each mr_mode bit alone to its own flag") {
  struct Case {
    std::uint64_t bit;
    bool MrPolicy::*flag;
  };
  const Case cases[] = {{FI_MR_LOCAL, &MrPolicy::local_desc},
                        {FI_MR_VIRT_ADDR, &MrPolicy::virt_addr},
                        {FI_MR_PROV_KEY, &MrPolicy::prov_key},
                        {FI_MR_ALLOCATED, &MrPolicy::allocated},
                        {FI_MR_ENDPOINT, &MrPolicy::endpoint_bind}};
  for (const Case& c : cases) {
    CAPTURE(c.bit);
    MrPolicy p = MrPolicy::from_mode(c.bit);
    for (const Case& other : cases) CHECK((p.*other.flag) == (other.bit == c.bit));
  }
}

TEST_CASE("MrPolicy::from_mode sets every flag for all bits and none for 0") {
  MrPolicy all = MrPolicy::from_mode(FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_ENDPOINT);
  CHECK(all.local_desc);
  CHECK(all.virt_addr);
  CHECK(all.prov_key);
  CHECK(all.allocated);
  CHECK(all.endpoint_bind);
  MrPolicy none = MrPolicy::from_mode(0);
  CHECK_FALSE(none.local_desc);
  CHECK_FALSE(none.virt_addr);
  CHECK_FALSE(none.prov_key);
  CHECK_FALSE(none.allocated);
  CHECK_FALSE(none.endpoint_bind);
  // Bits rpcie does not know (FI_MR_RAW, FI_MR_MMU_NOTIFY, ...) set nothing.
  MrPolicy unknown = MrPolicy::from_mode(FI_MR_RAW | FI_MR_MMU_NOTIFY | FI_MR_RMA_EVENT);
  CHECK_FALSE(unknown.local_desc);
  CHECK_FALSE(unknown.virt_addr);
  CHECK_FALSE(unknown.prov_key);
  CHECK_FALSE(unknown.allocated);
  CHECK_FALSE(unknown.endpoint_bind);
}

TEST_CASE("remote_base is the virtual address with FI_MR_VIRT_ADDR and 0 without") {
  Buffer b;
  CHECK(policy_of(FI_MR_VIRT_ADDR).remote_base(b.bytes) == reinterpret_cast<std::uint64_t>(b.bytes));
  CHECK(policy_of(0).remote_base(b.bytes) == 0);
  CHECK(policy_of(FI_MR_LOCAL | FI_MR_PROV_KEY).remote_base(b.bytes) == 0);
}

// --- MemoryRegion with a fake MrOps -------------------------------------------------------

TEST_CASE("without FI_MR_PROV_KEY a random nonzero key is requested and key() returns it") {
  FakeMrOps ops;
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(0), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE(r.has_value());
  REQUIRE(ops.regs.size() == 1);
  CHECK(ops.regs[0].buf == b.bytes);
  CHECK(ops.regs[0].len == sizeof b.bytes);
  CHECK(ops.regs[0].access == kAccess);
  CHECK(ops.regs[0].requested_key != 0);
  CHECK(r->key() == ops.regs[0].requested_key);
  CHECK(ops.key_calls == 0);
  CHECK(r->base() == b.bytes);
  CHECK(r->bytes() == b.bytes);
  CHECK(r->length() == sizeof b.bytes);
}

TEST_CASE("two live regions get different keys") {
  FakeMrOps ops;
  Buffer b1, b2;
  auto r1 = MemoryRegion::create_with(ops, policy_of(0), b1.bytes, sizeof b1.bytes, kAccess);
  auto r2 = MemoryRegion::create_with(ops, policy_of(0), b2.bytes, sizeof b2.bytes, kAccess);
  REQUIRE(r1.has_value());
  REQUIRE(r2.has_value());
  CHECK(r1->key() != r2->key());
}

TEST_CASE("a key clash (-FI_ENOKEY) is retried with a different key") {
  FakeMrOps ops;
  ops.reg_results = {-FI_ENOKEY};
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(0), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE(r.has_value());
  REQUIRE(ops.regs.size() == 2);
  CHECK(ops.regs[0].requested_key != 0);
  CHECK(ops.regs[1].requested_key != 0);
  CHECK(ops.regs[1].requested_key != ops.regs[0].requested_key);
  CHECK(r->key() == ops.regs[1].requested_key);
  CHECK(ops.closes.empty());
}

TEST_CASE("a key clash that never ends gives up with an error instead of looping forever") {
  FakeMrOps ops;
  ops.reg_results.assign(100, -FI_ENOKEY);
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(0), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().domain == ErrorDomain::fabric);
  CHECK(r.error().code == FI_ENOKEY);
  CHECK(ops.regs.size() > 1);
  CHECK(ops.regs.size() < 100);
  std::set<std::uint64_t> requested;
  for (const auto& reg : ops.regs) requested.insert(reg.requested_key);
  CHECK(requested.size() == ops.regs.size());
}

TEST_CASE("with FI_MR_PROV_KEY the requested key is 0 and key() comes from the provider") {
  FakeMrOps ops;
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_PROV_KEY), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE(r.has_value());
  REQUIRE(ops.regs.size() == 1);
  CHECK(ops.regs[0].requested_key == 0);
  CHECK(ops.key_calls == 1);
  CHECK(r->key() == ops.provider_key);
}

TEST_CASE("with FI_MR_PROV_KEY a -FI_ENOKEY failure is not retried") {
  FakeMrOps ops;
  ops.reg_results = {-FI_ENOKEY};
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_PROV_KEY), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE_FALSE(r.has_value());
  CHECK(ops.regs.size() == 1);
  CHECK(r.error().code == FI_ENOKEY);
}

TEST_CASE("FI_MR_ENDPOINT binds the region to the endpoint exactly once") {
  FakeMrOps ops;
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_ENDPOINT), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE(r.has_value());
  REQUIRE(ops.binds.size() == 1);
  CHECK(ops.binds[0] == ops.mrs[0].get());
}

TEST_CASE("without FI_MR_ENDPOINT nothing is bound") {
  FakeMrOps ops;
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_LOCAL | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR), b.bytes,
                                     sizeof b.bytes, kAccess);
  REQUIRE(r.has_value());
  CHECK(ops.binds.empty());
}

TEST_CASE("a bind failure returns the fabric error and closes the registered region") {
  FakeMrOps ops;
  ops.bind_result = -FI_EOPBADSTATE;
  Buffer b;
  auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_ENDPOINT), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().domain == ErrorDomain::fabric);
  CHECK(r.error().code == FI_EOPBADSTATE);
  REQUIRE(ops.mrs.size() == 1);
  CHECK(ops.binds.size() == 1);
  CHECK(ops.close_count(ops.mrs[0].get()) == 1);
  CHECK(ops.closes.size() == 1);
}

TEST_CASE("a bind failure releases the requested key for reuse by later regions") {
  // The key registry is private; what is observable is that a failed create leaves no
  // live region behind: a later create still succeeds and the fake saw one close.
  FakeMrOps ops;
  ops.bind_result = -FI_EINVAL;
  Buffer b;
  {
    auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_ENDPOINT), b.bytes, sizeof b.bytes, kAccess);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().to_errno() == EINVAL);
  }
  ops.bind_result = 0;
  auto again = MemoryRegion::create_with(ops, policy_of(FI_MR_ENDPOINT), b.bytes, sizeof b.bytes, kAccess);
  REQUIRE(again.has_value());
  CHECK(ops.closes.size() == 1);
}

TEST_CASE("FI_MR_LOCAL makes desc() the provider's descriptor; without it desc() is null") {
  {
    FakeMrOps ops;
    Buffer b;
    auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_LOCAL), b.bytes, sizeof b.bytes, kAccess);
    REQUIRE(r.has_value());
    CHECK(ops.desc_calls == 1);
    CHECK(r->desc() == &ops.descs[0]);
  }
  {
    FakeMrOps ops;
    Buffer b;
    auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT), b.bytes,
                                       sizeof b.bytes, kAccess);
    REQUIRE(r.has_value());
    CHECK(r->desc() == nullptr);
  }
}

TEST_CASE("descriptor() carries the id, length and key, addressed by VA or from 0") {
  Buffer b;
  {
    FakeMrOps ops;
    auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_VIRT_ADDR), b.bytes, 4096, kAccess);
    REQUIRE(r.has_value());
    auto d = r->descriptor(7);
    CHECK(d.id == 7);
    CHECK(d.address == reinterpret_cast<std::uint64_t>(b.bytes));
    CHECK(d.length == 4096);
    CHECK(d.key == r->key());
  }
  {
    FakeMrOps ops;
    auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_PROV_KEY), b.bytes, 4096, kAccess);
    REQUIRE(r.has_value());
    auto d = r->descriptor(9);
    CHECK(d.id == 9);
    CHECK(d.address == 0);
    CHECK(d.length == 4096);
    CHECK(d.key == ops.provider_key);
  }
}

TEST_CASE("every mr_mode combination registers once, binds iff FI_MR_ENDPOINT and closes once") {
  const std::uint64_t bits[] = {FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_PROV_KEY, FI_MR_ALLOCATED, FI_MR_ENDPOINT};
  for (unsigned combo = 0; combo < 32; ++combo) {
    std::uint64_t mode = 0;
    for (unsigned i = 0; i < 5; ++i)
      if (combo & (1U << i)) mode |= bits[i];
    CAPTURE(mode);
    FakeMrOps ops;
    Buffer b;
    {
      auto r = MemoryRegion::create_with(ops, policy_of(mode), b.bytes, sizeof b.bytes, kAccess);
      REQUIRE(r.has_value());
      CHECK(ops.regs.size() == 1);
      CHECK(ops.binds.size() == ((mode & FI_MR_ENDPOINT) ? 1U : 0U));
      CHECK((ops.regs[0].requested_key == 0) == ((mode & FI_MR_PROV_KEY) != 0));
      CHECK((r->desc() != nullptr) == ((mode & FI_MR_LOCAL) != 0));
      CHECK(r->descriptor(1).address == ((mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<std::uint64_t>(b.bytes) : 0));
      CHECK(ops.closes.empty());
    }
    REQUIRE(ops.closes.size() == 1);
    CHECK(ops.closes[0] == ops.mrs[0].get());
  }
}

TEST_CASE("destroying a region closes its fid_mr exactly once") {
  FakeMrOps ops;
  Buffer b;
  {
    auto r = MemoryRegion::create_with(ops, policy_of(0), b.bytes, sizeof b.bytes, kAccess);
    REQUIRE(r.has_value());
    CHECK(ops.closes.empty());
  }
  REQUIRE(ops.mrs.size() == 1);
  CHECK(ops.closes.size() == 1);
  CHECK(ops.close_count(ops.mrs[0].get()) == 1);
}

TEST_CASE("moving a region leaves the source inert: one close in total, by the destination") {
  FakeMrOps ops;
  Buffer b;
  {
    auto r = MemoryRegion::create_with(ops, policy_of(FI_MR_LOCAL), b.bytes, sizeof b.bytes, kAccess);
    REQUIRE(r.has_value());
    std::uint64_t key = r->key();
    MemoryRegion moved(std::move(*r));
    CHECK(moved.key() == key);
    CHECK(moved.base() == b.bytes);
    CHECK(moved.desc() == &ops.descs[0]);
    CHECK(ops.closes.empty());
    std::optional<MemoryRegion> holder;
    holder.emplace(std::move(moved));
    CHECK(ops.closes.empty());
    holder.reset();
    CHECK(ops.closes.size() == 1);
  }  // the moved-from objects are destroyed here
  CHECK(ops.closes.size() == 1);
}

TEST_CASE("move-assigning over a live region closes the old one and keeps the new one") {
  FakeMrOps ops;
  Buffer b1, b2;
  auto r1 = MemoryRegion::create_with(ops, policy_of(0), b1.bytes, sizeof b1.bytes, kAccess);
  auto r2 = MemoryRegion::create_with(ops, policy_of(0), b2.bytes, sizeof b2.bytes, kAccess);
  REQUIRE(r1.has_value());
  REQUIRE(r2.has_value());
  std::uint64_t key2 = r2->key();
  *r1 = std::move(*r2);
  REQUIRE(ops.closes.size() == 1);
  CHECK(ops.closes[0] == ops.mrs[0].get());
  CHECK(r1->key() == key2);
  CHECK(r1->base() == b2.bytes);
  MemoryRegion& self = *r1;
  *r1 = std::move(self);  // self-move: harmless
  CHECK(ops.closes.size() == 1);
  CHECK(r1->base() == b2.bytes);
}

TEST_CASE("a null or empty buffer is refused with EINVAL before any registration") {
  FakeMrOps ops;
  Buffer b;
  auto null = MemoryRegion::create_with(ops, policy_of(0), nullptr, 4096, kAccess);
  REQUIRE_FALSE(null.has_value());
  CHECK(null.error().domain == ErrorDomain::posix);
  CHECK(null.error().code == EINVAL);
  auto empty = MemoryRegion::create_with(ops, policy_of(0), b.bytes, 0, kAccess);
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().code == EINVAL);
  CHECK(ops.regs.empty());
}

TEST_CASE("a registration failure other than a key clash is returned in the fabric domain") {
  struct Case {
    int rc;
    int errno_equivalent;
  };
  const Case cases[] = {
      {-FI_EINVAL, EINVAL}, {-FI_ENOMEM, ENOMEM}, {-FI_EACCES, EACCES}, {-FI_EOTHER, EIO}, {-FI_ETOOSMALL, ENOBUFS}};
  for (const Case& c : cases) {
    CAPTURE(c.rc);
    FakeMrOps ops;
    ops.reg_results = {c.rc};
    Buffer b;
    auto r = MemoryRegion::create_with(ops, policy_of(0), b.bytes, sizeof b.bytes, kAccess);
    REQUIRE_FALSE(r.has_value());
    CHECK(ops.regs.size() == 1);  // not retried
    CHECK(r.error().domain == ErrorDomain::fabric);
    CHECK(r.error().code == -c.rc);
    CHECK(r.error().to_errno() == c.errno_equivalent);
    CHECK(ops.closes.empty());
  }
}

TEST_CASE("the shared_ptr passed as keep is held for the region's lifetime") {
  auto ops = std::make_shared<FakeMrOps>();
  std::weak_ptr<FakeMrOps> watch = ops;
  Buffer b;
  auto r = MemoryRegion::create_with(*ops, policy_of(0), b.bytes, sizeof b.bytes, kAccess, ops);
  REQUIRE(r.has_value());
  FakeMrOps* raw = ops.get();
  ops.reset();
  CHECK_FALSE(watch.expired());
  CHECK(raw->closes.empty());
  // Destroying the region closes through the ops it keeps alive, then lets them go.
  std::optional<MemoryRegion> holder(std::move(*r));
  holder.reset();
  CHECK(watch.expired());
}

// --- HostBuffer ---------------------------------------------------------------------------

TEST_CASE("HostBuffer is page-aligned, zero-filled and of the requested size") {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  for (std::size_t size : {std::size_t{1}, std::size_t{100}, page, 3 * page + 5}) {
    CAPTURE(size);
    auto hb = HostBuffer::create(size);
    REQUIRE(hb.has_value());
    CHECK(hb->size() == size);
    REQUIRE(hb->data() != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(hb->data()) % page == 0);
    CHECK(std::all_of(hb->data(), hb->data() + size, [](std::uint8_t v) { return v == 0; }));
    std::memset(hb->data(), 0xa5, size);  // writable
  }
}

TEST_CASE("HostBuffer::create(0) fails with EINVAL") {
  auto hb = HostBuffer::create(0);
  REQUIRE_FALSE(hb.has_value());
  CHECK(hb.error().code == EINVAL);
}

TEST_CASE("a moved HostBuffer leaves the source empty") {
  auto hb = HostBuffer::create(4096);
  REQUIRE(hb.has_value());
  std::uint8_t* p = hb->data();
  HostBuffer moved(std::move(*hb));
  CHECK(moved.data() == p);
  CHECK(moved.size() == 4096);
  CHECK(hb->data() == nullptr);
  CHECK(hb->size() == 0);
}

// --- Mapping and Fd -----------------------------------------------------------------------

TEST_CASE("Mapping::shared maps whole pages of a file, both ways, and refuses an empty one") {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  rpcie::Fd file(::memfd_create("rpcie-mapping-test", MFD_CLOEXEC));
  REQUIRE(file);
  REQUIRE(::ftruncate(file.get(), 100) == 0);
  auto map = rpcie::Mapping::shared(file.get(), 100);
  REQUIRE(map.has_value());
  CHECK(map->size() == page);  // a 100-byte file still maps one page
  map->data()[7] = 0x5a;       // shared: the file sees the store...
  std::uint8_t byte = 0;
  REQUIRE(::pread(file.get(), &byte, 1, 7) == 1);
  CHECK(byte == 0x5a);
  const std::uint8_t other = 0xc3;  // ...and the mapping sees the file's writes
  REQUIRE(::pwrite(file.get(), &other, 1, 9) == 1);
  CHECK(map->data()[9] == 0xc3);

  auto empty = rpcie::Mapping::shared(file.get(), 0);
  REQUIRE_FALSE(empty.has_value());
  CHECK(empty.error().code == EINVAL);
  auto bad = rpcie::Mapping::shared(-1, 100);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == EBADF);
}

TEST_CASE("a move-assigned Mapping unmaps what it held and takes the other's pages") {
  auto a = rpcie::Mapping::anonymous(4096);
  auto b = rpcie::Mapping::anonymous(8192);
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  std::uint8_t* const old = a->data();
  std::uint8_t* const taken = b->data();
  *a = std::move(*b);
  CHECK(a->data() == taken);
  CHECK(a->size() == 8192);
  CHECK_FALSE(*b);
  // The old pages are gone: mincore reports ENOMEM for an unmapped range.
  unsigned char residency = 0;
  CHECK(::mincore(old, 4096, &residency) == -1);
  CHECK(errno == ENOMEM);
}

TEST_CASE("Fd closes on destruction and on move-assignment, once") {
  int raw[2];
  REQUIRE(::pipe2(raw, O_CLOEXEC) == 0);
  {
    rpcie::Fd read_end(raw[0]);
    rpcie::Fd holder(raw[1]);
    rpcie::Fd moved(std::move(holder));
    CHECK_FALSE(holder);
    CHECK(moved.get() == raw[1]);
    moved = rpcie::Fd();  // closes the write end now
    CHECK(::fcntl(raw[1], F_GETFD) == -1);
    CHECK(errno == EBADF);
    char c = 0;
    CHECK(::read(read_end.get(), &c, 1) == 0);  // end of file: no writer is left
  }
  CHECK(::fcntl(raw[0], F_GETFD) == -1);
  CHECK(errno == EBADF);
}

// --- mr_key_random ------------------------------------------------------------------------

TEST_CASE("mr_key_random gives 1000 distinct nonzero keys while they are alive") {
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    std::uint64_t k = rpcie::mr_key_random();
    CHECK(k != 0);
    CHECK((k >> 63) == 0);  // kept below 2^63
    seen.insert(k);
  }
  CHECK(seen.size() == 1000);
}
