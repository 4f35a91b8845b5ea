// The exporter's attachments as resumption sees them (resume_board.hpp).
#include "resume_board.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace rpcie::dev {

ResumeBoard::Entry::Entry(ResumeBoard& board, ExportSlot& slot, std::string client, std::uint64_t id)
    : board_(board), slot_(&slot), client_(std::move(client)), id_(id) {
  std::lock_guard g(board_.lock_);
  board_.entries_.push_back(this);
}

ResumeBoard::Entry::~Entry() {
  {
    std::lock_guard g(board_.lock_);
    board_.entries_.remove(this);
  }
  board_.changed_.notify_all();
}

bool ResumeBoard::Entry::asked() const {
  std::lock_guard g(board_.lock_);
  return resume_.has_value();
}

void ResumeBoard::Entry::park_begin() {
  std::lock_guard g(board_.lock_);
  waiting_ = true;
}

std::optional<ResumeBoard::Resume> ResumeBoard::Entry::wait(Deadline::Clock::time_point until,
                                                            const std::function<bool()>& stopping,
                                                            std::chrono::milliseconds slice, const char*& why) {
  std::unique_lock g(board_.lock_);
  while (!resume_ && !end_ && !stopping() && Deadline::Clock::now() < until) board_.changed_.wait_for(g, slice);
  waiting_ = false;
  why = resume_ ? "resumed" : end_ ? "the client attached anew" : stopping() ? "shutdown" : "lease lapsed";
  return std::exchange(resume_, std::nullopt);
}

void ResumeBoard::Entry::close() {
  std::optional<Resume> late;
  {
    std::lock_guard g(board_.lock_);
    end_ = true;
    late = std::exchange(resume_, std::nullopt);
  }
  if (late)
    (void)late->socket.message_send(proto::ErrorMsg{ENOENT, "the attachment to resume has ended"}, late->rid,
                                    Deadline::after(std::chrono::seconds(1)));
}

bool ResumeBoard::hand_over(Socket& sock, const proto::ResumeRequest& req, std::uint64_t rid,
                            const std::string& client) {
  {
    std::lock_guard g(lock_);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry* e) {
      return e->id_ == req.attachment_id && e->client_ == client && !e->end_ && !e->resume_;
    });
    if (it == entries_.end()) return false;
    (*it)->resume_.emplace(Resume{std::move(sock), req, rid});
    (*it)->news_.post();
  }
  changed_.notify_all();
  return true;
}

void ResumeBoard::wake_all() {
  {
    std::lock_guard g(lock_);
    for (const Entry* e : entries_) e->news_.post();
  }
  changed_.notify_all();
}

void ResumeBoard::end_parked(ExportSlot& slot, const std::string& client, Deadline deadline) {
  std::unique_lock g(lock_);
  std::vector<std::uint64_t> ended;
  for (Entry* e : entries_) {
    if (e->slot_ != &slot || e->client_ != client || !e->waiting_) continue;
    e->end_ = true;
    ended.push_back(e->id_);
  }
  if (ended.empty()) return;
  changed_.notify_all();
  changed_.wait_until(g, deadline.when(), [&] {
    return std::none_of(entries_.begin(), entries_.end(),
                        [&](const Entry* e) { return std::find(ended.begin(), ended.end(), e->id_) != ended.end(); });
  });
}

}  // namespace rpcie::dev
