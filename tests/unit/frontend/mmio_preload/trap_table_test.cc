// The trap table of librpcie-mmio.so: lookups, munmap/mprotect carving, capacity, port
// release deferred past readers (grace periods, bounded waits), and lock-free finds racing
// a writer, also under real faults.
#include <doctest/doctest.h>
#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "trap_table.hpp"

using namespace rpcie::mmio;

namespace {

class NullPort final : public BarPort {
 public:
  bool load(std::uint64_t, unsigned, std::uint64_t&) noexcept override { return false; }
  bool store(std::uint64_t, unsigned, std::uint64_t) noexcept override { return false; }
};

std::vector<BarPort*> released;
void release_record(BarPort* port) noexcept { released.push_back(port); }

TrapEntry trapped(std::uintptr_t base, std::size_t length, std::uint64_t bar_offset, BarPort* port,
                  int prot = PROT_READ | PROT_WRITE) {
  TrapEntry e;
  e.range = TrapRange{base, length, bar_offset, port};
  e.kind = EntryKind::trapped;
  e.prot = prot;
  e.writable = true;
  return e;
}

}  // namespace

TEST_CASE("find answers inside a trapped range only, and memory entries are not trapped") {
  TrapTable table;
  NullPort port;
  REQUIRE(table.insert(trapped(0x10000, 0x2000, 0x4000, &port)) == 0);
  TrapEntry memory;
  memory.range = TrapRange{0x40000, 0x1000, 0, nullptr};
  memory.kind = EntryKind::memory;
  REQUIRE(table.insert(memory) == 0);
  CHECK(table.find(0xffff) == nullptr);
  REQUIRE(table.find(0x10000) != nullptr);
  CHECK(table.find(0x11fff)->bar_offset == 0x4000);
  CHECK(table.find(0x11fff)->port == &port);
  CHECK(table.find(0x12000) == nullptr);
  CHECK(table.find(0x40000) == nullptr);
  REQUIRE(table.entry_find(0x40000) != nullptr);
  CHECK(table.entry_find(0x40000)->kind == EntryKind::memory);
  CHECK(table.overlaps(0x11000, 0x10000));
  CHECK_FALSE(table.overlaps(0x12000, 0x1000));
  CHECK(table.size() == 2);
}

TEST_CASE("munmap of the middle splits a range and keeps each piece's BAR offset") {
  released.clear();
  TrapTable table(release_record);
  NullPort port;
  REQUIRE(table.insert(trapped(0x10000, 0x4000, 0x100000, &port)) == 0);
  REQUIRE(table.remove(0x11000, 0x1000) == 0);
  CHECK(table.size() == 2);
  CHECK(table.find(0x10fff)->bar_offset == 0x100000);
  CHECK(table.find(0x11000) == nullptr);
  const TrapRange* right = table.find(0x12000);
  REQUIRE(right != nullptr);
  CHECK(right->base == 0x12000);
  CHECK(right->length == 0x2000);
  CHECK(right->bar_offset == 0x102000);
  // Head and tail: the pieces shrink; the port stays while a piece refers to it.
  REQUIRE(table.remove(0x0f000, 0x2000) == 0);
  REQUIRE(table.remove(0x13000, 0x1000) == 0);
  table.reclaim();
  CHECK(released.empty());
  CHECK(table.find(0x12000)->length == 0x1000);
  CHECK(table.find(0x10000) == nullptr);
  // The last piece goes: the port is released once.
  REQUIRE(table.remove(0x12000, 0x1000) == 0);
  table.reclaim();
  CHECK(table.size() == 0);
  REQUIRE(released.size() == 1);
  CHECK(released[0] == &port);
}

TEST_CASE("a port is released only after the last reader section ends") {
  released.clear();
  TrapTable table(release_record);
  NullPort port;
  REQUIRE(table.insert(trapped(0x10000, 0x1000, 0, &port)) == 0);
  {
    TrapTable::Reader reader(table);
    const TrapRange* range = table.find(0x10000);
    REQUIRE(table.remove(0x10000, 0x1000) == 0);
    table.reclaim();
    CHECK(released.empty());
    CHECK(range->port == &port);  // still readable inside the section
  }
  table.reclaim();
  CHECK(released.size() == 1);
}

TEST_CASE("protect records the program's protection on the trapped pieces it covers") {
  TrapTable table;
  NullPort port;
  REQUIRE(table.insert(trapped(0x10000, 0x3000, 0, &port)) == 0);
  REQUIRE(table.protect(0x11000, 0x1000, PROT_READ) == 0);
  CHECK(table.size() == 3);
  CHECK(table.entry_find(0x10000)->prot == (PROT_READ | PROT_WRITE));
  CHECK(table.entry_find(0x11000)->prot == PROT_READ);
  CHECK(table.entry_find(0x11000)->range.bar_offset == 0x1000);
  CHECK(table.entry_find(0x12000)->prot == (PROT_READ | PROT_WRITE));
  TrapEntry out[4];
  REQUIRE(table.overlapping(0, 0x100000, out, 4) == 3);
  CHECK(out[0].range.base == 0x10000);
  CHECK(out[1].range.base == 0x11000);
  CHECK(out[2].range.base == 0x12000);
}

