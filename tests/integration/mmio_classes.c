/* One case per instruction class on a mapped register BAR, as an unchanged program executes
 * it (run under `rpcie run`, built without sanitizers at -O2; inline asm where a compiler
 * would not emit the instruction). The device is membar with doorbell=on and scratch=on:
 * BAR4 (resource4) is 4 KiB of plain registers, BAR2's OFFSET register (8 B at 0x08) takes
 * the case markers.
 *   mmio_classes DEVICE_DIR
 * For each case it stores the case's number into BAR2's OFFSET (the marker the checker
 * splits the exporter's access log at), performs the case, checks values and flags against
 * the same instruction on ordinary memory, and prints what the device must have seen:
 *   case N NAME
 *   want read|write OFFSET WIDTH VALUE   exactly these BAR4 accesses, in this order
 *   image OFFSET LENGTH FNV              (glibc string functions, whose exact accesses are
 *   cover OFFSET LENGTH                   glibc's business) BAR4 bytes after the case hash
 *   within OFFSET LENGTH                  to FNV / reads cover the range / no access outside
 *   readonly                              no BAR4 store in the case
 * mmio_classes_check.py compares this with the access log. Exit 0, or 1 naming the first
 * value or flag that differed (on stderr). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint8_t* R;          /* BAR4: 4 KiB of plain registers */
static volatile uint8_t* M; /* BAR2: the marker register */
static unsigned case_number;
static int failures;

#define AT(type, off) ((type*)(R + (off)))
/* RFLAGS after the instruction, below the red zone (pushf would overwrite it). */
#define FLAGS_GET "\n\tlea -128(%%rsp), %%rsp\n\tpushfq\n\tpopq %[f]\n\tlea 128(%%rsp), %%rsp"
#define FLAGS_STATUS 0x8d5ull /* CF PF AF ZF SF OF */

static void case_begin(const char* name) {
  printf("case %u %s\n", ++case_number, name);
  *(volatile uint64_t*)(M + 0x08) = case_number;
}
static void want(const char* what, unsigned off, unsigned width, uint64_t value) {
  printf("want %s %u %u %llu\n", what, off, width, (unsigned long long)value);
}
/* A function, so that `got` (often a load from the BAR) is evaluated once. */
static void check_eq(const char* what, uint64_t got, uint64_t expected) {
  if (got == expected) return;
  fprintf(stderr, "mmio_classes: case %u: %s: got 0x%llx, want 0x%llx\n", case_number, what, (unsigned long long)got,
          (unsigned long long)expected);
  ++failures;
}
#define CHECK_EQ(what, got, expected) check_eq(what, (uint64_t)(got), (uint64_t)(expected))
typedef uint8_t v16[16];
typedef uint8_t v32[32];

static uint64_t width_mask(unsigned width) { return width == 8 ? ~0ull : (1ull << (8 * width)) - 1; }

/* A plain store that the test makes to prepare a case (one MOV of its width). */
static void put(unsigned off, unsigned width, uint64_t value) {
  switch (width) {
    case 1:
      *(volatile uint8_t*)(R + off) = (uint8_t)value;
      break;
    case 2:
      *(volatile uint16_t*)(R + off) = (uint16_t)value;
      break;
    case 4:
      *(volatile uint32_t*)(R + off) = (uint32_t)value;
      break;
    default:
      *(volatile uint64_t*)(R + off) = value;
      break;
  }
  want("write", off, width, value & width_mask(width));
}

