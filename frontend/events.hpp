// The `events` files of a device directory, as UIO's /dev/uioN: a 4-byte read blocks until
// the vector's interrupt count differs from the one this file last reported, then returns
// the count; poll() reports POLLIN when a read would not block; writing 0 masks the vector,
// 1 unmasks it. A link loss since the open is reported as EIO (POLLERR), a withdrawn device as
// ENODEV (POLLERR | POLLHUP), both for good: the device that comes back is reset, and a file
// of the one before must be reopened.
//
// A blocking read is parked without a thread and answered when the count moves, the link is
// lost, the device is withdrawn, the file is released or the reader is interrupted (EINTR).
// While a read is parked or a poll armed on a device's events file, its attachment's
// background receiver does not stand aside after calls (client::Attachment::interrupt_watch):
// the interrupt is received, and the waiter woken, as soon as it arrives.
// Thread-safety: every member may be called from any thread.
#pragma once

#include <fuse_lowlevel.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace rpcie::hostd {

struct Node;
struct OpenFile;

// What an open events file has reported so far.
struct EventsCursor {
  std::uint64_t seen = 0;    // the count it last reported (at open: the count then)
  std::uint64_t losses = 0;  // the device's link losses at open
};

// What a read of an events file answers, given the device's state now.
struct EventsNews {
  enum class Kind { none, gone, lost, count } kind = Kind::none;  // none: nothing new, wait
  std::uint32_t count = 0;                                        // for Kind::count
};
// Takes the news for `cursor` (moving it past what is answered): the device is withdrawn
// (`gone`), has lost its link since the open (`losses` differs: for good), or `count` moved.
EventsNews events_news_take(EventsCursor& cursor, bool gone, std::uint64_t losses, std::uint64_t count);
// poll()'s answer for `cursor` without taking the news.
unsigned events_revents(const EventsCursor& cursor, bool gone, std::uint64_t losses, std::uint64_t count);
// A write to an events file: 4 bytes, 0 masks, 1 unmasks. True for masked; nullopt (EINVAL)
// for anything else.
std::optional<bool> events_mask_parse(const char* buf, std::size_t size);

class Events {
 public:
  // An events file opened: it counts from the device's count now.
  void open(OpenFile& f);
  // Before the file is deleted: answers its parked reads EINTR, drops its poll handle.
  void release(OpenFile& f);
  void read(fuse_req_t req, OpenFile& f, std::size_t size, int flags);
  void write(fuse_req_t req, OpenFile& f, const char* buf, std::size_t size);
  // Takes `ph` (may be null); answers the request.
  void poll(fuse_req_t req, OpenFile& f, fuse_pollhandle* ph);
  // `node`'s interrupt counts or link changed, or it is being withdrawn (`gone`, for good):
  // parked reads with news are answered, pollers woken.
  void changed(Node* node, bool gone);

 private:
  struct Parked {
    fuse_req_t req;
    OpenFile* file;
  };
  static void interrupted(fuse_req_t req, void* data);
  bool answer_locked(fuse_req_t req, OpenFile& f);
  unsigned revents_locked(const OpenFile& f) const;
  // A read of `node`'s events parked or a poll armed (+1), or one of them ended (-1): while
  // any waits, the device's attachment receives interrupts at once
  // (RemoteDevice::interrupt_watch).
  void waiting_change_locked(Node* node, int delta);

  std::mutex lock_;
  std::list<Parked> parked_;
  std::set<OpenFile*> open_;           // for their poll handles
  std::map<Node*, unsigned> waiting_;  // parked reads + armed polls, per device
};

}  // namespace rpcie::hostd