TEST_CASE("a full table answers ENOMEM and a split it cannot hold changes nothing") {
  TrapTable table;
  NullPort port;
  for (std::size_t i = 0; i < TrapTable::kCapacity; ++i)
    REQUIRE(table.insert(trapped(0x100000 + i * 0x10000, 0x3000, 0, &port)) == 0);
  CHECK(table.insert(trapped(0x10, 0x1000, 0, &port)) == ENOMEM);
  CHECK(table.remove(0x101000, 0x1000) == ENOMEM);  // a split needs a slot
  CHECK(table.protect(0x101000, 0x1000, PROT_READ) == ENOMEM);
  CHECK(table.size() == TrapTable::kCapacity);
  CHECK(table.find(0x101000) != nullptr);
  CHECK(table.entry_find(0x101000)->prot == (PROT_READ | PROT_WRITE));
  REQUIRE(table.remove(0x100000, 0x3000) == 0);  // whole: no slot needed
  CHECK(table.insert(trapped(0x10, 0x1000, 0, &port)) == 0);
}

TEST_CASE("finds racing a writer always see a whole entry") {
  TrapTable table;
  NullPort steady_port, churn_port;
  REQUIRE(table.insert(trapped(0x10000, 0x1000, 0x5000, &steady_port)) == 0);
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, seen{0};
  auto reader = [&] {
    while (!stop.load()) {
      TrapTable::Reader section(table);
      const TrapRange* steady = table.find(0x10800);
      if (steady == nullptr || steady->bar_offset != 0x5000 || steady->port != &steady_port) ++bad;
      const TrapRange* churn = table.find(0x21800);
      if (churn != nullptr) {
        ++seen;
        // Every shape the writer publishes maps 0x21800 to BAR offset 0x1800 + 0x7000.
        if (churn->port != &churn_port || churn->bar_offset + (0x21800 - churn->base) != 0x8800 ||
            0x21800 - churn->base >= churn->length)
          ++bad;
      }
      section.leave();  // out of the section before yielding
      std::this_thread::yield();
    }
  };
  // Retired entries wait for a moment without readers: ENOMEM until then (readers yield).
  auto until_done = [](auto&& write) {
    int rc;
    while ((rc = write()) == ENOMEM) std::this_thread::yield();
    return rc;
  };
  std::thread r1(reader), r2(reader);
  for (int i = 0; i < 5000; ++i) {
    REQUIRE(until_done([&] { return table.insert(trapped(0x20000, 0x4000, 0x7000, &churn_port)); }) == 0);
    REQUIRE(until_done([&] { return table.remove(0x20000, 0x1000); }) == 0);  // head
    REQUIRE(until_done([&] { return table.protect(0x22000, 0x1000, PROT_READ); }) == 0);
    REQUIRE(until_done([&] { return table.remove(0x20000, 0x4000); }) == 0);
  }
  stop = true;
  r1.join();
  r2.join();
  CHECK(bad.load() == 0);
  CHECK(table.size() == 1);
  MESSAGE("churn range seen " << seen.load() << " times");
}

TEST_CASE("a grace period waits for the sections begun before the retirement only") {
  released.clear();
  TrapTable table(release_record);
  NullPort port;
  REQUIRE(table.insert(trapped(0x10000, 0x1000, 0, &port)) == 0);
  TrapTable::Reader old_section(table);
  REQUIRE(table.remove(0x10000, 0x1000) == 0);
  table.reclaim();  // starts the grace period: old_section holds it
  CHECK(released.empty());
  CHECK(table.retired_pending());
  TrapTable::Reader young_section(table);  // begun after the retirement: cannot see the entry
  old_section.leave();
  CHECK(table.reclaim_wait(1000));
  CHECK(released.size() == 1);
  CHECK_FALSE(table.retired_pending());
  young_section.leave();
}

TEST_CASE("reclaim_wait gives up at its deadline and keeps the port until the section ends") {
  released.clear();
  TrapTable table(release_record);
  NullPort port;
  REQUIRE(table.insert(trapped(0x10000, 0x1000, 0, &port)) == 0);
  TrapTable::Reader stuck(table);  // a handler that does not come back in time
  const TrapRange* range = table.find(0x10000);
  REQUIRE(table.remove(0x10000, 0x1000) == 0);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(table.reclaim_wait(50));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(50));
  CHECK(waited < std::chrono::seconds(2));
  CHECK(released.empty());  // neither released ...
  CHECK(range->port == &port);
  NullPort other;
  REQUIRE(table.insert(trapped(0x30000, 0x1000, 0x1000, &other)) == 0);  // ... nor its record reused
  CHECK(range->base == 0x10000);
  CHECK(range->bar_offset == 0);
  REQUIRE(table.remove(0x30000, 0x1000) == 0);
  stuck.leave();
  CHECK(table.reclaim_wait(1000));
  REQUIRE(released.size() == 2);
  CHECK(released[0] == &port);
}

