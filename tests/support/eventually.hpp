// Polls a condition every millisecond until it holds or `limit` passes (then it is asked once
// more). For tests that wait for another thread: bounded, no fixed sleeps.
#pragma once

#include <chrono>
#include <thread>

namespace rpcie::test {

template <class Pred>
bool eventually(Pred&& done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace rpcie::test