static void case_mov(void) {
  case_begin("mov_store_register");
  uint8_t b = 0x81;
  uint16_t w = 0x8283;
  uint32_t d = 0x84858687;
  uint64_t q = 0x88898a8b8c8d8e8full;
  __asm__ volatile("movb %[b], %[m1]\n\tmovw %[w], %[m2]\n\tmovl %[d], %[m4]\n\tmovq %[q], %[m8]"
                   : [m1] "=m"(*AT(uint8_t, 0x10)), [m2] "=m"(*AT(uint16_t, 0x12)), [m4] "=m"(*AT(uint32_t, 0x14)),
                     [m8] "=m"(*AT(uint64_t, 0x18))
                   : [b] "q"(b), [w] "r"(w), [d] "r"(d), [q] "r"(q));
  want("write", 0x10, 1, b), want("write", 0x12, 2, w), want("write", 0x14, 4, d), want("write", 0x18, 8, q);

  case_begin("mov_store_immediate");
  __asm__ volatile("movb $0x5a, %[m1]\n\tmovw $0x1234, %[m2]\n\tmovl $0xdeadbeef, %[m4]\n\tmovq $-2, %[m8]"
                   : [m1] "=m"(*AT(uint8_t, 0x21)), [m2] "=m"(*AT(uint16_t, 0x22)), [m4] "=m"(*AT(uint32_t, 0x24)),
                     [m8] "=m"(*AT(uint64_t, 0x28)));
  want("write", 0x21, 1, 0x5a), want("write", 0x22, 2, 0x1234), want("write", 0x24, 4, 0xdeadbeef);
  want("write", 0x28, 8, 0xfffffffffffffffeull);

  case_begin("mov_load");
  __asm__ volatile("movb %[m1], %b[b]\n\tmovw %[m2], %w[w]\n\tmovl %[m4], %k[d]\n\tmovq %[m8], %q[q]"
                   : [b] "=&q"(b), [w] "=&r"(w), [d] "=&r"(d), [q] "=&r"(q)
                   : [m1] "m"(*AT(uint8_t, 0x10)), [m2] "m"(*AT(uint16_t, 0x22)), [m4] "m"(*AT(uint32_t, 0x14)),
                     [m8] "m"(*AT(uint64_t, 0x28)));
  CHECK_EQ("movb load", b, 0x81), CHECK_EQ("movw load", w, 0x1234), CHECK_EQ("movl load", d, 0x84858687);
  CHECK_EQ("movq load", q, 0xfffffffffffffffeull);
  want("read", 0x10, 1, 0x81), want("read", 0x22, 2, 0x1234), want("read", 0x14, 4, 0x84858687);
  want("read", 0x28, 8, 0xfffffffffffffffeull);
}

static void case_extend(void) {
  case_begin("movzx_movsx_movsxd");
  put(0x30, 1, 0x80), put(0x32, 2, 0x8001), put(0x34, 4, 0x80000001);
  uint32_t zb, zw;
  uint64_t sb, sw, sd;
  __asm__ volatile(
      "movzbl %[m1], %[zb]\n\tmovsbq %[m1], %[sb]\n\tmovzwl %[m2], %[zw]\n\tmovswq %[m2], %[sw]\n\tmovslq %[m4], %[sd]"
      : [zb] "=&r"(zb), [sb] "=&r"(sb), [zw] "=&r"(zw), [sw] "=&r"(sw), [sd] "=&r"(sd)
      : [m1] "m"(*AT(uint8_t, 0x30)), [m2] "m"(*AT(uint16_t, 0x32)), [m4] "m"(*AT(uint32_t, 0x34)));
  CHECK_EQ("movzbl", zb, 0x80), CHECK_EQ("movsbq", sb, 0xffffffffffffff80ull), CHECK_EQ("movzwl", zw, 0x8001);
  CHECK_EQ("movswq", sw, 0xffffffffffff8001ull), CHECK_EQ("movslq", sd, 0xffffffff80000001ull);
  want("read", 0x30, 1, 0x80), want("read", 0x30, 1, 0x80), want("read", 0x32, 2, 0x8001);
  want("read", 0x32, 2, 0x8001), want("read", 0x34, 4, 0x80000001);
}