// Real faults: four threads load from the range a fifth maps and unmaps over and over. The
// test's SIGSEGV handler stands for librpcie-mmio.so's: inside a Reader section it finds the
// entry, checks that neither the entry nor its port changed under it, and resumes after the
// 3-byte `mov (%rdi), %rax` with the value in RAX.
namespace {

struct StormPort final : public BarPort {
  std::atomic<std::uint64_t> generation{0};  // 0: released
  bool load(std::uint64_t, unsigned, std::uint64_t&) noexcept override { return false; }
  bool store(std::uint64_t, unsigned, std::uint64_t) noexcept override { return false; }
};

constexpr std::size_t kStormPorts = 4;
StormPort storm_ports[kStormPorts];
TrapTable* storm_table = nullptr;
std::atomic<long> storm_bad{0}, storm_hits{0}, storm_strays{0};

void storm_release(BarPort* port) noexcept { static_cast<StormPort*>(port)->generation.store(0); }

void storm_fault(int, siginfo_t* info, void* context) {
  auto& gregs = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  TrapTable::Reader section(*storm_table);
  std::uint64_t value = ~0ull;
  if (const TrapRange* range = storm_table->find(address)) {
    const std::uint64_t offset = range->bar_offset;
    auto* port = static_cast<StormPort*>(range->port);
    for (int i = 0; i < 200; ++i) std::atomic_signal_fence(std::memory_order_seq_cst);  // stay a while
    if (port->generation.load() != offset >> 20 || range->bar_offset != offset ||
        !(address - range->base < range->length))
      ++storm_bad;
    value = offset + (address - range->base);
    ++storm_hits;
  } else {
    ++storm_strays;  // unmapped (or kept reserved) before the handler looked
  }
  gregs[REG_RAX] = static_cast<greg_t>(value);
  gregs[REG_RIP] += 3;
}

std::uint64_t storm_load(std::uintptr_t address) {
  std::uint64_t value;
  asm volatile(".byte 0x48, 0x8b, 0x07" : "=a"(value) : "D"(address) : "memory");  // mov (%rdi), %rax
  return value;
}

}  // namespace

TEST_CASE("munmap's bounded wait under constant faulting on four threads") {
  TrapTable table(storm_release);
  storm_table = &table;
  struct sigaction action {
  }, old{};
  action.sa_sigaction = storm_fault;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGSEGV, &action, &old) == 0);
  std::atomic<std::uintptr_t> current{0};
  std::atomic<bool> stop{false};
  auto fault = [&] {
    while (!stop.load())
      if (const std::uintptr_t base = current.load()) static_cast<void>(storm_load(base + 0x1008));
  };
  std::vector<std::thread> faulting;
  for (int i = 0; i < 4; ++i) faulting.emplace_back(fault);
  constexpr int kRounds = 400;
  int waited = 0, kept = 0;
  std::uint64_t generation = 0;
  for (int round = 0; round < kRounds; ++round) {
    StormPort* port = nullptr;
    for (auto& p : storm_ports)
      if (port == nullptr && p.generation.load() == 0) port = &p;
    if (port == nullptr && table.reclaim_wait(TrapTable::kReclaimTimeoutMs)) continue;  // ports came back
    REQUIRE(port != nullptr);
    port->generation.store(++generation);
    void* p = mmap(nullptr, 0x4000, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(p != MAP_FAILED);
    const auto base = reinterpret_cast<std::uintptr_t>(p);
    REQUIRE(table.insert(trapped(base, 0x4000, generation << 20, port)) == 0);
    current.store(base);
    // Until the range has been faulted on a few times (at most 20 ms: a loaded machine).
    const long hits = storm_hits.load();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    while (storm_hits.load() < hits + 4 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    current.store(0);
    REQUIRE(table.remove(base, 0x4000) == 0);
    if (table.reclaim_wait(TrapTable::kReclaimTimeoutMs)) {
      ++waited;
      REQUIRE(munmap(p, 0x4000) == 0);
    } else {
      ++kept;  // stays reserved, as librpcie-mmio.so's munmap does
    }
  }
  stop = true;
  for (auto& t : faulting) t.join();
  REQUIRE(sigaction(SIGSEGV, &old, nullptr) == 0);
  CHECK(table.reclaim_wait(1000));
  for (auto& p : storm_ports) CHECK(p.generation.load() == 0);
  CHECK(storm_bad.load() == 0);
  CHECK(storm_hits.load() > 0);
  CHECK(waited >= kRounds * 9 / 10);  // the sections begun later never hold a wait up
  MESSAGE("rounds " << kRounds << ": " << waited << " waits ended, " << kept << " kept reserved; faults "
                    << storm_hits.load() << " emulated, " << storm_strays.load() << " after the unmap");
}
