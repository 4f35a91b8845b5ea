// rpcie-bench's command line, as parsed (main.cc has the flags and their help).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "rpcie/auth.hpp"

namespace rpcie::bench {

struct Options {
  std::string provider;
  unsigned rounds = 5;
  std::string output = "text";  // text or json
  bool serve = false;
  std::string listen = "127.0.0.1:0";
  std::string remote;  // HOST[:PORT]
  int cpu = -1;
  bool delivery_complete = false;
  bool verbose = false;
  int progress_fd = 2;  // the progress line goes there when it is a terminal
  bool target_no_wait_fd = false;
  bool target_progress_thread = false;  // the rpcie RMA target: a ProgressThread, not busy-polling
  std::vector<std::size_t> sizes{8, 4096, 65536, 1u << 20, 4u << 20};  // of the RMA rows
  bool device = false;
  std::string exportd;              // programs to start (default: found next to rpcie-bench)
  std::string data_path = "auto";   // --device: what the client asks for (sealed, open, auto)
  std::string raw_cipher = "aead";  // --device, sealed: the bar rows' raw messages (aead, none)
  bool frontend = false;
  std::string splice_writes = "on";  // --frontend: hostd's --splice-writes
  std::string hostd;
  std::string psk_file = auth::kDefaultKeyPath;  // --frontend -r: the running exporter's key
  std::vector<std::string> only;                 // rows to run, by name (empty: every row)

  bool json() const noexcept { return output == "json"; }
};

}  // namespace rpcie::bench
