// rpcie::Deadline — every wait in rpcie has one.
//
// A Deadline is a point on the monotonic clock. There is deliberately no "forever":
// callers that want to wait long pass a long deadline and handle ETIMEDOUT.
// Value type; thread-safe to copy and query.
#pragma once

#include <chrono>
#include <climits>

namespace rpcie {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(Clock::duration d) noexcept { return Deadline(Clock::now() + d); }
  static Deadline at(Clock::time_point t) noexcept { return Deadline(t); }

  Clock::time_point when() const noexcept { return when_; }
  bool expired() const noexcept { return Clock::now() >= when_; }

  // Time left, never negative.
  Clock::duration remaining() const noexcept {
    auto left = when_ - Clock::now();
    return left.count() > 0 ? left : Clock::duration::zero();
  }

  // Time left in whole milliseconds for poll(2): rounded up so that a wait never returns
  // before the deadline, capped at INT_MAX, 0 once expired.
  int remaining_ms() const noexcept {
    auto left = remaining();
    if (left == Clock::duration::zero()) return 0;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
  }

  // The earlier of two deadlines.
  Deadline min(Deadline other) const noexcept { return other.when_ < when_ ? other : *this; }

 private:
  explicit Deadline(Clock::time_point t) noexcept : when_(t) {}
  Clock::time_point when_;
};

}  // namespace rpcie
