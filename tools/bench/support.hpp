// What rpcie-bench's modes share: errors, and the daemons started for the device
// and front-end workloads (rpcie-exportd, rpcie-hostd): found next to the bench or in the
// build tree, stopped when their owner goes away.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rpcie/deadline.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/result.hpp"

namespace rpcie::bench {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// The deadline of one call of a workload: far beyond any call's time, so that a stuck call
// ends the run with an error instead of hanging it.
inline Deadline call_deadline() { return Deadline::after(std::chrono::seconds(30)); }

// Seconds on the steady clock since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "rpcie-bench: error: WHAT" on stderr; returns exit status 1.
int die(const std::string& what);

// `error` with `where` before its message ("where: message").
tl::unexpected<Error> error_in(Error error, const std::string& where);

// `given` if not empty, else `name` next to this program, else in the build tree's
// `build_dir` (e.g. "devexport"), else `name` (found on PATH).
std::string program_find(const std::string& given, const char* name, const char* build_dir);

// The first line of /proc/sys/NAME (e.g. "fs/pipe-max-size"), trailing blanks dropped; ""
// where it cannot be read.
std::string sysctl_read(const char* name);

// The TCP congestion control of this network namespace (net.ipv4.tcp_congestion_control),
// or "" where it cannot be read. Bulk rows on tcp depend on it: under bbr on loopback each
// connection's throughput follows its own congestion state (docs/performance.md, issue 14
// point 6), so a figure names it.
inline std::string tcp_congestion_control() { return sysctl_read("net/ipv4/tcp_congestion_control"); }

// A buffer that rpcie's side of a row sends from: written with the byte the raw loop writes
// into its own (raw_setup.cc), since untouched anonymous memory reads as the kernel's one
// zero page, which never leaves the cache — a side sending from it would copy 4 KiB where
// the other copies megabytes (docs/performance.md, "Core 1 MiB and 4 MiB writes").
inline constexpr std::uint8_t kBufferFill = 0x5a;
Result<HostBuffer> buffer_written(std::size_t size);

// A child process; the destructor stops it (SIGTERM, SIGKILL after 2 s) and reaps it.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();
  // Starts argv[0] with argv, pinned to `cpu` (-1: not pinned). With `err_fd`, its stderr
  // comes back through *err_fd; otherwise it is inherited.
  Result<void> start(std::vector<std::string> argv, int cpu, int* err_fd);

 private:
  pid_t pid_ = -1;
};

// A directory made for the run (mkdtemp of `prefix`XXXXXX), removed with what is in it.
class TempDir {
 public:
  static Result<TempDir> make(const std::string& prefix);
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir();
  const std::string& path() const noexcept { return path_; }

 private:
  TempDir() = default;
  std::string path_;
};

// rpcie-exportd on 127.0.0.1 (a free port), pinned to CPU 1, with key `psk` and these
// --export arguments; returns its port once it listens. Its stderr is passed on.
Result<std::uint16_t> exportd_start(Child& child, const std::string& program, const std::string& provider,
                                    const std::string& psk, const std::vector<std::string>& exports);

}  // namespace rpcie::bench
