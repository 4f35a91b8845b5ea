#include "events.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <poll.h>

#include "inode.hpp"
#include "open_file.hpp"
#include "remote_device.hpp"

namespace rpcie::hostd {

EventsNews events_news_take(EventsCursor& cursor, bool gone, std::uint64_t losses, std::uint64_t count) {
  if (gone) return {EventsNews::Kind::gone};
  // A loss is reported for good: the device comes back reset, and counts of the device that
  // was mean nothing for the one that is (reopen the file).
  if (losses != cursor.losses) return {EventsNews::Kind::lost};
  if (count == cursor.seen) return {};
  cursor.seen = count;
  return {EventsNews::Kind::count, static_cast<std::uint32_t>(count)};
}

unsigned events_revents(const EventsCursor& cursor, bool gone, std::uint64_t losses, std::uint64_t count) {
  if (gone) return POLLERR | POLLHUP;
  if (losses != cursor.losses) return POLLERR;
  return count != cursor.seen ? (POLLIN | POLLRDNORM) : 0;
}

std::optional<bool> events_mask_parse(const char* buf, std::size_t size) {
  std::uint32_t v = 0;
  if (size != sizeof v) return std::nullopt;
  std::memcpy(&v, buf, sizeof v);
  if (v > 1) return std::nullopt;
  return v == 0;
}

void Events::open(OpenFile& f) {
  std::lock_guard g(lock_);
  f.cursor.seen = f.node->dev->interrupts(f.vector());
  f.cursor.losses = f.node->dev->losses();
  open_.insert(&f);
}

// Under lock_. Answers a read of `f` if it has news; false if it must wait.
bool Events::answer_locked(fuse_req_t req, OpenFile& f) {
  const auto& dev = *f.node->dev;
  const auto losses = dev.losses();
  const auto news = events_news_take(f.cursor, f.node->gone, losses, dev.interrupts(f.vector()));
  switch (news.kind) {
    case EventsNews::Kind::none:
      return false;
    case EventsNews::Kind::gone:
      fuse_reply_err(req, ENODEV);
      return true;
    case EventsNews::Kind::lost:
      fuse_reply_err(req, EIO);
      return true;
    case EventsNews::Kind::count:
      fuse_reply_buf(req, reinterpret_cast<const char*>(&news.count), sizeof news.count);
      return true;
  }
  return false;
}

unsigned Events::revents_locked(const OpenFile& f) const {
  const auto& dev = *f.node->dev;
  const auto losses = dev.losses();
  return events_revents(f.cursor, f.node->gone, losses, dev.interrupts(f.vector()));
}

void Events::changed(Node* node, bool gone) {
  std::lock_guard g(lock_);
  // A withdrawn device stays so for files still open on it: their reads and polls end
  // with ENODEV / POLLERR rather than wait for counts that will never move again.
  if (gone) node->gone = true;
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->file->node.get() != node || !answer_locked(it->req, *it->file)) {
      ++it;
      continue;
    }
    it = parked_.erase(it);
    waiting_change_locked(node, -1);
  }
  for (auto* f : open_) {
    if (f->node.get() != node || !f->ph) continue;
    fuse_lowlevel_notify_poll(f->ph);
    fuse_pollhandle_destroy(f->ph);
    f->ph = nullptr;
    waiting_change_locked(node, -1);
  }
}

void Events::waiting_change_locked(Node* node, int delta) {
  auto& n = waiting_[node];
  const bool before = n > 0;
  n = static_cast<unsigned>(static_cast<int>(n) + delta);
  const bool after = n > 0;
  if (!after) waiting_.erase(node);
  if (before != after) node->dev->interrupt_watch(after);
}

void Events::interrupted(fuse_req_t req, void* data) {
  auto* self = static_cast<Events*>(data);
  bool found = false;
  {
    std::lock_guard g(self->lock_);
    for (auto it = self->parked_.begin(); it != self->parked_.end(); ++it)
      if (it->req == req) {
        Node* node = it->file->node.get();
        self->parked_.erase(it);
        self->waiting_change_locked(node, -1);
        found = true;
        break;
      }
  }
  if (found) fuse_reply_err(req, EINTR);
}

void Events::read(fuse_req_t req, OpenFile& f, std::size_t size, int flags) {
  if (size != sizeof(std::uint32_t)) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  // Before the read is parked, while this thread alone holds the request: once parked,
  // another thread may answer (and so free) it at any moment. Outside the lock: the callback
  // runs at once, and takes the lock, if the request was interrupted already.
  fuse_req_interrupt_func(req, &Events::interrupted, this);
  std::lock_guard g(lock_);
  if (answer_locked(req, f)) return;
  if (flags & O_NONBLOCK) {
    fuse_reply_err(req, EAGAIN);
    return;
  }
  // Interrupted before it was parked: the callback found nothing to answer.
  if (fuse_req_interrupted(req)) {
    fuse_reply_err(req, EINTR);
    return;
  }
  parked_.push_back({req, &f});
  waiting_change_locked(f.node.get(), 1);
}

void Events::write(fuse_req_t req, OpenFile& f, const char* buf, std::size_t size) {
  const auto masked = events_mask_parse(buf, size);
  if (!masked) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  f.node->dev->mask_set(f.vector(), *masked);
  fuse_reply_write(req, size);
}

void Events::poll(fuse_req_t req, OpenFile& f, fuse_pollhandle* ph) {
  unsigned revents;
  {
    std::lock_guard g(lock_);
    revents = revents_locked(f);
    if (ph) {
      const bool armed = f.ph != nullptr;
      if (f.ph) fuse_pollhandle_destroy(f.ph);
      f.ph = revents ? nullptr : ph;
      if (revents) fuse_pollhandle_destroy(ph);
      if (armed != (f.ph != nullptr)) waiting_change_locked(f.node.get(), armed ? -1 : 1);
    }
  }
  fuse_reply_poll(req, revents);
}

void Events::release(OpenFile& f) {
  std::lock_guard g(lock_);
  open_.erase(&f);
  if (f.ph) {
    fuse_pollhandle_destroy(f.ph);
    waiting_change_locked(f.node.get(), -1);
  }
  f.ph = nullptr;
  // A parked read of this file cannot outlive it (the kernel releases after the reads).
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->file == &f) {
      fuse_reply_err(it->req, EINTR);
      it = parked_.erase(it);
      waiting_change_locked(f.node.get(), -1);
    } else {
      ++it;
    }
  }
}

}  // namespace rpcie::hostd
