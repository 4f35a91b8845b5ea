// rpcie-bench --frontend: the file front end (rpcie-hostd) against the client API it is
// built on, both attached to one rpcie-exportd started here. See docs/rpcie-bench.md.
#pragma once

#include <string>

namespace rpcie::bench {

struct FrontendOptions {
  std::string provider = "tcp";  // tcp or shm
  unsigned rounds = 5;
  bool json = false;
  bool verbose = false;
  std::string exportd;  // programs to start (default: found next to rpcie-bench)
  std::string hostd;
};

// Prints the table (or JSON); returns the exit status.
int frontend_bench(const FrontendOptions& options);

}  // namespace rpcie::bench
