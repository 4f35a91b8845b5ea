// ResendQueue: the data-path messages of one attachment that were sent and are not yet
// proven performed, kept encoded in send order, so that after a resume over a new connection
// the client sends again exactly those the exporter did not perform, once and in order
// (docs/reliability.md, "Resumption").
//
// Proof of performance: any answer to id N (a reply, or an error for a posted write) proves
// every id up to N performed, because ids leave in the order they were given (taken under
// Attachment::State::send_lock), the fabric delivers in order, and the exporter performs in
// arrival order (ARCHITECTURE rule 2). After a lost link the exporter says how far it got.
//
// Contract:
//  - keep() takes ids in increasing order (kPostedBit ignored for the order); an id not
//    above the last kept one is refused (false) and nothing is kept.
//  - performed_through(N) drops every message with an id up to N (kPostedBit ignored).
//  - bytes() is what is kept (lock-free, for a check on every posted write): the owner bounds
//    it by sending a request whose reply proves the rest performed (a stream of posted
//    writes has no answers of its own).
//  - Thread-safety: every member may be called from any thread (one mutex): senders keep,
//    the thread that files answers drops.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <vector>

namespace rpcie::client {

class ResendQueue {
 public:
  struct Kept {
    std::uint64_t request_id = 0;  // as sent (kPostedBit kept)
    std::vector<std::uint8_t> bytes;
    bool operator==(const Kept&) const = default;
  };

  // Keeps `encoded`, the message just sent with id `request_id`.
  bool keep(std::uint64_t request_id, std::span<const std::uint8_t> encoded);
  // Everything up to `request_id` was performed.
  void performed_through(std::uint64_t request_id);
  // The messages with an id above `performed`, in send order: what a resume sends again.
  std::vector<Kept> after(std::uint64_t performed) const;
  std::size_t bytes() const;
  std::size_t size() const;

 private:
  mutable std::mutex lock_;
  std::deque<Kept> kept_;
  std::uint64_t last_ = 0;             // the last id kept, without kPostedBit
  std::atomic<std::size_t> bytes_{0};  // changed under lock_; read without it (bytes())
};

}  // namespace rpcie::client
