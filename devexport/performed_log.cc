// What the exporter performed of one attachment's requests (performed_log.hpp).
#include "performed_log.hpp"

namespace rpcie::dev {

using proto::request_order;

bool PerformedLog::record(std::uint64_t request_id, std::span<const std::uint8_t> answer) {
  const std::uint64_t order = request_order(request_id);
  if (order <= performed_) return false;
  performed_ = order;
  if (answer.empty()) return true;
  if (answers_max_ == 0) {
    evicted_through_ = order;
    return true;
  }
  if (answers_.size() == answers_max_) {
    evicted_through_ = request_order(answers_.front().request_id);
    answers_.pop_front();
  }
  answers_.push_back({request_id, {answer.begin(), answer.end()}});
  return true;
}

std::optional<std::vector<PerformedLog::Answer>> PerformedLog::answers_after(std::uint64_t after) const {
  if (evicted_through_ > request_order(after)) return std::nullopt;
  std::vector<Answer> out;
  for (const auto& a : answers_)
    if (request_order(a.request_id) > request_order(after)) out.push_back(a);
  return out;
}

}  // namespace rpcie::dev
