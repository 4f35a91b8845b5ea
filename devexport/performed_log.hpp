// What the exporter performed of one attachment's requests, and the answers it sent for the
// latest ones: what a client that lost its link needs to be told, so that it sends again
// exactly the requests that were not performed and hears every answer once
// (docs/reliability.md, "Resumption").
//
// Why a watermark suffices: the client gives request ids (posted writes and requests share
// one counter, posted ids carry proto::kRequestPosted) in the order it sends them, the fabric delivers
// them in that order, and one data thread performs them in arrival order. So "performed
// through N" says which were performed, and an answer to an id above the client's last
// received one is an answer it has not seen.
//
// Contract:
//  - record() takes ids in increasing order (the posted bit ignored for the order); an id not
//    above the last recorded one is refused (false) and changes nothing.
//  - At most answers_max() answers are kept (the oldest go first); answers_after() fails
//    (nullopt) when an answer it would return is gone, so a caller never resends a partial
//    set as if whole.
//  - Not thread-safe: the attachment's data thread records; a resume reads it once that
//    thread has stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "rpcie/protocol.hpp"

namespace rpcie::dev {

class PerformedLog {
 public:
  struct Answer {
    std::uint64_t request_id = 0;     // as the client gave it (the posted bit kept)
    std::vector<std::uint8_t> bytes;  // the encoded answer, as sent
    bool operator==(const Answer&) const = default;
  };
  static constexpr std::size_t kAnswersMaxDefault = 256;

  explicit PerformedLog(std::size_t answers_max = kAnswersMaxDefault) noexcept : answers_max_(answers_max) {}

  // Request `request_id` was performed; `answer` is what was sent for it (empty: nothing was,
  // as for a posted write that succeeded). False (and nothing recorded) if the id is not
  // above the last one.
  bool record(std::uint64_t request_id, std::span<const std::uint8_t> answer);

  // The highest id performed, without the posted bit; 0 before the first.
  std::uint64_t performed() const noexcept { return performed_; }

  // The answers to requests with an id above `after` (the posted bit ignored), in id order;
  // nullopt if one of them is no longer kept.
  std::optional<std::vector<Answer>> answers_after(std::uint64_t after) const;

  std::size_t answers_max() const noexcept { return answers_max_; }

 private:
  const std::size_t answers_max_;
  std::uint64_t performed_ = 0;
  std::uint64_t evicted_through_ = 0;  // the highest id whose answer was dropped
  std::deque<Answer> answers_;
};

}  // namespace rpcie::dev
