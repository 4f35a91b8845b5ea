// A program run under `rpcie run` by preload.sh: each mode checks one promise of
// librpcie-mmio.so from inside a preloaded process and prints "ok ..." or exits non-zero.
//   preload_check MODE [ARG]
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

sigjmp_buf jump;
volatile sig_atomic_t caught = 0;
void* volatile caught_address = nullptr;

void on_segv_info(int, siginfo_t* info, void*) {
  caught = caught + 1;
  caught_address = info->si_addr;
  siglongjmp(jump, 1);
}
void on_segv(int) {
  caught = caught + 1;
  siglongjmp(jump, 1);
}

int fail(const char* what) {
  std::fprintf(stderr, "FAIL: %s (errno %d %s)\n", what, errno, std::strerror(errno));
  return 1;
}

// The /proc/self/maps line of `address`, or "".
std::string maps_line(const void* address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<unsigned long>(address);
  while (std::getline(maps, line)) {
    unsigned long from = 0, to = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &from, &to) == 2 && a >= from && a < to) return line;
  }
  return "";
}

bool library_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("librpcie-mmio.so") != std::string::npos) return true;
  return false;
}

int null_load() { return *static_cast<volatile int*>(nullptr); }

// A program's own SIGSEGV handler still gets a NULL dereference, and sigaction reports it.
int own_handler(bool with_signal) {
  if (with_signal) {
    if (signal(SIGSEGV, on_segv) == SIG_ERR) return fail("signal");
  } else {
    struct sigaction act {};
    act.sa_sigaction = on_segv_info;
    act.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSEGV, &act, nullptr) != 0) return fail("sigaction");
  }
  struct sigaction now {};
  sigaction(SIGSEGV, nullptr, &now);
  if (with_signal ? now.sa_handler != on_segv : now.sa_sigaction != on_segv_info)
    return fail("sigaction does not report the program's handler");
  for (int i = 0; i < 2; ++i)
    if (sigsetjmp(jump, 1) == 0) {
      null_load();
      return fail("NULL load returned");
    }
  if (caught != 2 || (!with_signal && caught_address != nullptr)) return fail("handler not called twice at NULL");
  std::printf("ok own handler (%s) caught a NULL load twice\n", with_signal ? "signal" : "sigaction");
  return 0;
}

int fork_exec(const char* self) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, "loaded", static_cast<char*>(nullptr));
    _exit(99);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return fail("child after fork+exec");
  std::printf("ok fork+exec keeps the preload\n");
  return 0;
}

