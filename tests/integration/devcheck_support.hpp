// rpcie-devcheck's shared part: the common options, the check reporting (CHECK_THAT, ok),
// the attach and window helpers, edu register access, and the subcommands (one per check;
// devcheck.cc's header lists them). Each check prints "ok: ..." lines and returns 0, or
// prints "FAIL: ..." and returns 1. Single-threaded tool: nothing here is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "check_report.hpp"
#include "rpcie/client.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/process.hpp"
#include "rpcie/session.hpp"

namespace rpcie::devcheck {

using client::Attachment;

// Failed checks so far (CHECK_THAT, check_report.hpp, counts them).
using testing::check_failures;

// Timing claims are checked only with RPCIE_TIMING_CHECKS=1, never under a sanitizer.
bool timing_checked();
// Prints "ok" for a group of checks when none of them failed since the previous group.
void ok(const char* what);
// The deadline of one call.
Deadline soon();

struct Common {
  std::string host;
  std::uint16_t port = kDefaultPort;
  client::ClientOptions options;
  std::size_t window = 1u << 20;
};

SessionOptions session_options(const Common& c);

// A DMA window: core's HostBuffer (an anonymous mapping) stands in for hostd's shared-memory
// file. Exits (FAIL) when it cannot be made.
struct Window {
  explicit Window(std::size_t n);
  client::DmaWindow view() const { return {base, size}; }
  HostBuffer buffer;
  std::uint8_t* base;
  std::size_t size;
};

// Attaches `name` with `w` as its window; exits (FAIL) when the attach fails.
std::unique_ptr<Attachment> attach_or_die(const Common& c, const std::string& name, Window& w);

// Each thread's scheduling of a process (/proc/PID/task/*/schedstat: time on a CPU, time
// runnable but waiting for one, slices), so that a slow burst says who ran and who waited.
struct ThreadTimes {
  struct One {
    std::string name;
    std::uint64_t run_ns = 0, wait_ns = 0, slices = 0;
  };
  std::map<int, One> threads;

  // `pid`: 0 for this process.
  static ThreadTimes now(int pid = 0);
  // The kernel's softirq threads (ksoftirqd/N): on a CPU shared with a busy process, the
  // network stack's deferred work (a veth's packets) waits in them for a CPU too. Found once
  // (a scan of /proc before every burst would cool the caches the burst uses).
  static ThreadTimes softirq();
  // The threads that ran or waited since `before`, one line each.
  std::string since(const ThreadTimes& before) const;
};

std::uint64_t fnv(const std::uint8_t* p, std::size_t n);
void random_fill(std::uint8_t* p, std::size_t n, std::uint32_t seed);

// edu's registers (BAR 0), each access checked.
std::uint64_t rd(Attachment& a, std::uint64_t off, unsigned width = 4);
void wr(Attachment& a, std::uint64_t off, std::uint64_t value, unsigned width = 4, Deadline deadline = soon());
// Programs and starts one DMA through edu; returns the interrupt count before the start.
std::uint64_t edu_dma_start(Attachment& a, std::uint64_t src, std::uint64_t dst, std::uint64_t count, bool to_host,
                            bool irq);
// One DMA through edu, completion seen by interrupt (irq=true) or by polling the command
// register (irq=false). Returns with the interrupt acknowledged.
void edu_dma(Attachment& a, std::uint64_t src, std::uint64_t dst, std::uint64_t count, bool to_host, bool irq);

// The subcommands. Device data paths (devcheck_device.cc):
int edu_check(const Common& c, const std::string& name);
int push_check(Common c, const std::string& name);
int membar_check(const Common& c, const std::string& name, std::size_t size);
// Posted writes (devcheck_posted.cc). `gap`: the pause before each burst; `limit`: round trips
// a burst may take (timing checks), except `outliers` of the five; `peer_pid`: the exporter's
// process (0: unknown), whose threads a slow burst reports too.
int posted_check(const Common& c, const std::string& name, std::chrono::milliseconds gap, double limit, int outliers,
                 int peer_pid);
int postedfail_check(const Common& c, const std::string& name);
// Errors, hostile peers and the attach itself (devcheck_protocol.cc):
int errors_check(const Common& c, const std::string& name);
int hostile_check(const Common& c, const std::string& name);
int attachfail_check(const Common& c, const std::string& name, int code, const std::string& text);
int busy_check(const Common& c, const std::string& name);
int hold(const Common& c, const std::string& name, int seconds);
int reattach_check(const Common& c, const std::string& name);
int badmac_check(const Common& c);
int list_print(const Common& c);
// A lost link: resumed, or ended (devcheck_resume.cc):
int resume_check(Common c, const std::string& name, int seconds);
int dma_resume_check(Common c, const std::string& name);
int bar_resume_check(Common c, const std::string& name, const std::string& go);
int linkloss_check(Common c, const std::string& name);

}  // namespace rpcie::devcheck
