// ReplyRouter: where the messages an attachment receives go. Replies are filed by request id
// until their caller collects them — only for requests that are outstanding (issued and not
// yet answered or forgotten), so a reply nobody asked for, or a second one, is refused and
// counted instead of stored — interrupts raise per-vector counts, an error for a posted
// write is kept for the next operation, and the first failure of the link is sticky. A
// listener (Attachment::listen) hears of every interrupt and of the failure.
//
// Thread-safety: all members may be called from any thread. One mutex guards the state; the
// listener is called outside it, serialised by a second one (listen() takes it too, so no
// call is running once a listener has been replaced). Callers that cannot receive themselves
// sleep in sleep() and are woken only when something was filed for them: every wake-up of a
// thread that does not care costs a context switch on the latency path of every request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rpcie/deadline.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie::client {

// Request ids of posted writes have the top bit set: the exporter answers them only when
// they fail, and such an answer is kept for the caller's next operation.
inline constexpr std::uint64_t kPostedBit = proto::kRequestPosted;
// The most an interrupt count may grow between two interrupt messages of one vector: more
// than a device raises between two sends, far less than a count that would hide every later
// interrupt (a count near 2^64 - 1).
inline constexpr std::uint64_t kInterruptStepMax = std::uint64_t{1} << 32;

class ReplyRouter {
 public:
  struct Reply {
    std::int32_t status = 0;  // 0 or an errno value from the device side
    std::uint64_t value = 0;
    std::string text;
    std::optional<proto::TelemetryReply> telemetry;  // a telemetry_reply's content
  };

  // `vectors`: interrupt vectors of the device; interrupts on others are ignored. `name`
  // names the attachment in the failure's log line. `posted_errors_counted`: an error for a
  // posted write is counted and logged, not kept for the next operation
  // (ClientOptions::PostedErrors::counted).
  ReplyRouter(std::uint16_t vectors, std::string name, bool posted_errors_counted = false)
      : name_(std::move(name)), posted_errors_counted_(posted_errors_counted), irq_counts_(vectors, 0) {}

  // A fresh request id (never 0, never with kPostedBit), outstanding until its reply is
  // collected or request_forget() is called.
  std::uint64_t request_id();
  // A fresh id for a posted write (kPostedBit set): never outstanding; an error for it is
  // accepted only for an id issued before.
  std::uint64_t posted_request_id();
  // The caller stopped waiting for `rid` (its deadline passed, or the send failed): a late
  // reply is dropped without counting it as refused (for the last 256 ids given up on).
  void request_forget(std::uint64_t rid);

  // Files one received message: a reply, an error for a request or a posted write, or an
  // interrupt; anything else is refused (counted, logged at a bounded rate). Wakes sleepers
  // and the listener.
  void message_file(const proto::Decoded& d);
  // The reply for `rid` if it has arrived (then it is removed), else nullopt.
  std::optional<Reply> reply_take(std::uint64_t rid);
  // Collects the reply of a request that has arrived: an error for a posted write sent before
  // it (which arrived first) is reported instead, once, since this request is "the next
  // operation". EPROTO if no reply for `rid` was filed.
  Result<Reply> reply_collect(std::uint64_t rid);
  bool reply_arrived(std::uint64_t rid) const;

  // Makes `e` the sticky failure (the first one wins; later ones are ignored), wakes every
  // sleeper, logs it and tells the listener; `quiet` (an orderly end) does neither. Returns
  // whether this call set it.
  bool fail(Error e, bool quiet = false);
  std::optional<Error> failure() const;

  // Resumption (docs/reliability.md, "Resumption"). The link to the exporter is gone: with
  // a resumer set, the attachment is resuming (failure() stays empty, sleepers are woken and
  // go on waiting within their deadlines) and the resumer is called once per loss, from this
  // thread, so it must not block; without one, this is fail(e) (`e` is the failure as
  // callers would see it). Ignored once failed or while resuming.
  void link_lost(const Error& e);
  void resumer_set(std::function<void()> resumer);
  bool resuming() const;
  // While resuming: the loss that started it.
  std::optional<Error> link_loss() const;
  // The link is back (callers go on over it); counted in resumes().
  void resumed();
  std::uint64_t resumes() const;
  // The request id of the last answer received (a reply, or an error for a request or a
  // posted write; 0 before any): answers arrive in id order, so every earlier one arrived.
  std::uint64_t answered() const;
  // The failure, else a posted write's error (reported once), else nothing. Lock-free while
  // there is neither (every posted write asks): an error filed meanwhile by another thread
  // is reported by a later call.
  std::optional<Error> error_pending();

