/* What a program around its loads and stores does to a mapped register BAR (run under
 * `rpcie run`, built without sanitizers): threads, fork, a refused access, SIGBUS mode and a
 * link lost while mapped. The device is membar with doorbell=on and scratch=on.
 *   mmio_behaviour threads DEVICE_DIR   4 threads, each 200 8-byte stores of (thread << 32 | i)
 *                                       to its own register BAR4+0x800+8*thread, then a load
 *   mmio_behaviour fork DEVICE_DIR      parent stores BAR4+0x900; the child stores and loads
 *                                       BAR4+0x908 through the inherited mapping; then the
 *                                       parent stores and loads BAR4+0x910
 *   mmio_behaviour refused DEVICE_DIR   a 1-byte load of BAR2's ID (the device refuses it):
 *                                       all ones; a 1-byte store to BAR2's OFFSET: dropped
 *   mmio_behaviour sigbus DEVICE_DIR    the same under RPCIE_MMIO_ERRORS=sigbus: the
 *                                       program's SIGBUS handler sees si_addr of the load
 *                                       (the store is posted: its failure is not known then)
 *   mmio_behaviour loop DEVICE_DIR SECONDS  stores i to BAR4+0x20 and loads it back until
 *                                       SECONDS have passed; prints "looping" after the first
 *                                       round and "done ROUNDS GOOD BAD FIRST_BAD LAST_BAD"
 *                                       at the end (seconds since the start, -1: none)
 * Exit 0 when the program saw what it should, 1 naming what differed (stderr). */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint8_t *R, *B2; /* BAR4 (scratch), BAR2 (doorbell registers) */

static int fail(const char* what) {
  fprintf(stderr, "mmio_behaviour: %s\n", what);
  return 1;
}
#define REG64(bar, off) (*(volatile uint64_t*)((bar) + (off)))

enum { kThreads = 4, kStores = 200 };

static void* thread_run(void* arg) {
  const uint64_t t = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < kStores; ++i) REG64(R, 0x800 + 8 * t) = t << 32 | i;
  return (void*)(uintptr_t)(REG64(R, 0x800 + 8 * t) == (t << 32 | (kStores - 1)));
}

static int threads(void) {
  pthread_t ids[kThreads];
  for (uintptr_t t = 0; t < kThreads; ++t)
    if (pthread_create(&ids[t], NULL, thread_run, (void*)t) != 0) return fail("pthread_create");
  int ok = 1;
  for (int t = 0; t < kThreads; ++t) {
    void* r;
    pthread_join(ids[t], &r);
    ok &= r != NULL;
  }
  return ok ? (printf("ok threads\n"), 0) : fail("a thread read back something else than its last store");
}

