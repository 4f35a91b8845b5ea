// One test per instruction class, executed for real on the trapped range: the value in the
// destination, RFLAGS (against the same instruction on ordinary memory), and the device's
// access log (direction, offset, width, value, order, count).
#include <doctest/doctest.h>

#include <string>

#include "harness.hpp"

namespace rpcie::mmio::test {
namespace {

std::uint64_t device_value(std::size_t offset, unsigned width) {
  std::uint64_t v = 0;
  std::memcpy(&v, device().bytes + offset, width);
  return v;
}

void log_check(std::size_t i, bool store, std::uint64_t offset, unsigned width, std::uint64_t value) {
  REQUIRE(i < device().size());
  CHECK(device().log[i].store == store);
  CHECK(device().log[i].offset == offset);
  CHECK(device().log[i].width == width);
  CHECK(device().log[i].value == value);
}

// Runs `insn` (operands: %[p] pointer, %[v] value register) with `flags_in` loaded, and
// returns the RFLAGS after it.
#define RUN_FLAGS(insn, ptr, val, flags_in)                               \
  [&] {                                                                   \
    std::uint64_t fo = 0;                                                 \
    asm volatile("lea -128(%%rsp), %%rsp\n\tpush %[fi]\n\tpopfq\n\t" insn \
                 "\n\tpushfq\n\tpop %[fo]\n\tlea 128(%%rsp), %%rsp"       \
                 : [fo] "=&r"(fo), [v] "+r"(val)                          \
                 : [p] "r"(ptr), [fi] "r"(flags_in)                       \
                 : "cc", "memory");                                       \
    return fo;                                                            \
  }()

TEST_CASE("MOV loads of 1, 2, 4 and 8 bytes are one access each of their width") {
  device_fill(7, 3);
  std::uint64_t v = ~std::uint64_t{0};
  asm volatile("movb 0x10(%[p]), %b[v]" : [v] "+r"(v) : [p] "r"(bar()) : "memory");
  CHECK(v == (0xffffffffffffff00u | device_value(0x10, 1)));
  asm volatile("movw 0x20(%[p]), %w[v]" : [v] "+r"(v) : [p] "r"(bar()) : "memory");
  CHECK((v & 0xffff) == device_value(0x20, 2));
  asm volatile("movl 0x40(%[p]), %k[v]" : [v] "+r"(v) : [p] "r"(bar()) : "memory");
  CHECK(v == device_value(0x40, 4));  // a 32-bit write zero-extends
  asm volatile("movq 0x80(%[p]), %q[v]" : [v] "+r"(v) : [p] "r"(bar()) : "memory");
  CHECK(v == device_value(0x80, 8));
  REQUIRE(device().size() == 4);
  log_check(0, false, 0x10, 1, device_value(0x10, 1));
  log_check(1, false, 0x20, 2, device_value(0x20, 2));
  log_check(2, false, 0x40, 4, device_value(0x40, 4));
  log_check(3, false, 0x80, 8, device_value(0x80, 8));
}

TEST_CASE("MOV stores of registers and immediates, MOVNTI, and a moffs-free RIP-independent address") {
  device_fill(7, 3);
  std::uint64_t v = 0x1122334455667788u;
  asm volatile("movb %b[v], 0x1(%[p])" : : [v] "r"(v), [p] "r"(bar()) : "memory");
  asm volatile("movw %w[v], 0x2(%[p])" : : [v] "r"(v), [p] "r"(bar()) : "memory");
  asm volatile("movl %k[v], 0x4(%[p])" : : [v] "r"(v), [p] "r"(bar()) : "memory");
  asm volatile("movq %q[v], 0x8(%[p])" : : [v] "r"(v), [p] "r"(bar()) : "memory");
  asm volatile("movq $-2, 0x10(%[p])" : : [p] "r"(bar()) : "memory");
  asm volatile("movl $0xdeadbeef, 0x18(%[p])" : : [p] "r"(bar()) : "memory");
  asm volatile("movnti %q[v], 0x20(%[p])" : : [v] "r"(v), [p] "r"(bar()) : "memory");
  std::uint64_t index = 3;
  asm volatile("movw $0x4242, 0x20(%[p],%[i],8)" : : [p] "r"(bar()), [i] "r"(index) : "memory");
  REQUIRE(device().size() == 8);
  log_check(0, true, 0x1, 1, 0x88);
  log_check(1, true, 0x2, 2, 0x7788);
  log_check(2, true, 0x4, 4, 0x55667788);
  log_check(3, true, 0x8, 8, v);
  log_check(4, true, 0x10, 8, 0xfffffffffffffffeu);
  log_check(5, true, 0x18, 4, 0xdeadbeef);
  log_check(6, true, 0x20, 8, v);
  log_check(7, true, 0x38, 2, 0x4242);
  CHECK(device_value(0x8, 8) == v);
}

TEST_CASE("MOVZX, MOVSX, MOVSXD and MOVBE extend or swap what one access read") {
  device_fill(7, 3);
  device().bytes[0x30] = 0x85;
  device().bytes[0x32] = 0x34;
  device().bytes[0x33] = 0x92;
  const std::uint32_t d = 0x80000001u;
  std::memcpy(device().bytes + 0x34, &d, 4);
  std::uint64_t zx = 0, sx = 0, sxd = 0, sxw = 0, be = 0;
  asm volatile("movzbl 0x30(%[p]), %k[v]" : [v] "=r"(zx) : [p] "r"(bar()) : "memory");
  asm volatile("movsbq 0x30(%[p]), %q[v]" : [v] "=r"(sx) : [p] "r"(bar()) : "memory");
  asm volatile("movswq 0x32(%[p]), %q[v]" : [v] "=r"(sxw) : [p] "r"(bar()) : "memory");
  asm volatile("movslq 0x34(%[p]), %q[v]" : [v] "=r"(sxd) : [p] "r"(bar()) : "memory");
  asm volatile("movbe 0x34(%[p]), %k[v]" : [v] "=r"(be) : [p] "r"(bar()) : "memory");
  CHECK(zx == 0x85);
  CHECK(sx == 0xffffffffffffff85u);
  CHECK(sxw == 0xffffffffffff9234u);
  CHECK(sxd == 0xffffffff80000001u);
  CHECK(be == 0x01000080u);
  REQUIRE(device().size() == 5);
  log_check(0, false, 0x30, 1, 0x85);
  log_check(2, false, 0x32, 2, 0x9234);
  log_check(3, false, 0x34, 4, d);
}

TEST_CASE("an unaligned access is split into the widest aligned pieces, ascending") {
  device_fill(7, 3);
  std::uint64_t v = 0;
  asm volatile("movl 0x3(%[p]), %k[v]" : [v] "=r"(v) : [p] "r"(bar()) : "memory");
  CHECK(v == device_value(0x3, 4));
  REQUIRE(device().size() == 3);
  log_check(0, false, 0x3, 1, device_value(0x3, 1));
  log_check(1, false, 0x4, 2, device_value(0x4, 2));
  log_check(2, false, 0x6, 1, device_value(0x6, 1));
}

// Read-modify-write: the same instruction on ordinary memory gives the expected value and
// flags; on the BAR it is one load then one store of the same width at the same offset.
template <class Op>
void rmw_check(const std::string name, std::uint32_t initial, std::uint32_t operand, std::uint64_t flags_in, Op op) {
  CAPTURE(name);
  CAPTURE(initial);
  CAPTURE(operand);
  CAPTURE(flags_in);
  device_fill(7, 3);
  std::memcpy(device().bytes + 0x40, &initial, 4);
  std::uint32_t plain = initial;
  std::uint64_t v1 = operand, v2 = operand;
  const std::uint64_t expected_flags = op(reinterpret_cast<std::uint8_t*>(&plain), v1, flags_in);
  const std::uint64_t flags = op(bar() + 0x40, v2, flags_in);
  CHECK((flags & kStatus) == (expected_flags & kStatus));
  CHECK(device_value(0x40, 4) == plain);
  CHECK(v1 == v2);
}

#define RMW(insn) [](std::uint8_t* p, std::uint64_t& v, std::uint64_t fi) { return RUN_FLAGS(insn, p, v, fi); }

TEST_CASE("read-modify-write instructions compute the CPU's value and RFLAGS") {
  const std::uint32_t values[] = {0, 1, 0x7fffffff, 0x80000000u, 0xffffffffu, 0x12345678};
  const std::uint64_t flag_sets[] = {0x202, 0x202 | kStatus};
  for (const std::uint32_t a : values) {
    for (const std::uint32_t b : values) {
      for (const std::uint64_t f : flag_sets) {
        rmw_check("add", a, b, f, RMW("addl %k[v], (%[p])"));
        rmw_check("or", a, b, f, RMW("orl %k[v], (%[p])"));
        rmw_check("and", a, b, f, RMW("andl %k[v], (%[p])"));
        rmw_check("sub", a, b, f, RMW("subl %k[v], (%[p])"));
        rmw_check("xor", a, b, f, RMW("xorl %k[v], (%[p])"));
        rmw_check("adc", a, b, f, RMW("adcl %k[v], (%[p])"));
        rmw_check("sbb", a, b, f, RMW("sbbl %k[v], (%[p])"));
        rmw_check("cmp", a, b, f, RMW("cmpl %k[v], (%[p])"));
        rmw_check("cmp reg,mem", a, b, f, RMW("cmpl (%[p]), %k[v]"));
        rmw_check("test", a, b, f, RMW("testl %k[v], (%[p])"));
        rmw_check("add reg,mem", a, b, f, RMW("addl (%[p]), %k[v]"));
        rmw_check("bt", a, b & 31, f, RMW("btl %k[v], (%[p])"));
        rmw_check("bts", a, b & 31, f, RMW("btsl %k[v], (%[p])"));
      }
      rmw_check("or imm8", a, 0, 0x202, RMW("orb $0x81, 1(%[p])"));
      rmw_check("sub imm", a, 0, 0x202, RMW("subw $-3, 2(%[p])"));
      rmw_check("bt imm", a, 0, 0x202, RMW("btl $31, (%[p])"));
    }
    for (const std::uint64_t f : flag_sets) {
      rmw_check("inc", a, 0, f, RMW("incl (%[p])"));
      rmw_check("dec", a, 0, f, RMW("decl (%[p])"));
      rmw_check("not", a, 0, f, RMW("notl (%[p])"));
      rmw_check("neg", a, 0, f, RMW("negl (%[p])"));
      rmw_check("neg8", a, 0, f, RMW("negb 3(%[p])"));
      rmw_check("lock add", a, 5, f, RMW("lock addl %k[v], (%[p])"));
      rmw_check("xchg", a, 5, f, RMW("xchgl %k[v], (%[p])"));
      rmw_check("xadd", a, 0x7fffffff, f, RMW("lock xaddl %k[v], (%[p])"));
    }
  }
}

TEST_CASE("a read-modify-write is one load then one store; CMP, TEST and BT only load") {
  device_fill(7, 3);
  std::uint64_t v = 0x0f;
  (void)RUN_FLAGS("lock orl %k[v], 0x40(%[p])", bar(), v, std::uint64_t{0x202});
  const std::uint64_t before = device().log[0].value;
  REQUIRE(device().size() == 2);
  log_check(0, false, 0x40, 4, before);
  log_check(1, true, 0x40, 4, before | 0x0f);
  device().reset();
  (void)RUN_FLAGS("cmpq %q[v], 0x48(%[p])", bar(), v, std::uint64_t{0x202});
  (void)RUN_FLAGS("testw %w[v], 0x50(%[p])", bar(), v, std::uint64_t{0x202});
  (void)RUN_FLAGS("btq %q[v], 0x58(%[p])", bar(), v, std::uint64_t{0x202});
  REQUIRE(device().size() == 3);
  CHECK((device().log[0].store == false && device().log[0].width == 8 && device().log[0].offset == 0x48));
  CHECK((device().log[1].store == false && device().log[1].width == 2 && device().log[1].offset == 0x50));
  CHECK((device().log[2].store == false && device().log[2].width == 8 && device().log[2].offset == 0x58));
}

TEST_CASE("BT with a register offset addresses the bit string beyond the operand") {
  device_fill(7, 3);
  std::uint64_t bit = 64 * 2 + 5;  // third quadword, bit 5
  const std::uint64_t flags = RUN_FLAGS("btsq %q[v], 0x40(%[p])", bar(), bit, std::uint64_t{0x202});
  REQUIRE(device().size() == 2);
  CHECK(device().log[0].offset == 0x50);
  CHECK(device().log[1].offset == 0x50);
  CHECK(device().log[1].value == (device().log[0].value | 0x20));
  CHECK((flags & 1) == ((device().log[0].value >> 5) & 1));
}

TEST_CASE("CMPXCHG stores the source when equal and loads the accumulator when not") {
  device_fill(7, 3);
  const std::uint32_t old = 0x1234;
  std::memcpy(device().bytes + 0x60, &old, 4);
  std::uint64_t rax = 0x1234, src = 0x5678, flags = 0;
  asm volatile(
      "lea -128(%%rsp), %%rsp\n\tlock cmpxchgl %k[s], 0x60(%[p])\n\tpushfq\n\tpop %[f]\n\tlea 128(%%rsp), %%rsp"
      : "+a"(rax), [f] "=&r"(flags)
      : [s] "r"(src), [p] "r"(bar())
      : "cc", "memory");
  CHECK((flags & std::uint64_t{0x40}) != 0);
  CHECK(device_value(0x60, 4) == 0x5678);
  rax = 0x1111;
  asm volatile(
      "lea -128(%%rsp), %%rsp\n\tlock cmpxchgl %k[s], 0x60(%[p])\n\tpushfq\n\tpop %[f]\n\tlea 128(%%rsp), %%rsp"
      : "+a"(rax), [f] "=&r"(flags)
      : [s] "r"(src), [p] "r"(bar())
      : "cc", "memory");
  CHECK((flags & std::uint64_t{0x40}) == 0);
  CHECK(rax == 0x5678);
  REQUIRE(device().size() == 3);  // load, store; load
  CHECK(device().log[1].store);
  CHECK_FALSE(device().log[2].store);
}

}  // namespace
}  // namespace rpcie::mmio::test
