// Fakes of the exporter side of backend.hpp for backend unit tests: a DmaPort over a plain
// byte vector (the "client window") and an IrqSink that counts and lets a test wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "backend.hpp"

namespace rpcie::test {

class FakeDmaPort : public dev::DmaPort {
 public:
  explicit FakeDmaPort(std::size_t size) : window(size, 0) {}
  std::uint64_t window_size() const noexcept override { return window.size(); }
  Result<void> dma_read(std::uint64_t iova, std::span<std::uint8_t> into, Deadline) override {
    std::lock_guard g(lock);
    if (iova > window.size() || into.size() > window.size() - iova) return fail(EFAULT, "outside the window");
    std::memcpy(into.data(), window.data() + iova, into.size());
    ++reads;
    return {};
  }
  Result<void> dma_write(std::uint64_t iova, std::span<const std::uint8_t> from, Deadline) override {
    std::lock_guard g(lock);
    if (iova > window.size() || from.size() > window.size() - iova) return fail(EFAULT, "outside the window");
    std::memcpy(window.data() + iova, from.data(), from.size());
    ++writes;
    return {};
  }
  std::mutex lock;
  std::vector<std::uint8_t> window;
  int reads = 0;
  int writes = 0;
};

class FakeIrqSink : public dev::IrqSink {
 public:
  void irq_raise(std::uint16_t vector) override {
    std::lock_guard g(lock);
    ++counts[vector];
    changed.notify_all();
  }
  int count(std::uint16_t vector) {
    std::lock_guard g(lock);
    return counts[vector];
  }
  // Waits until vector's count reaches `n` or `timeout` passes; returns the count.
  int wait(std::uint16_t vector, int n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock g(lock);
    changed.wait_for(g, timeout, [&] { return counts[vector] >= n; });
    return counts[vector];
  }
  std::mutex lock;
  std::condition_variable changed;
  std::map<std::uint16_t, int> counts;
};

}  // namespace rpcie::test