static void case_movnti_movd(void) {
  case_begin("movnti");
  uint32_t d = 0x0badf00d;
  uint64_t q = 0x1122334455667788ull;
  __asm__ volatile("movnti %[d], %[m4]\n\tmovnti %[q], %[m8]\n\tsfence"
                   : [m4] "=m"(*AT(uint32_t, 0x40)), [m8] "=m"(*AT(uint64_t, 0x48))
                   : [d] "r"(d), [q] "r"(q));
  want("write", 0x40, 4, d), want("write", 0x48, 8, q);

  case_begin("movd_movq");
  uint32_t d_back;
  uint64_t q_back;
  __asm__ volatile(
      "movd %[d], %%xmm0\n\tmovd %%xmm0, %[m4]\n\tmovq %[q], %%xmm1\n\tmovq %%xmm1, %[m8]\n\t"
      "pxor %%xmm0, %%xmm0\n\tpxor %%xmm1, %%xmm1\n\tmovd %[m4], %%xmm0\n\tmovq %[m8], %%xmm1\n\t"
      "movd %%xmm0, %[db]\n\tmovq %%xmm1, %[qb]"
      : [m4] "+m"(*AT(uint32_t, 0x50)), [m8] "+m"(*AT(uint64_t, 0x58)), [db] "=&r"(d_back), [qb] "=&r"(q_back)
      : [d] "r"(d ^ 0xffffffffu), [q] "r"(~q)
      : "xmm0", "xmm1");
  CHECK_EQ("movd load", d_back, d ^ 0xffffffffu), CHECK_EQ("movq load", q_back, ~q);
  want("write", 0x50, 4, d ^ 0xffffffffu), want("write", 0x58, 8, ~q);
  want("read", 0x50, 4, d ^ 0xffffffffu), want("read", 0x58, 8, ~q);
}

static void case_vector(void) {
  const uint64_t v[4] = {0x0101010102020202ull, 0x0303030304040404ull, 0x0505050506060606ull, 0x0707070708080808ull};
  uint64_t back[4] = {0};
  case_begin("sse_16_byte");
  __asm__ volatile("movdqu %[v], %%xmm0\n\tmovdqu %%xmm0, %[m]\n\tmovdqu %[m], %%xmm1\n\tmovdqu %%xmm1, %[b]"
                   : [m] "+m"(*AT(v16, 0x60)), [b] "=m"(*(uint8_t(*)[16])back)
                   : [v] "m"(*(const uint8_t(*)[16])v)
                   : "xmm0", "xmm1");
  CHECK_EQ("movdqu low", back[0], v[0]), CHECK_EQ("movdqu high", back[1], v[1]);
  want("write", 0x60, 8, v[0]), want("write", 0x68, 8, v[1]), want("read", 0x60, 8, v[0]), want("read", 0x68, 8, v[1]);

  case_begin("avx_32_byte");
  __asm__ volatile(
      "vmovdqu %[v], %%ymm0\n\tvmovdqu %%ymm0, %[m]\n\tvmovdqu %[m], %%ymm1\n\tvmovdqu %%ymm1, %[b]\n\t"
      "vzeroupper"
      : [m] "+m"(*AT(v32, 0x80)), [b] "=m"(*(uint8_t(*)[32])back)
      : [v] "m"(*(const uint8_t(*)[32])v)
      : "xmm0", "xmm1");
  for (unsigned i = 0; i < 4; ++i) CHECK_EQ("vmovdqu piece", back[i], v[i]);
  for (unsigned i = 0; i < 4; ++i) want("write", 0x80 + 8 * i, 8, v[i]);
  for (unsigned i = 0; i < 4; ++i) want("read", 0x80 + 8 * i, 8, v[i]);
}

static void case_string(void) {
  uint8_t bytes[5] = {0xb1, 0xb2, 0xb3, 0xb4, 0xb5};
  uint64_t quads[3] = {0x1000000000000001ull, 0x2000000000000002ull, 0x3000000000000003ull}, back[3] = {0};
  case_begin("rep_movsb_movsq_into_bar");
  void *d = R + 0xa1, *s = bytes;
  uint64_t n = 5;
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  d = R + 0xb0, s = quads, n = 3;
  __asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  for (unsigned i = 0; i < 5; ++i) want("write", 0xa1 + i, 1, bytes[i]);
  for (unsigned i = 0; i < 3; ++i) want("write", 0xb0 + 8 * i, 8, quads[i]);

  case_begin("rep_movsb_movsq_out_of_bar");
  uint8_t bytes_back[5] = {0};
  d = bytes_back, s = R + 0xa1, n = 5;
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  d = back, s = R + 0xb0, n = 3;
  __asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  for (unsigned i = 0; i < 5; ++i) CHECK_EQ("rep movsb out", bytes_back[i], bytes[i]);
  for (unsigned i = 0; i < 3; ++i) CHECK_EQ("rep movsq out", back[i], quads[i]);
  for (unsigned i = 0; i < 5; ++i) want("read", 0xa1 + i, 1, bytes[i]);
  for (unsigned i = 0; i < 3; ++i) want("read", 0xb0 + 8 * i, 8, quads[i]);

  case_begin("rep_movsq_backwards_both_ways"); /* DF set: the last element first */
  d = R + 0xd0 + 16, s = quads + 2, n = 3;
  __asm__ volatile("std\n\trep movsq\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory", "cc");
  d = back + 2, s = R + 0xd0 + 16, n = 3;
  __asm__ volatile("std\n\trep movsq\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory", "cc");
  for (unsigned i = 0; i < 3; ++i) CHECK_EQ("std rep movsq", back[i], quads[i]);
  for (int i = 2; i >= 0; --i) want("write", 0xd0 + 8 * i, 8, quads[i]);
  for (int i = 2; i >= 0; --i) want("read", 0xd0 + 8 * i, 8, quads[i]);

  case_begin("rep_stosb_stosq");
  d = R + 0xe9, n = 7;
  __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(0xa5) : "memory");
  d = R + 0xf0, n = 3;
  __asm__ volatile("rep stosq" : "+D"(d), "+c"(n) : "a"(0x5a5a5a5a00000001ull) : "memory");
  for (unsigned i = 0; i < 7; ++i) want("write", 0xe9 + i, 1, 0xa5);
  for (unsigned i = 0; i < 3; ++i) want("write", 0xf0 + 8 * i, 8, 0x5a5a5a5a00000001ull);
}