int plain_mappings() {
  char path[] = "/tmp/rpcie-preload-XXXXXX";
  const int fd = mkstemp(path);
  unlink(path);
  if (fd < 0 || ftruncate(fd, 8192) != 0 || pwrite(fd, "rpcie", 5, 4096) != 5) return fail("temp file");
  auto* file = static_cast<char*>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  auto* anon = static_cast<char*>(mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (file == MAP_FAILED || anon == MAP_FAILED) return fail("mmap");
  if (std::memcmp(file + 4096, "rpcie", 5) != 0) return fail("file contents through mmap");
  file[0] = 'x';
  anon[12345] = 'y';
  char back = 0;
  if (pread(fd, &back, 1, 0) != 1 || back != 'x' || anon[12345] != 'y') return fail("stores through mmap");
  if (mprotect(anon, 4096, PROT_READ) != 0 || maps_line(anon).find("r--p") == std::string::npos)
    return fail("mprotect of anonymous memory");
  if (munmap(file, 8192) != 0 || munmap(anon, 1 << 20) != 0) return fail("munmap");
  errno = 0;
  if (mmap(nullptr, 4096, PROT_READ, MAP_SHARED, 12345, 0) != MAP_FAILED || errno != EBADF)
    return fail("mmap of a bad descriptor is not EBADF");
  std::printf("ok ordinary mappings untouched\n");
  return 0;
}

int open_fds() {
  int n = 0;
  for (int fd = 0; fd < 1024; ++fd) n += fcntl(fd, F_GETFD) >= 0 ? 1 : 0;
  return n;
}

int expect_errno(void* p, int want, const char* what) {
  if (p != MAP_FAILED || errno != want) {
    std::fprintf(stderr, "FAIL: %s: got %p errno %d, want errno %d\n", what, p, errno, want);
    return 1;
  }
  return 0;
}

// A stand-in register BAR: DIR/resource0 (mmap answers ENODEV, 4 KiB) beside DIR/remote.
int register_bar(const char* dir) {
  const std::string path = std::string(dir) + "/resource0";
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return fail("open resource0");
  int rc = 0;
  rc |= expect_errno(mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd, 0), EINVAL, "beyond the BAR");
  rc |= expect_errno(mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 4096), EINVAL, "offset past the BAR");
  rc |= expect_errno(mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 1), EINVAL, "unaligned offset");
  rc |= expect_errno(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), EACCES, "writable on O_RDONLY");
  if (rc != 0) return rc;
  const int fds_before = open_fds();
  void* bar = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
  if (bar == MAP_FAILED) return fail("mmap of the register BAR");
  if (maps_line(bar).find("---p") == std::string::npos)
    return fail(("not a PROT_NONE range: " + maps_line(bar)).c_str());
  if (open_fds() != fds_before + 1) return fail("no port descriptor");
  if (mprotect(bar, 4096, PROT_READ | PROT_WRITE) == 0 || errno != EACCES) return fail("mprotect +W on O_RDONLY");
  if (mprotect(bar, 4096, PROT_READ) != 0 || maps_line(bar).find("---p") == std::string::npos)
    return fail("mprotect made the trapped range accessible");
  // A store into a range mapped without PROT_WRITE faults as the program asked.
  struct sigaction act {};
  act.sa_sigaction = on_segv_info;
  act.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &act, nullptr);
  if (sigsetjmp(jump, 1) == 0) {
    *static_cast<volatile int*>(bar) = 1;
    return fail("store into a PROT_READ BAR range returned");
  }
  if (caught != 1 || caught_address != bar) return fail("store fault not delivered at the BAR address");
  // After mprotect(PROT_NONE) a load faults to the program too.
  if (mprotect(bar, 4096, PROT_NONE) != 0) return fail("mprotect PROT_NONE");
  if (sigsetjmp(jump, 1) == 0) {
    static_cast<void>(*reinterpret_cast<volatile int*>(static_cast<char*>(bar) + 8));
    return fail("load from a PROT_NONE BAR range returned");
  }
  if (caught != 2 || caught_address != static_cast<char*>(bar) + 8) return fail("load fault not delivered");
  if (mremap(bar, 4096, 8192, MREMAP_MAYMOVE) != MAP_FAILED || errno != EINVAL) return fail("mremap not EINVAL");
  if (munmap(bar, 4096) != 0 || maps_line(bar).find("---p") != std::string::npos) return fail("munmap");
  if (open_fds() != fds_before) return fail("port descriptor not closed by munmap");
  std::printf("ok register BAR: range checks, PROT_NONE reservation, protections, munmap\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "sigaction") return own_handler(false);
  if (mode == "signal") return own_handler(true);
  if (mode == "null") return null_load();
  if (mode == "raise") return raise(SIGSEGV) == 0 ? 3 : 4;
  if (mode == "loaded") {
    const char* preload = getenv("LD_PRELOAD");
    if (preload == nullptr || std::strstr(preload, "librpcie-mmio.so") == nullptr || !library_loaded())
      return fail("librpcie-mmio.so not preloaded");
    return 0;
  }
  if (mode == "fork-exec") return fork_exec(argv[0]);
  if (mode == "plain") return plain_mappings();
  if (mode == "bar" && argc > 2) return register_bar(argv[2]);
  std::fprintf(stderr, "usage: preload_check sigaction|signal|null|raise|loaded|fork-exec|plain|bar DIR\n");
  return 2;
}
