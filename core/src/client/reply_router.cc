#include "reply_router.hpp"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <variant>

#include "rpcie/log.hpp"

namespace rpcie::client {

namespace {

// A peer's mistakes (or forgeries) are logged at a bounded rate.
LogLimiter& refusal_log() {
  static LogLimiter limiter;
  return limiter;
}

}  // namespace

std::uint64_t ReplyRouter::request_id() {
  std::lock_guard g(lock_);
  const std::uint64_t rid = next_request_++;
  outstanding_.insert(rid);
  return rid;
}

std::uint64_t ReplyRouter::posted_request_id() {
  std::lock_guard g(lock_);
  return next_request_++ | kPostedBit;
}

void ReplyRouter::request_forget(std::uint64_t rid) {
  std::lock_guard g(lock_);
  if (outstanding_.erase(rid) == 0) return;
  replies_.erase(rid);
  // Its reply may still come (a slow exporter): dropped quietly, not taken for a forgery.
  if (forgotten_.size() == kForgottenMax) forgotten_.pop_front();
  forgotten_.push_back(rid);
}

std::uint64_t ReplyRouter::messages_refused() const {
  std::lock_guard g(lock_);
  return refused_;
}

void ReplyRouter::message_file(const proto::Decoded& d) {
  // Read before the lock: an interrupt's arrival is when it was received, not when the
  // router was free (rpcie-hostd times its delivery from here).
  const auto arrived = Deadline::Clock::now();
  if (store_locked(d, arrived)) listener_call();
}

bool ReplyRouter::store_locked(const proto::Decoded& d, Deadline::Clock::time_point arrived) {
  std::lock_guard g(lock_);
  bool interrupt = false;
  const auto rid = d.header.request_id;
  const auto type = d.header.type;
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, proto::ReadReply>) {
          answer_note_locked(rid);
          reply_file_locked(type, rid, Reply{m.status, m.value, {}, {}});
        } else if constexpr (std::is_same_v<M, proto::WriteAck>) {
          answer_note_locked(rid);
          reply_file_locked(type, rid, Reply{m.status, 0, {}, {}});
        } else if constexpr (std::is_same_v<M, proto::TelemetryReply>) {
          answer_note_locked(rid);
          reply_file_locked(type, rid, Reply{0, 0, {}, m});
        } else if constexpr (std::is_same_v<M, proto::ErrorMsg>) {
          answer_note_locked(rid);
          error_file_locked(type, rid, m);
        } else if constexpr (std::is_same_v<M, proto::Interrupt>) {
          interrupt = interrupt_file_locked(type, rid, m, arrived);
        } else {
          refusal_note_locked(type, rid, "not a message the exporter sends");
        }
      },
      d.message);
  // The thread that receives files its own reply; only callers that found the receive role
  // taken sleep and need waking.
  sleepers_notify_locked();
  return interrupt;
}

void ReplyRouter::refusal_note_locked(proto::MsgType type, std::uint64_t rid, const char* why) {
  ++refused_;
  RPCIE_LOG_LIMITED(refusal_log(), LogLevel::warn, "client", "attachment {}: refusing {} (request {:#x}): {}", name_,
                    proto::msg_type_name(type), rid, why);
}

void ReplyRouter::answer_note_locked(std::uint64_t rid) {
  // An answer (to an id this client gave) tells a resume where the exporter's answers stopped.
  if (proto::request_order(rid) < next_request_ && proto::request_order(rid) > proto::request_order(answered_))
    answered_ = rid;
}

void ReplyRouter::reply_file_locked(proto::MsgType type, std::uint64_t rid, Reply reply) {
  // A reply is filed once, for a request that waits for it.
  if (outstanding_.erase(rid) == 0) {
    const auto late = std::find(forgotten_.begin(), forgotten_.end(), rid);
    if (late == forgotten_.end()) return refusal_note_locked(type, rid, "no request waits for it");
    forgotten_.erase(late);
    return;
  }
  replies_[rid] = std::move(reply);
}

void ReplyRouter::error_file_locked(proto::MsgType type, std::uint64_t rid, const proto::ErrorMsg& m) {
  // Either the answer to a request that waits, or a posted write that failed at the device:
  // nobody waits for that one, the next operation reports it.
  const int code = m.code > 0 ? m.code : EPROTO;
  const bool posted = (rid & kPostedBit) != 0;
  const std::uint64_t posted_id = rid & ~kPostedBit;
  if (!posted) {
    reply_file_locked(type, rid, Reply{code, 0, std::string(m.text), {}});
  } else if (posted_id == 0 || posted_id >= next_request_) {
    refusal_note_locked(type, rid, "no posted write had this id");
  } else if (posted_errors_counted_) {
    // Logged at 1, 2, 4, 8, ...: a program that keeps storing to a refused register must
    // not flood the log, and the count is in the stats.
    const std::uint64_t count = ++posted_errors_;
    if ((count & (count - 1)) == 0)
      RPCIE_LOG_WARN("client", "attachment {}: a posted write failed at the device ({} so far): {}", name_, count,
                     m.text);
  } else if (!posted_error_) {
    posted_error_ = Error{ErrorDomain::posix, code, "posted write failed at the device: " + std::string(m.text)};
    erred_.store(true, std::memory_order_release);
  }
}

