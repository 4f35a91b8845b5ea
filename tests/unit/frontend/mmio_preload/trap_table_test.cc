// The trap table of librpcie-mmio.so: lookups, munmap/mprotect carving, capacity, port
// release deferred past readers, and lock-free finds racing a writer.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
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
