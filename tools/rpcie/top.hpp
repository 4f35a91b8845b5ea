// `rpcie top`: a live view of rpcie-hostd's devices, one line each, refreshed every interval
// (docs/rpcie.md): rates over the last interval from two `status` answers, and the MMIO read
// latency quantiles of the reads in it and hostd's interrupt-delivery p99 from the
// histograms the answers carry.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace rpcie::cli {

struct TopOptions {
  std::string control_path;  // as --control of the other commands
  double interval_s = 1.0;
  int count = 0;  // frames to print; 0: until interrupted
  int timeout_s = 15;
};

// One frame: a title line, a header and a line per device of `now` (status answers; a device
// missing from `before` is shown from zero). `seconds`: the time between the two. Fields of
// another type than documented read as absent (never throws).
std::string top_frame(const nlohmann::json& before, const nlohmann::json& now, double seconds);

// Prints frames to stdout until `count` are done: on a terminal each replaces the last (ANSI
// clear), else they are separated by a blank line. Exit status: 0, or 1 (hostd unreachable;
// the message on stderr).
int top_run(const TopOptions& options);

}  // namespace rpcie::cli