bool ReplyRouter::interrupt_file_locked(proto::MsgType type, std::uint64_t rid, const proto::Interrupt& m,
                                        Deadline::Clock::time_point arrived) {
  // Counts only grow (a stale one changes nothing), and never by more than kInterruptStepMax
  // at once: a count near 2^64 - 1 would hide every later interrupt of the vector.
  if (m.vector >= irq_counts_.size()) {
    refusal_note_locked(type, rid, "no such interrupt vector");
    return false;
  }
  if (m.count > irq_counts_[m.vector] && m.count - irq_counts_[m.vector] > kInterruptStepMax) {
    refusal_note_locked(type, rid, "interrupt count out of range");
    return false;
  }
  irq_counts_[m.vector] = std::max(irq_counts_[m.vector], m.count);
  ++interrupts_;
  interrupt_arrived_ = arrived;
  return true;
}

std::optional<ReplyRouter::Reply> ReplyRouter::reply_take(std::uint64_t rid) {
  std::lock_guard g(lock_);
  auto it = replies_.find(rid);
  if (it == replies_.end()) return std::nullopt;
  Reply r = std::move(it->second);
  replies_.erase(it);
  return r;
}

Result<ReplyRouter::Reply> ReplyRouter::reply_collect(std::uint64_t rid) {
  std::lock_guard g(lock_);
  auto it = replies_.find(rid);
  if (it == replies_.end()) return rpcie::fail(EPROTO, "no reply filed for request " + std::to_string(rid));
  Reply r = std::move(it->second);
  replies_.erase(it);
  if (posted_error_) return tl::unexpected(*std::exchange(posted_error_, std::nullopt));
  return r;
}

bool ReplyRouter::reply_arrived(std::uint64_t rid) const {
  std::lock_guard g(lock_);
  return replies_.count(rid) != 0;
}

bool ReplyRouter::fail(Error e, bool quiet) {
  {
    std::lock_guard g(lock_);
    if (failed_) return false;
    if (!quiet) RPCIE_LOG_WARN("client", "attachment {} failed: {}", name_, e.describe());
    failed_ = std::move(e);
    erred_.store(true, std::memory_order_release);
    sleepers_notify_locked();
  }
  if (!quiet) listener_call();
  return true;
}

void ReplyRouter::link_lost(const Error& e) {
  std::function<void()> resumer;
  {
    std::lock_guard g(lock_);
    if (failed_ || resuming_) return;
    if (resumer_) {
      RPCIE_LOG_WARN("client", "attachment {}: link lost ({}); resuming", name_, e.describe());
      resuming_ = true;
      loss_ = e;
      resumer = resumer_;
      sleepers_notify_locked();  // callers stop receiving on the dead link
    }
  }
  if (!resumer) {
    (void)fail(e);
    return;
  }
  resumer();
}

void ReplyRouter::resumer_set(std::function<void()> resumer) {
  std::lock_guard g(lock_);
  resumer_ = std::move(resumer);
}

bool ReplyRouter::resuming() const {
  std::lock_guard g(lock_);
  return resuming_;
}

std::optional<Error> ReplyRouter::link_loss() const {
  std::lock_guard g(lock_);
  if (!resuming_) return std::nullopt;
  return loss_;
}

void ReplyRouter::resumed() {
  std::lock_guard g(lock_);
  resuming_ = false;
  loss_.reset();
  ++resumes_;
  sleepers_notify_locked();
}

std::uint64_t ReplyRouter::resumes() const {
  std::lock_guard g(lock_);
  return resumes_;
}

std::uint64_t ReplyRouter::answered() const {
  std::lock_guard g(lock_);
  return answered_;
}

std::optional<Error> ReplyRouter::failure() const {
  std::lock_guard g(lock_);
  return failed_;
}

std::optional<Error> ReplyRouter::error_pending() {
  if (!erred_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard g(lock_);
  if (failed_) return failed_;
  erred_.store(false, std::memory_order_relaxed);
  if (posted_error_) return std::exchange(posted_error_, std::nullopt);
  return std::nullopt;
}

std::uint64_t ReplyRouter::interrupt_count(std::uint16_t vector) const {
  std::lock_guard g(lock_);
  return vector < irq_counts_.size() ? irq_counts_[vector] : 0;
}

std::uint64_t ReplyRouter::posted_write_errors() const {
  std::lock_guard g(lock_);
  return posted_errors_;
}

std::uint64_t ReplyRouter::interrupts_received() const {
  std::lock_guard g(lock_);
  return interrupts_;
}

Deadline::Clock::time_point ReplyRouter::interrupt_arrived() const {
  std::lock_guard g(lock_);
  return interrupt_arrived_;
}

void ReplyRouter::sleep(Deadline::Clock::time_point until, std::uint64_t seen) {
  std::unique_lock g(lock_);
  sleepers_.fetch_add(1);
  changed_.wait_until(g, until, [&] { return failed_ || changes_.load() != seen; });
  sleepers_.fetch_sub(1);
}

void ReplyRouter::sleepers_notify_locked() {
  changes_.fetch_add(1);
  if (sleepers_.load() > 0) changed_.notify_all();
}

void ReplyRouter::sleepers_wake() {
  changes_.fetch_add(1);
  if (sleepers_.load() == 0) return;  // a sleeper still to come reads the raised count
  // A counted sleeper holds lock_ from its count to its wait: taking it here means it waits.
  std::lock_guard g(lock_);
  changed_.notify_all();
}

void ReplyRouter::listen(std::function<void()> listener) {
  std::lock_guard l(listener_lock_);
  listener_ = std::move(listener);
}

void ReplyRouter::listener_call() {
  std::lock_guard l(listener_lock_);
  if (listener_) listener_();
}

}  // namespace rpcie::client
