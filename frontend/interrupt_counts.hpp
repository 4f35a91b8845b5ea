// The interrupt counts a device's `events` files show, by vector: cumulative over every
// attachment the device has had (a lost link is reconnected under the same device), held while
// the vector is masked, and what arrived meanwhile delivered on unmask (like MSI's pending
// bit). A visible count never goes down.
// Not thread-safe: its owner (RemoteDevice) guards it with its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rpcie::hostd {

class InterruptCounts {
 public:
  explicit InterruptCounts(std::size_t vectors = 0)
      : base_(vectors, 0), visible_(vectors, 0), masked_(vectors, false) {}

  // Follows the current attachment's counts, `count(vector)` (0 while there is none), except
  // on masked vectors. True if a visible count rose.
  template <class Count>
  bool refresh(Count&& count) {
    bool rose = false;
    for (std::size_t v = 0; v < visible_.size(); ++v) {
      if (masked_[v]) continue;
      const std::uint64_t now = base_[v] + count(static_cast<std::uint16_t>(v));
      if (now > visible_[v]) visible_[v] = now, rose = true;
    }
    return rose;
  }
  // The current attachment ended with `count(vector)` interrupts: the next one counts on
  // from there.
  template <class Count>
  void attachment_end(Count&& count) {
    for (std::size_t v = 0; v < base_.size(); ++v) base_[v] += count(static_cast<std::uint16_t>(v));
  }

  std::uint64_t visible(std::uint16_t vector) const { return vector < visible_.size() ? visible_[vector] : 0; }
  // False if there is no such vector. Unmasking shows nothing new until the next refresh().
  bool mask_set(std::uint16_t vector, bool masked) {
    if (vector >= masked_.size()) return false;
    masked_[vector] = masked;
    return true;
  }

 private:
  std::vector<std::uint64_t> base_;     // interrupts of earlier attachments
  std::vector<std::uint64_t> visible_;  // what `events` shows
  std::vector<bool> masked_;
};

}  // namespace rpcie::hostd