/* A read-modify-write (or compare) instruction on BAR4 at `off` and on an ordinary variable
 * holding the same value, from the same RFLAGS (CF set): values and flags must agree. */
#define RMW_CASE(NAME, T, WIDTH, TEXT, INITIAL, SOURCE, WRITES)                      \
  static void NAME(unsigned off) {                                                   \
    case_begin(#NAME);                                                               \
    put(off, WIDTH, INITIAL);                                                        \
    T local = (T)(INITIAL), source = (T)(SOURCE), source_bar = (T)(SOURCE);          \
    uint64_t f_local, f_bar;                                                         \
    __asm__ volatile("stc\n\t" TEXT FLAGS_GET                                        \
                     : [m] "+m"(local), [s] "+r"(source), [f] "=&r"(f_local)         \
                     :                                                               \
                     : "cc", "memory");                                              \
    __asm__ volatile("stc\n\t" TEXT FLAGS_GET                                        \
                     : [m] "+m"(*AT(T, off)), [s] "+r"(source_bar), [f] "=&r"(f_bar) \
                     :                                                               \
                     : "cc", "memory");                                              \
    CHECK_EQ(#NAME " flags", f_bar& FLAGS_STATUS, f_local& FLAGS_STATUS);            \
    CHECK_EQ(#NAME " register", source_bar, source);                                 \
    CHECK_EQ(#NAME " memory", *(volatile T*)AT(T, off), local);                      \
    want("read", off, WIDTH, (T)(INITIAL));                                          \
    if (WRITES) want("write", off, WIDTH, local);                                    \
    want("read", off, WIDTH, local);                                                 \
  }

RMW_CASE(or_byte_register, uint8_t, 1, "orb %[s], %[m]", 0x0f, 0xf0, 1)
RMW_CASE(or_dword_immediate, uint32_t, 4, "orl $0x80000000, %[m]", 0x1, 0, 1)
RMW_CASE(and_word_immediate, uint16_t, 2, "andw $0x00ff, %[m]", 0x1280, 0, 1)
RMW_CASE(and_qword_register, uint64_t, 8, "andq %[s], %[m]", 0xf0f0f0f0f0f0f0f0ull, 0x0f0f0f0f0f0f0f0full, 1)
RMW_CASE(add_dword_register_overflow, uint32_t, 4, "addl %[s], %[m]", 0x7fffffff, 1, 1)
RMW_CASE(add_byte_immediate_adjust, uint8_t, 1, "addb $0x1, %[m]", 0x7f, 0, 1)
RMW_CASE(sub_qword_register_borrow, uint64_t, 8, "subq %[s], %[m]", 0, 1, 1)
RMW_CASE(sub_word_immediate_zero, uint16_t, 2, "subw $0x1234, %[m]", 0x1234, 0, 1)
RMW_CASE(xor_dword_immediate, uint32_t, 4, "xorl $0x55aa55aa, %[m]", 0xffffffff, 0, 1)
RMW_CASE(xor_word_register, uint16_t, 2, "xorw %[s], %[m]", 0x8000, 0x8000, 1)
RMW_CASE(inc_word_wraps_keeps_cf, uint16_t, 2, "incw %[m]", 0xffff, 0, 1)
RMW_CASE(dec_qword_from_zero, uint64_t, 8, "decq %[m]", 0, 0, 1)
RMW_CASE(not_dword, uint32_t, 4, "notl %[m]", 0x12345678, 0, 1)
RMW_CASE(neg_byte_overflow, uint8_t, 1, "negb %[m]", 0x80, 0, 1)
RMW_CASE(lock_or_qword, uint64_t, 8, "lock orq %[s], %[m]", 0x100, 0x1, 1)
RMW_CASE(lock_add_dword_carry, uint32_t, 4, "lock addl %[s], %[m]", 0xffffffff, 2, 1)
RMW_CASE(cmp_dword_register_below, uint32_t, 4, "cmpl %[s], %[m]", 5, 7, 0)
RMW_CASE(cmp_qword_immediate_equal, uint64_t, 8, "cmpq $-1, %[m]", 0xffffffffffffffffull, 0, 0)
RMW_CASE(test_byte_immediate, uint8_t, 1, "testb $0x81, %[m]", 0x80, 0, 0)
RMW_CASE(test_word_register, uint16_t, 2, "testw %[s], %[m]", 0x0ff0, 0xf00f, 0)
RMW_CASE(bt_dword_immediate_set, uint32_t, 4, "btl $5, %[m]", 0x20, 0, 0)
RMW_CASE(bt_qword_immediate_clear, uint64_t, 8, "btq $40, %[m]", 0xfffffeffffffffffull, 0, 0)
RMW_CASE(xchg_qword, uint64_t, 8, "xchgq %[s], %[m]", 0xaaaaaaaaaaaaaaaaull, 0x5555555555555555ull, 1)
RMW_CASE(xchg_byte, uint8_t, 1, "xchgb %[s], %[m]", 0x11, 0x22, 1)
RMW_CASE(lock_xadd_dword, uint32_t, 4, "lock xaddl %[s], %[m]", 0xfffffff0, 0x20, 1)
RMW_CASE(lock_xadd_word, uint16_t, 2, "lock xaddw %[s], %[m]", 0x7fff, 1, 1)

/* CMPXCHG needs the accumulator: equal stores the source; unequal only loads (the library
 * does not write the unchanged value back, see docs/rpcie-run.md). */
static void case_cmpxchg(unsigned off, uint64_t initial, uint64_t expected_in_rax) {
  case_begin(initial == expected_in_rax ? "lock_cmpxchg_qword_equal" : "lock_cmpxchg_qword_unequal");
  put(off, 8, initial);
  uint64_t local = initial, rax_local = expected_in_rax, rax_bar = expected_in_rax, f_local, f_bar;
  const uint64_t source = 0x0123456789abcdefull;
  __asm__ volatile("lock cmpxchgq %[s], %[m]" FLAGS_GET
                   : [m] "+m"(local), "+a"(rax_local), [f] "=&r"(f_local)
                   : [s] "r"(source)
                   : "cc", "memory");
  __asm__ volatile("lock cmpxchgq %[s], %[m]" FLAGS_GET
                   : [m] "+m"(*AT(uint64_t, off)), "+a"(rax_bar), [f] "=&r"(f_bar)
                   : [s] "r"(source)
                   : "cc", "memory");
  CHECK_EQ("cmpxchg flags", f_bar & FLAGS_STATUS, f_local & FLAGS_STATUS);
  CHECK_EQ("cmpxchg rax", rax_bar, rax_local);
  CHECK_EQ("cmpxchg memory", *(volatile uint64_t*)AT(uint64_t, off), local);
  want("read", off, 8, initial);
  if (initial == expected_in_rax) want("write", off, 8, source);
  want("read", off, 8, local);
}

static void case_rmw(void) {
  or_byte_register(0x200), or_dword_immediate(0x204), and_word_immediate(0x20a), and_qword_register(0x210);
  add_dword_register_overflow(0x218), add_byte_immediate_adjust(0x21d), sub_qword_register_borrow(0x220);
  sub_word_immediate_zero(0x22e), xor_dword_immediate(0x230), xor_word_register(0x236);
  inc_word_wraps_keeps_cf(0x238), dec_qword_from_zero(0x240), not_dword(0x24c), neg_byte_overflow(0x24f);
  lock_or_qword(0x250), lock_add_dword_carry(0x258), cmp_dword_register_below(0x260);
  cmp_qword_immediate_equal(0x268), test_byte_immediate(0x271), test_word_register(0x272);
  bt_dword_immediate_set(0x274), bt_qword_immediate_clear(0x278), xchg_qword(0x280), xchg_byte(0x289);
  lock_xadd_dword(0x28c), lock_xadd_word(0x292);
  case_cmpxchg(0x298, 0x42, 0x42), case_cmpxchg(0x2a0, 0x42, 0x43);
}

static uint64_t fnv(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* glibc's own functions through pointers the compiler cannot see through (no inlining). */
static void* (*volatile copy)(void*, const void*, size_t) = memcpy;
static void* (*volatile fill)(void*, int, size_t) = memset;
static int (*volatile compare)(const void*, const void*, size_t) = memcmp;

static void case_glibc(size_t n, unsigned off) {
  static uint8_t src[4096], back[4096];
  char name[64];
  for (size_t i = 0; i < n; ++i) src[i] = (uint8_t)(i * 167 + n * 31 + 1);
  snprintf(name, sizeof name, "memcpy_in_%zu", n), case_begin(name);
  copy(R + off, src, n);
  printf("image %u %zu %llu\nwithin %u %zu\n", off, n, (unsigned long long)fnv(src, n), off, n);

  snprintf(name, sizeof name, "memcpy_out_%zu", n), case_begin(name);
  memset(back, 0, n);
  copy(back, R + off, n);
  CHECK_EQ("memcpy out checksum", fnv(back, n), fnv(src, n));
  printf("cover %u %zu\nwithin %u %zu\nreadonly\n", off, n, off, n);

  snprintf(name, sizeof name, "memcmp_%zu", n), case_begin(name);
  CHECK_EQ("memcmp equal", compare(R + off, src, n), 0);
  /* No `within`: glibc's memcmp loads a whole vector past the end when no page is crossed. */
  printf("cover %u %zu\nreadonly\n", off, n);
  src[n - 1] ^= 0x80; /* the last byte differs: every byte is read again */
  const int sign = compare(R + off, src, n) < 0, sign_local = compare(back, src, n) < 0;
  CHECK_EQ("memcmp order", sign, sign_local);

  snprintf(name, sizeof name, "memset_%zu", n), case_begin(name);
  fill(R + off, 0x3c ^ (int)(n & 0xff), n);
  memset(back, 0x3c ^ (int)(n & 0xff), n);
  printf("image %u %zu %llu\nwithin %u %zu\n", off, n, (unsigned long long)fnv(back, n), off, n);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mmio_classes DEVICE_DIR\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/resource4", argv[1]);
  const int fd4 = open(path, O_RDWR | O_CLOEXEC);
  snprintf(path, sizeof path, "%s/resource2", argv[1]);
  const int fd2 = open(path, O_RDWR | O_CLOEXEC);
  if (fd4 < 0 || fd2 < 0) return perror("mmio_classes: open"), 1;
  R = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd4, 0);
  M = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
  if (R == MAP_FAILED || M == MAP_FAILED) return perror("mmio_classes: mmap"), 1;
  setvbuf(stdout, NULL, _IOLBF, 0);
  case_mov(), case_extend(), case_movnti_movd(), case_vector(), case_string(), case_rmw();
  static const size_t sizes[] = {1,   2,   3,   4,   5,    7,    8,    9,    15,   16,   17,
                                 31,  32,  33,  63,  64,   65,   100,  127,  128,  129,  255,
                                 256, 257, 511, 512, 1000, 1024, 2047, 2048, 3000, 4095, 4096};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    const size_t n = sizes[i];
    case_glibc(n, (unsigned)((n * 13) % (4096 - n + 1)));
  }
  case_begin("end");
  if (failures) return fprintf(stderr, "mmio_classes: %d checks failed\n", failures), 1;
  printf("ok %u cases\n", case_number);
  return 0;
}
