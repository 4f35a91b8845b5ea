// OperationTimer: times one client API call into a LatencyHistogram, or counts it failed.
// Internal to core (the attachment's calls). A scope guard: the call marks success with
// done() just before its successful return; any other way out (an error returned early by
// RPCIE_TRY) counts as a failure and records no latency.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "rpcie/latency_histogram.hpp"

namespace rpcie::client {

class OperationTimer {
 public:
  OperationTimer(LatencyHistogram& histogram, std::atomic<std::uint64_t>& failed) noexcept
      : histogram_(histogram), failed_(failed), start_(std::chrono::steady_clock::now()) {}
  ~OperationTimer() {
    if (done_)
      histogram_.record(std::chrono::steady_clock::now() - start_);
    else
      failed_.fetch_add(1, std::memory_order_relaxed);
  }
  OperationTimer(const OperationTimer&) = delete;
  OperationTimer& operator=(const OperationTimer&) = delete;

  void done() noexcept { done_ = true; }

 private:
  LatencyHistogram& histogram_;
  std::atomic<std::uint64_t>& failed_;
  const std::chrono::steady_clock::time_point start_;
  bool done_ = false;
};

}  // namespace rpcie::client