  std::uint64_t interrupt_count(std::uint16_t vector) const;
  std::uint64_t interrupts_received() const;
  // When the latest interrupt that raised a count was handed to message_file() (the clock
  // read before filing it); the clock's epoch before the first. Stamped before the listener
  // hears of it, so a listener that reads it sees its interrupt's arrival or a later one's.
  Deadline::Clock::time_point interrupt_arrived() const;
  // Errors for posted writes counted so far (posted_errors_counted only).
  std::uint64_t posted_write_errors() const;
  // Messages refused so far: replies to no outstanding request, errors for posted ids never
  // issued, interrupts of no vector or whose count jumped by more than kInterruptStepMax,
  // messages a client never receives. (A stale interrupt count is not refused: it raises
  // nothing.)
  std::uint64_t messages_refused() const;

  // What has happened so far that a caller in sleep() waits for (a message filed, the
  // receive role freed, the failure): a count that only grows. Read it before looking at
  // what you wait for, and pass it to sleep(): a change after the read is never slept through.
  std::uint64_t changes() const noexcept { return changes_.load(std::memory_order_acquire); }
  // Sleeps until changes() differs from `seen`, or `until` (whichever comes first).
  void sleep(Deadline::Clock::time_point until, std::uint64_t seen);
  // Wakes the callers asleep in sleep() (the receive role became free).
  void sleepers_wake();

  void listen(std::function<void()> listener);

 private:
  bool store_locked(const proto::Decoded& d, Deadline::Clock::time_point arrived);  // true for an interrupt
  // What store_locked() does with each kind of message (lock_ held).
  void refusal_note_locked(proto::MsgType type, std::uint64_t rid, const char* why);
  void answer_note_locked(std::uint64_t rid);
  void reply_file_locked(proto::MsgType type, std::uint64_t rid, Reply reply);
  void error_file_locked(proto::MsgType type, std::uint64_t rid, const proto::ErrorMsg& m);
  bool interrupt_file_locked(proto::MsgType type, std::uint64_t rid, const proto::Interrupt& m,
                             Deadline::Clock::time_point arrived);  // true: a new interrupt
  void listener_call();

  const std::string name_;
  const bool posted_errors_counted_;
  mutable std::mutex lock_;
  std::condition_variable changed_;
  // Callers in sleep(), and the count of changes (changes()). sleepers_wake() raises the count
  // without lock_ and takes it only when someone sleeps: it runs after every receive, on the
  // latency path of each request. Both seq_cst: a sleeper counts itself, then reads the count
  // under lock_; a waker raises the count, then reads the sleepers; one of them sees the other.
  std::atomic<int> sleepers_{0};
  std::atomic<std::uint64_t> changes_{0};
  // A change seen by sleepers: counted, and the sleepers woken. Under lock_.
  void sleepers_notify_locked();
  std::uint64_t next_request_ = 1;
  std::map<std::uint64_t, Reply> replies_;  // arrived, not yet collected
  std::set<std::uint64_t> outstanding_;     // issued, not yet answered or forgotten
  // The last kForgottenMax ids given up on: a late reply to one is dropped quietly.
  static constexpr std::size_t kForgottenMax = 256;
  std::deque<std::uint64_t> forgotten_;
  std::uint64_t refused_ = 0;
  std::vector<std::uint64_t> irq_counts_;  // by vector
  std::uint64_t interrupts_ = 0;
  Deadline::Clock::time_point interrupt_arrived_{};
  std::optional<Error> failed_;
  bool resuming_ = false;
  std::optional<Error> loss_;  // while resuming
  std::uint64_t resumes_ = 0;
  std::uint64_t answered_ = 0;
  std::function<void()> resumer_;  // set once, before the first message
  std::optional<Error> posted_error_;
  std::uint64_t posted_errors_ = 0;  // counted ones
  std::atomic<bool> erred_{false};   // failed_ or posted_error_ is set (written under lock_)

  std::mutex listener_lock_;
  std::function<void()> listener_;
};

}  // namespace rpcie::client
