/* Ordering across BARs through mapped BARs, as an unchanged C driver does it (run under
 * `rpcie run`; built at -O0 and -O2): a pattern is stored into membar's memory BAR through a
 * page-cache mapping of resource0, then OFFSET/LENGTH/DOORBELL are stored through a mapping of
 * the register BAR resource2 — no msync in between. The device hashes BAR0 and raises its
 * interrupt; RESULT must be the FNV-1a of the pattern, which holds only if the stores to the
 * memory BAR reached the device before the doorbell.
 *   mmio_doorbell DEVICE_DIR LENGTH SEED
 * Prints "ok RESULT COUNT" and exits 0, or names what differed and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int fail(const char* what) {
  fprintf(stderr, "mmio_doorbell: %s: %s\n", what, strerror(errno));
  return 1;
}

static int open_at(const char* dir, const char* name, int flags) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return open(path, flags | O_CLOEXEC);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: mmio_doorbell DEVICE_DIR LENGTH SEED\n");
    return 2;
  }
  const char* dir = argv[1];
  const uint64_t length = strtoull(argv[2], NULL, 0), offset = 0x100;
  const uint32_t seed = (uint32_t)strtoul(argv[3], NULL, 0);
  const int mem_fd = open_at(dir, "resource0", O_RDWR), reg_fd = open_at(dir, "resource2", O_RDWR);
  const int events = open_at(dir, "events", O_RDWR | O_NONBLOCK);
  if (mem_fd < 0 || reg_fd < 0 || events < 0) return fail("open");
  uint8_t* mem = mmap(NULL, offset + length, PROT_READ | PROT_WRITE, MAP_SHARED, mem_fd, 0);
  volatile uint8_t* regs = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, reg_fd, 0);
  if (mem == MAP_FAILED || regs == MAP_FAILED) return fail("mmap");

  const uint32_t id = *(volatile uint32_t*)(regs + 0x00);
  if (id != 0x4d420001) {
    fprintf(stderr, "mmio_doorbell: ID register 0x%08x, want 0x4d420001\n", id);
    return 1;
  }
  const uint32_t count_before = *(volatile uint32_t*)(regs + 0x2c);
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (uint64_t i = 0; i < length; ++i) {
    const uint8_t b = (uint8_t)((i * 131 + seed) ^ (i >> 8));
    mem[offset + i] = b; /* page cache: reaches the device on write-back */
    hash = (hash ^ b) * 0x100000001b3ULL;
  }
  const uint32_t one = 1;
  if (write(events, &one, sizeof one) != sizeof one) return fail("unmask events");
  *(volatile uint64_t*)(regs + 0x08) = offset;
  *(volatile uint64_t*)(regs + 0x10) = length;
  *(volatile uint32_t*)(regs + 0x18) = 1; /* the doorbell */

  struct pollfd p = {events, POLLIN, 0};
  if (poll(&p, 1, 10000) != 1) return fail("no interrupt within 10 s");
  uint32_t interrupts = 0;
  if (read(events, &interrupts, sizeof interrupts) != sizeof interrupts) return fail("read events");
  const uint32_t status = *(volatile uint32_t*)(regs + 0x28);
  const uint32_t count = *(volatile uint32_t*)(regs + 0x2c);
  const uint64_t result = *(volatile uint64_t*)(regs + 0x20);
  if (status != 0 || count != count_before + 1 || result != hash) {
    fprintf(stderr, "mmio_doorbell: status 0x%x count %u (before %u) result 0x%016llx, want 0x%016llx\n", status, count,
            count_before, (unsigned long long)result, (unsigned long long)hash);
    return 1;
  }
  printf("ok 0x%016llx %u\n", (unsigned long long)result, count);
  return 0;
}
