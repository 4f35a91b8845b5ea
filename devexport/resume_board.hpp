// ResumeBoard: the exporter's attachments as resumption sees them (docs/reliability.md,
// "Resumption"). Each served attachment is listed (an Entry, RAII) for its whole life by the
// connection that serves it; once its link is lost it is parked and waits, for a lease, for a
// resume_request of the same client, which another connection hands over (hand_over). A fresh
// attach of that client to the same export ends its parked attachments (end_parked).
//
// Thread-safety: every member may be called from any thread (one mutex). An Entry's own calls
// come from its serving thread; hand_over and end_parked from other connections' threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>

#include "export_slot.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/event_fd.hpp"
#include "rpcie/protocol.hpp"

namespace rpcie::dev {

class ResumeBoard {
 public:
  // A connection that asked to resume an attachment, handed over to it.
  struct Resume {
    Socket socket;
    proto::ResumeRequest request;
    std::uint64_t rid = 0;
  };

  class Entry {
   public:
    // Lists attachment `id` of `client` on `slot`; the destructor unlists it (after the
    // attachment ended: claim released, device reset).
    Entry(ResumeBoard& board, ExportSlot& slot, std::string client, std::uint64_t id);
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

    // A resume_request for it waits (the client lost its link: serving it ends).
    bool asked() const;
    // Its link is lost: from now a fresh attach of the client ends it, and a resume_request
    // that comes while it is parking waits for wait().
    void park_begin();
    // Until `until`, the handed-over resume; nullopt (and `why` says it) when the client
    // attached anew, `stopping()` turned true (looked at every `slice`) or the time ran out.
    std::optional<Resume> wait(Deadline::Clock::time_point until, const std::function<bool()>& stopping,
                               std::chrono::milliseconds slice, const char*& why);
    // The attachment ends: no resume_request is taken for it any more; one taken since it
    // stopped waiting is answered ENOENT.
    void close();
    // Readable when its serving thread has news to look at: a resume_request was handed
    // over (asked()) or the exporter is stopping (wake_all). The serving thread drains it.
    int news_fd() const noexcept { return news_.fd(); }
    void news_drain() const noexcept { news_.drain(); }

   private:
    friend class ResumeBoard;
    ResumeBoard& board_;
    ExportSlot* const slot_;
    const std::string client_;
    const std::uint64_t id_;
    // Under board_.lock_:
    bool waiting_ = false;  // parked, waiting for a resume
    bool end_ = false;      // ended, or the client attached anew
    std::optional<Resume> resume_;
    EventFd news_;
  };

  // A resume_request on an authenticated connection of `client`: hands the connection to the
  // attachment it names (parked, or still served: the client's word that its link is lost
  // counts). False when there is none (the caller answers ENOENT).
  bool hand_over(Socket& sock, const proto::ResumeRequest& req, std::uint64_t rid, const std::string& client);
  // A fresh attach of `client` to `slot`: its parked attachments there end now (their device
  // is reset) instead of at the end of their lease. Waits until they are unlisted, until
  // `deadline`.
  void end_parked(ExportSlot& slot, const std::string& client, Deadline deadline);
  // The exporter is stopping: every serving thread looks at its stop flag now.
  void wake_all();

 private:
  mutable std::mutex lock_;
  std::condition_variable changed_;
  std::list<Entry*> entries_;
};

}  // namespace rpcie::dev
