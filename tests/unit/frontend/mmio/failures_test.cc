// Failed accesses (all ones / dropped / SIGBUS mode), unsupported instructions, faults
// outside the trapped range, and four threads faulting concurrently.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace rpcie::mmio::test {
namespace {

void device_reset() {
  harness_arm();
  std::memset(device().bytes, 0x11, kBarBytes);
  device().reset();
  device().fail = false;
  harness().mode = FailMode::all_ones;
}

TEST_CASE("a failed access reads all ones, drops the store, and is counted") {
  device_reset();
  device().fail = true;
  const std::uint64_t before = access_failures();
  std::uint64_t v = 0;
  asm volatile("movl 0x10(%[p]), %k[v]" : [v] "=r"(v) : [p] "r"(bar()) : "memory");
  CHECK(v == 0xffffffffu);
  CHECK(harness().last_failed == 1);  // the instruction knows its own failures
  asm volatile("movq %[v], 0x18(%[p])" : : [v] "r"(std::uint64_t{0}), [p] "r"(bar()) : "memory");
  CHECK(device().bytes[0x18] == 0x11);
  CHECK(access_failures() == before + 2);
  // A 16-byte move is two 8-byte accesses: both fail.
  asm volatile("movdqu 0x20(%[p]), %%xmm0" : : [p] "r"(bar()) : "xmm0", "memory");
  CHECK(harness().last_failed == 2);
  device().fail = false;
  // Another thread's failures are not this instruction's.
  access_failures_add(5);
  asm volatile("movl 0x10(%[p]), %k[v]" : [v] "=r"(v) : [p] "r"(bar()) : "memory");
  CHECK(harness().last_failed == 0);
}

TEST_CASE("FailMode::sigbus reports access_failed at the access's address and leaves the registers") {
  device_reset();
  device().fail = true;
  harness().mode = FailMode::sigbus;
  const std::uint64_t before = access_failures();
  std::uint64_t v = 7;
  const Emulation& e = RPCIE_EXPECT_FAULT(asm volatile("movw 0x22(%[p]), %w[v]"
                                                       : [v] "+r"(v)
                                                       : [p] "r"(bar())
                                                       : "memory"));
  CHECK(e.kind == Emulation::Kind::access_failed);
  CHECK(e.address == reinterpret_cast<std::uintptr_t>(bar() + 0x22));
  CHECK(e.failed == 1);
  CHECK(access_failures() == before + 1);
  char line[200];
  const std::size_t n = emulation_describe(e, line, sizeof line);
  CHECK(std::string(line, n).find("failed BAR access") == 0);
  device_reset();
}

TEST_CASE("an unsupported instruction is reported with its bytes and a line naming it") {
  device_reset();
  std::uint64_t v = 0;
  const Emulation& e = RPCIE_EXPECT_FAULT(asm volatile("crc32l 0x30(%[p]), %k[v]"
                                                       : [v] "+r"(v)
                                                       : [p] "r"(bar())
                                                       : "memory"));
  REQUIRE(e.kind == Emulation::Kind::unsupported);
  REQUIRE(e.length >= 5);
  CHECK(e.bytes[0] == 0xf2);  // crc32 r32, r/m32 is F2 (REX) 0F 38 F1 /r
  CHECK(device().size() == 0);
  char line[200];
  const std::size_t n = emulation_describe(e, line, sizeof line);
  const std::string text(line, n);
  CHECK(text.find("unsupported instruction at 0x") == 0);
  CHECK(text.find("(crc32)") != std::string::npos);
  CHECK(text.find(" f2 ") != std::string::npos);
  // Truncation keeps a terminated prefix.
  char small[10];
  CHECK(emulation_describe(e, small, sizeof small) == 9);
  CHECK(std::string(small) == "unsupport");
}

TEST_CASE("a fault outside every trapped range is not_trapped") {
  ucontext_t context = {};
  const Emulation e = instruction_emulate(context, 0x1000, harness().traps, FailMode::all_ones);
  CHECK(e.kind == Emulation::Kind::not_trapped);
}

TEST_CASE("four threads, each storing and loading its own offsets, keep their own order") {
  device_reset();
  constexpr unsigned kThreads = 4, kRounds = 2000;
  std::vector<std::thread> threads;
  std::atomic<unsigned> wrong{0};
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &wrong] {
      auto* slot = bar() + 0x1000 + 64 * t;
      for (std::uint32_t i = 0; i < kRounds; ++i) {
        const std::uint32_t value = t << 24 | i;
        asm volatile("movl %k[v], (%[p])" : : [v] "r"(value), [p] "r"(slot) : "memory");
        std::uint32_t back = 0;
        asm volatile("movl (%[p]), %k[v]" : [v] "=r"(back) : [p] "r"(slot) : "memory");
        if (back != value) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(wrong.load() == 0);
  REQUIRE(device().size() == kThreads * kRounds * 2);
  std::uint32_t next[kThreads] = {};
  for (std::size_t i = 0; i < device().size(); ++i) {
    const Access& a = device().log[i];
    const std::uint64_t t = (a.offset - 0x1000) / 64;
    REQUIRE(t < kThreads);
    if (!a.store) continue;
    CHECK(a.value == (t << 24 | next[t]));
    ++next[t];
  }
}

}  // namespace
}  // namespace rpcie::mmio::test
