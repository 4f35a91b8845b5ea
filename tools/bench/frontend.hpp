// rpcie-bench --frontend: the file front end (rpcie-hostd) against the client API it is
// built on, both attached to one rpcie-exportd started here. See docs/rpcie-bench.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rpcie::bench {

struct FrontendOptions {
  std::string provider = "tcp";  // tcp or shm
  unsigned rounds = 5;
  bool json = false;
  bool verbose = false;
  int progress_fd = 2;  // DriverOptions::progress_fd
  std::string exportd;  // programs to start (default: found next to rpcie-bench)
  std::string hostd;
  std::string rpcie;         // the CLI, for `rpcie run` of rpcie-bench-mmio
  std::string mmio_program;  // rpcie-bench-mmio
  // An exporter already running (e.g. in another network namespace) with the exports
  // edu-a, edu-b (edu), mem-a (membar, >= 1 MiB) and mem-b (membar, >= 64 MiB, scratch=on),
  // and its key; else one is started here on loopback.
  std::string remote_host;
  std::uint16_t remote_port = 0;
  std::string psk_file;
  // The data path both sides ask for by name (sealed or open), or auto: each side's default.
  std::string data_path = "auto";
  std::string splice_writes = "on";  // hostd's --splice-writes
  std::vector<std::string> only;     // DriverOptions::only
};

// Prints the table (or JSON); returns the exit status.
int frontend_bench(const FrontendOptions& options);

}  // namespace rpcie::bench