static int fork_case(void) {
  REG64(R, 0x900) = 0x9001;
  fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return fail("fork");
  if (child == 0) {
    REG64(R, 0x908) = 0xc41d;
    _exit(REG64(R, 0x908) == 0xc41d && REG64(R, 0x900) == 0x9001 ? 0 : 1);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return fail("waitpid");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fail("the child did not read back its store");
  REG64(R, 0x910) = 0x9002;
  if (REG64(R, 0x910) != 0x9002 || REG64(R, 0x908) != 0xc41d) return fail("the parent after the child");
  printf("ok fork\n");
  return 0;
}

/* A 1-byte load of BAR2's ID and a 1-byte store to BAR2's OFFSET: membar refuses both. The
 * refused store is posted and dropped, as on PCIe: both OFFSET loads after it read 0x1234
 * (hostd counts the store's error; it is not charged to the next access). */
static int refused(void) {
  REG64(B2, 0x08) = 0x1234; /* OFFSET, a legal 8-byte store */
  const uint8_t id_byte = *(volatile uint8_t*)B2;
  const uint32_t id = *(volatile uint32_t*)B2;
  *(volatile uint8_t*)(B2 + 0x08) = 0x77; /* refused: dropped */
  const uint64_t first = REG64(B2, 0x08);
  const uint64_t offset = REG64(B2, 0x08);
  if (id_byte != 0xff || first != 0x1234 || offset != 0x1234 || id != 0x4d420001) {
    fprintf(stderr, "mmio_behaviour: ID byte 0x%x (want 0xff), ID 0x%x, OFFSET 0x%llx then 0x%llx (want 0x1234)\n",
            id_byte, id, (unsigned long long)first, (unsigned long long)offset);
    return 1;
  }
  printf("ok refused 0x%02x 0x%llx 0x%llx\n", id_byte, (unsigned long long)first, (unsigned long long)offset);
  return 0;
}

static sigjmp_buf sigbus_return;
static void* volatile sigbus_address;
static volatile int sigbus_code;
static void sigbus_catch(int sig, siginfo_t* info, void* context) {
  (void)sig, (void)context;
  sigbus_address = info->si_addr;
  sigbus_code = info->si_code;
  siglongjmp(sigbus_return, 1); /* a returning handler would retry the access forever */
}

/* One access under a SIGBUS handler: 1 if it raised SIGBUS (si_addr in sigbus_address). */
static int sigbus_try(volatile uint8_t* at, int store, uint64_t* loaded) {
  sigbus_address = NULL;
  if (sigsetjmp(sigbus_return, 1) != 0) return 1;
  if (store)
    *at = 0x77;
  else
    *loaded = *(volatile uint64_t*)at;
  return 0;
}

/* The refused 1-byte load must raise SIGBUS at its address. The refused store is posted (as
 * on PCIe, its failure is not known when it retires): it raises nothing, and the loads after
 * it read OFFSET. */
static int sigbus_case(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = sigbus_catch;
  sa.sa_flags = SA_SIGINFO;
  if (sigaction(SIGBUS, &sa, NULL) != 0) return fail("sigaction");
  REG64(B2, 0x08) = 0x5678; /* OFFSET, a legal 8-byte store */
  sigbus_address = NULL;
  if (sigsetjmp(sigbus_return, 1) == 0) {
    (void)*(volatile uint8_t*)B2;
    return fail("the refused load raised no SIGBUS");
  }
  if (sigbus_address != (void*)B2) {
    fprintf(stderr, "mmio_behaviour: si_addr %p, want %p\n", sigbus_address, (void*)B2);
    return 1;
  }
  printf("ok sigbus load si_addr=BAR2+0x%lx si_code=%d\n", (unsigned long)((uintptr_t)sigbus_address - (uintptr_t)B2),
         sigbus_code);
  uint64_t value = 0;
  if (sigbus_try(B2 + 0x08, 1, &value)) return fail("the refused (posted) store raised SIGBUS");
  if (sigbus_try(B2 + 0x08, 0, &value) || value != 0x5678) return fail("the load after the refused store");
  if (sigbus_try(B2 + 0x08, 0, &value) || value != 0x5678) return fail("the second load after the refused store");
  printf("ok sigbus done\n");
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Stores and loads until the deadline: each round either reads back its store (good) or not
 * (bad: a dropped store or an all-ones load). Never waits without a deadline of its own. */
static int loop(double seconds) {
  const double start = now(), end = start + seconds;
  double first_bad = -1, last_bad = -1;
  uint64_t rounds = 0, good = 0, bad = 0;
  do {
    REG64(R, 0x20) = rounds;
    if (REG64(R, 0x20) == rounds) {
      ++good;
    } else {
      ++bad;
      last_bad = now() - start;
      if (first_bad < 0) first_bad = last_bad;
    }
    if (rounds++ == 0) printf("looping\n"), fflush(stdout);
  } while (now() < end);
  printf("done %llu %llu %llu %.3f %.3f\n", (unsigned long long)rounds, (unsigned long long)good,
         (unsigned long long)bad, first_bad, last_bad);
  return 0;
}

static volatile uint8_t* map(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return NULL;
  void* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: mmio_behaviour threads|fork|refused|sigbus|loop DEVICE_DIR [SECONDS]");
  R = map(argv[2], "resource4");
  B2 = map(argv[2], "resource2");
  if (R == NULL || B2 == NULL) return fail("cannot map resource4 and resource2");
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* mode = argv[1];
  if (strcmp(mode, "threads") == 0) return threads();
  if (strcmp(mode, "fork") == 0) return fork_case();
  if (strcmp(mode, "refused") == 0) return refused();
  if (strcmp(mode, "sigbus") == 0) return sigbus_case();
  if (strcmp(mode, "loop") == 0 && argc == 4) return loop(atof(argv[3]));
  return fail("unknown mode");
}
