#include "tree.hpp"

#include <fuse_lowlevel.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"
#include "rpcie/process.hpp"

namespace rpcie::hostd {

namespace {

// Inode numbers: 1 the mount, 2 pci/, 3 pci/devices/; a device directory is serial << 8
// and its files serial << 8 | id (serials are never reused, so neither are inodes).
constexpr fuse_ino_t kInoRoot = 1, kInoPci = 2, kInoDevices = 3;
enum FileId : unsigned {
  kDir = 0,
  kVendor,
  kDevice,
  kClass,
  kRevision,
  kSubsysVendor,
  kSubsysDevice,
  kIrq,
  kResource,
  kConfig,
  kBar0 = 10,  // .. kBar0 + 5
  kDma = 16,
  kRemote = 17,
  kEvents = 64,  // + vector, up to 64 vectors
};
constexpr double kAttrTimeout = 1.0;  // seconds; detach tells the kernel at once anyway

struct TextFile {
  const char* name;
  FileId id;
};
constexpr TextFile kTextFiles[] = {
    {"vendor", kVendor},
    {"device", kDevice},
    {"class", kClass},
    {"revision", kRevision},
    {"subsystem_vendor", kSubsysVendor},
    {"subsystem_device", kSubsysDevice},
    {"irq", kIrq},
    {"resource", kResource},
    {"remote", kRemote},
};

std::string hex_line(unsigned value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*x\n", digits, value);
  return buf;
}

// Errors the tree reports: what the device or the arguments refuse passes through; every
// way of losing the exporter is EIO (a FUSE caller cannot act on ETIMEDOUT vs ENOTCONN).
int errno_of(const Error& e) {
  const int code = e.to_errno();
  switch (code) {
    case EINVAL:
    case EPERM:
    case EACCES:
    case ENOTSUP:
    case EFBIG:
    case ENODEV:
    case EINTR:
      return code;
    default:
      return EIO;
  }
}

}  // namespace

struct Node {
  std::shared_ptr<RemoteDevice> dev;
  std::uint64_t serial = 0;
  std::string name, bdf;
  std::vector<std::string> links;  // created in dev_dir, removed on withdraw
  bool gone = false;               // withdrawn (under Impl::events_lock): events files answer ENODEV
  fuse_ino_t ino(unsigned id = kDir) const { return (serial << 8) | id; }
  const client::BarDesc* bar(unsigned id) const {
    return id >= kBar0 && id < kBar0 + 6 ? dev->desc().bar_find(static_cast<std::uint8_t>(id - kBar0)) : nullptr;
  }
  std::uint16_t event_files() const { return std::max<std::uint16_t>(1, std::min<std::uint16_t>(dev->vectors(), 64)); }
  // The files of the directory, in listing order.
  std::vector<std::pair<std::string, unsigned>> files() const {
    std::vector<std::pair<std::string, unsigned>> out;
    for (const auto& t : kTextFiles) out.emplace_back(t.name, t.id);
    out.emplace_back("config", kConfig);
    for (const auto& b : dev->desc().bars)
      if (b.bar < 6) out.emplace_back("resource" + std::to_string(b.bar), kBar0 + b.bar);
    out.emplace_back("dma", kDma);
    for (std::uint16_t v = 0; v < event_files(); ++v)
      out.emplace_back(v == 0 ? std::string("events") : "events" + std::to_string(v), kEvents + v);
    return out;
  }
  // Without building files(): this runs on every getattr and open.
  bool has(unsigned id) const {
    if (id <= kConfig || id == kDma || id == kRemote) return true;  // directory, text files, config
    if (id >= kEvents) return id - kEvents < event_files();
    return bar(id) != nullptr;
  }
};

struct OpenFile {
  std::shared_ptr<Node> node;
  unsigned id = 0;
  bool writable = false;  // opened for writing: close waits for the writes to be performed
  // events files, under Impl::events_lock:
  std::uint64_t seen = 0;    // the count this file last reported
  std::uint64_t losses = 0;  // link losses this file has reported
  fuse_pollhandle* ph = nullptr;
  std::uint16_t vector() const { return static_cast<std::uint16_t>(id - kEvents); }
};

struct Tree::Impl {
  TreeOptions opt;
  fuse_session* se = nullptr;
  bool mounted = false;

  mutable std::mutex lock;  // nodes, indices
  std::map<std::uint64_t, std::shared_ptr<Node>> nodes;
  std::set<unsigned> indices;
  std::uint64_t next_serial = 1;

  // Parked `events` reads and open `events` files (for poll handles).
  std::mutex events_lock;
  struct Parked {
    fuse_req_t req;
    OpenFile* file;
  };
  std::list<Parked> parked;
  std::set<OpenFile*> events_open;

  // Requests that wait on the fabric, for the watchdog. Whoever removes an entry answers it.
  std::mutex pending_lock;
  std::condition_variable pending_changed;
  struct Pending {
    fuse_req_t req;
    Deadline::Clock::time_point since;
  };
  std::map<std::uint64_t, Pending> pending;
  std::uint64_t next_pending = 1;
  bool watchdog_stop = false;
  std::thread watchdog;

  // ---- nodes ----------------------------------------------------------------------------
  std::shared_ptr<Node> node_of(fuse_ino_t ino) const {
    std::lock_guard g(lock);
    auto it = nodes.find(ino >> 8);
    return it == nodes.end() ? nullptr : it->second;
  }
  std::shared_ptr<Node> node_named(const std::string& bdf_or_name) const {
    std::lock_guard g(lock);
    for (const auto& [s, n] : nodes)
      if (n->bdf == bdf_or_name || n->name == bdf_or_name) return n;
    return nullptr;
  }
  std::string sysfs_path(const Node& n) const { return opt.mount + "/pci/devices/" + n.bdf; }

  // ---- the watchdog ---------------------------------------------------------------------
  std::uint64_t track(fuse_req_t req) {
    std::lock_guard g(pending_lock);
    const auto id = next_pending++;
    pending.emplace(id, Pending{req, Deadline::Clock::now()});
    return id;
  }
  // True when the caller still owns the reply (the watchdog has not answered it).
  bool untrack(std::uint64_t id) {
    std::lock_guard g(pending_lock);
    return pending.erase(id) == 1;
  }
  void watchdog_run() {
    std::unique_lock g(pending_lock);
    while (!watchdog_stop) {
      pending_changed.wait_for(g, std::chrono::milliseconds(100));
      const auto limit = Deadline::Clock::now() - opt.timeout;
      std::vector<fuse_req_t> late;
      for (auto it = pending.begin(); it != pending.end();) {
        if (it->second.since <= limit) {
          late.push_back(it->second.req);
          it = pending.erase(it);
        } else {
          ++it;
        }
      }
      g.unlock();
      for (auto req : late) {
        RPCIE_LOG_WARN("hostd", "request older than the timeout ({} ms): answered EIO", opt.timeout.count());
        fuse_reply_err(req, EIO);
      }
      g.lock();
    }
  }
  Deadline op_deadline() const { return Deadline::after(opt.timeout * 9 / 10); }

  // ---- attributes -----------------------------------------------------------------------
  bool attr_fill(fuse_ino_t ino, struct stat* st) const {
    std::memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_uid = 0;
    st->st_gid = opt.group;
    st->st_nlink = 1;
    if (ino == kInoRoot || ino == kInoPci || ino == kInoDevices) {
      st->st_mode = S_IFDIR | 0755;
      st->st_nlink = 2;
      return true;
    }
    auto n = node_of(ino);
    const unsigned id = ino & 0xff;
    if (!n || !n->has(id)) return false;
    const mode_t dev_mode = opt.mode & 0666;
    if (id == kDir) {
      st->st_mode = S_IFDIR | 0755;
      st->st_nlink = 2;
    } else if (id == kConfig) {
      st->st_mode = S_IFREG | dev_mode;
      st->st_size = n->dev->config_size();
    } else if (const auto* b = n->bar(id)) {
      st->st_mode = S_IFREG | (b->readonly ? (dev_mode & 0444) : dev_mode);
      st->st_size = static_cast<off_t>(b->size);
    } else if (id == kDma) {
      st->st_mode = S_IFLNK | 0777;
      st->st_size = static_cast<off_t>(n->dev->window_path().size());
    } else if (id >= kEvents) {
      st->st_mode = S_IFREG | dev_mode;
    } else {
      st->st_mode = S_IFREG | 0444;  // sysfs attributes: a page, read-only
      st->st_size = 4096;
    }
    return true;
  }
  void entry_reply(fuse_req_t req, fuse_ino_t ino) const {
    fuse_entry_param e{};
    if (!attr_fill(ino, &e.attr)) {
      fuse_reply_err(req, ENOENT);
      return;
    }
    e.ino = ino;
    e.attr_timeout = kAttrTimeout;
    e.entry_timeout = kAttrTimeout;
    fuse_reply_entry(req, &e);
  }

  // ---- text files -----------------------------------------------------------------------
  std::string text_of(const Node& n, unsigned id) const {
    const auto& d = n.dev->desc();
    switch (id) {
      case kVendor:
        return hex_line(d.vendor, 4);
      case kDevice:
        return hex_line(d.device, 4);
      case kClass:
        return hex_line(d.class_code, 6);
      case kRevision:
        return hex_line(d.revision, 2);
      case kSubsysVendor:
        return hex_line(d.subsystem_vendor, 4);
      case kSubsysDevice:
        return hex_line(d.subsystem_device, 4);
      case kIrq:
        return "0\n";
      case kResource: {
        // As the kernel writes it: start, end, flags per region (BAR0-5, ROM).
        std::string out;
        for (std::uint8_t i = 0; i < 7; ++i) {
          std::uint64_t start = 0, end = 0, flags = 0;
          if (const auto* b = i < 6 ? d.bar_find(i) : nullptr) {
            start = n.dev->bar_address(i);
            end = start + b->size - 1;
            if (b->kind == pci::BarKind::io) {
              flags = 0x100;  // IORESOURCE_IO
            } else {
              flags = 0x200;                                           // IORESOURCE_MEM
              if (b->kind == pci::BarKind::memory) flags |= 0x2000;  // IORESOURCE_PREFETCH
              if (b->is_64bit) flags |= 0x100000;                      // IORESOURCE_MEM_64
            }
            if (b->readonly) flags |= 0x4000;  // IORESOURCE_READONLY
          }
          char line[64];
          std::snprintf(line, sizeof line, "0x%016llx 0x%016llx 0x%016llx\n", static_cast<unsigned long long>(start),
                        static_cast<unsigned long long>(end), static_cast<unsigned long long>(flags));
          out += line;
        }
        return out;
      }
      case kRemote: {
        const auto s = n.dev->status();
        const auto& p = n.dev->params();
        std::string out = "exporter " + p.host + ":" + std::to_string(p.port) + "\nexport " + p.export_name +
                          "\nprovider " + (s.provider.empty() ? "-" : s.provider) + "\nstate " +
                          link_state_name(s.state) + "\ngeneration " + std::to_string(s.generation) + "\n";
        if (!s.last_error.empty() && s.state != LinkState::connected) out += "error " + s.last_error + "\n";
        return out;
      }
    }
    return {};
  }

  // ---- events -----------------------------------------------------------------------------
  // Under events_lock. Answers a read of `f` if it has news; false if it must wait.
  bool events_answer_locked(fuse_req_t req, OpenFile& f) {
    if (f.node->gone) {
      fuse_reply_err(req, ENODEV);
      return true;
    }
    auto& dev = *f.node->dev;
    const auto losses = dev.losses();
    if (losses != f.losses) {
      // The loss is reported once; counting goes on from where the device is now.
      f.losses = losses;
      f.seen = dev.interrupts(f.vector());
      fuse_reply_err(req, EIO);
      return true;
    }
    const auto count = dev.interrupts(f.vector());
    if (count == f.seen) return false;
    f.seen = count;
    const auto value = static_cast<std::uint32_t>(count);
    fuse_reply_buf(req, reinterpret_cast<const char*>(&value), sizeof value);
    return true;
  }
  unsigned events_revents_locked(const OpenFile& f) const {
    if (f.node->gone) return POLLERR | POLLHUP;
    auto& dev = *f.node->dev;
    if (dev.losses() != f.losses) return POLLERR;
    return dev.interrupts(f.vector()) != f.seen ? (POLLIN | POLLRDNORM) : 0;
  }
  // A device's interrupt count or link changed (or it is going away: `gone`).
  void events_changed(Node* node, bool gone) {
    std::lock_guard g(events_lock);
    // A withdrawn device stays so for files still open on it: their reads and polls end
    // with ENODEV / POLLERR rather than wait for counts that will never move again.
    if (gone) node->gone = true;
    for (auto it = parked.begin(); it != parked.end();) {
      if (it->file->node.get() != node) {
        ++it;
        continue;
      }
      if (!events_answer_locked(it->req, *it->file)) {
        ++it;
        continue;
      }
      it = parked.erase(it);
    }
    for (auto* f : events_open) {
      if (f->node.get() != node || !f->ph) continue;
      fuse_lowlevel_notify_poll(f->ph);
      fuse_pollhandle_destroy(f->ph);
      f->ph = nullptr;
    }
  }
  static void events_interrupted(fuse_req_t req, void* data) {
    auto* self = static_cast<Impl*>(data);
    bool found = false;
    {
      std::lock_guard g(self->events_lock);
      for (auto it = self->parked.begin(); it != self->parked.end(); ++it)
        if (it->req == req) {
          self->parked.erase(it);
          found = true;
          break;
        }
    }
    if (found) fuse_reply_err(req, EINTR);
  }
  void events_read(fuse_req_t req, OpenFile& f, std::size_t size, int flags) {
    if (size != 4) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    {
      std::lock_guard g(events_lock);
      if (events_answer_locked(req, f)) return;
      if (flags & O_NONBLOCK) {
        fuse_reply_err(req, EAGAIN);
        return;
      }
      parked.push_back({req, &f});
    }
    // Outside the lock: the callback runs at once if the request was interrupted already.
    fuse_req_interrupt_func(req, &Impl::events_interrupted, this);
  }
  void events_write(fuse_req_t req, OpenFile& f, const char* buf, std::size_t size) {
    std::uint32_t v = 0;
    if (size != 4) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    std::memcpy(&v, buf, 4);
    if (v > 1) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    f.node->dev->mask_set(f.vector(), v == 0);
    fuse_reply_write(req, 4);
  }
  void events_release(OpenFile& f) {
    std::lock_guard g(events_lock);
    events_open.erase(&f);
    if (f.ph) fuse_pollhandle_destroy(f.ph);
    f.ph = nullptr;
    // A parked read of this file cannot outlive it (the kernel releases after the reads).
    for (auto it = parked.begin(); it != parked.end();) {
      if (it->file == &f) {
        fuse_reply_err(it->req, EINTR);
        it = parked.erase(it);
      } else {
        ++it;
      }
    }
  }

  // ---- fabric operations ----------------------------------------------------------------
  // A request that goes to the device: tracked for the watchdog from the start, answered
  // at most once (by whoever untracks it), with the attachment current at its start and a
  // deadline a little under the timeout.
  class DeviceRequest {
   public:
    // Holds the node (and so its device) itself: once the watchdog has answered, the
    // application may close the file and free `f` while this request is still in the fabric.
    DeviceRequest(Impl& t, fuse_req_t req, const OpenFile& f)
        : t_(t), req_(req), node_(f.node), ticket_(t.track(req)), deadline_(t.op_deadline()) {}
    // The attachment, or false after answering the error (reconnecting, detached).
    bool link() {
      auto l = node_->dev->link();
      if (!l) return fail(errno_of(l.error())), false;
      link_ = std::move(*l);
      return true;
    }
    client::Attachment& a() { return *link_; }
    Deadline deadline() const { return deadline_; }
    void fail(int e) {
      if (t_.untrack(ticket_)) fuse_reply_err(req_, e);
    }
    // A fabric operation failed; a deadline that passed gives the link up (later requests
    // fail at once instead of each waiting out its own deadline).
    void fail(const Error& e) {
      if (e.to_errno() == ETIMEDOUT) node_->dev->link_abandon(link_, e);
      fail(errno_of(e));
    }
    void data(const void* p, std::size_t n) {
      if (t_.untrack(ticket_)) fuse_reply_buf(req_, static_cast<const char*>(p), n);
    }
    void written(std::size_t n) {
      if (t_.untrack(ticket_)) fuse_reply_write(req_, n);
    }
    void ok() {
      if (t_.untrack(ticket_)) fuse_reply_err(req_, 0);
    }

   private:
    Impl& t_;
    fuse_req_t req_;
    std::shared_ptr<Node> node_;
    std::uint64_t ticket_;
    Deadline deadline_;
    std::shared_ptr<client::Attachment> link_;
  };

  // A register BAR access is exactly one naturally aligned 1/2/4/8-byte access inside it.
  static bool register_access_valid(const client::BarDesc& b, std::size_t size, off_t off) {
    return size <= pci::kBarWidthMax &&
           pci::access_valid(static_cast<std::uint64_t>(off), static_cast<unsigned>(size), b.size);
  }
  // Bytes of [off, off+size) inside a file of `limit` bytes (off < limit).
  static std::size_t clip(std::size_t size, off_t off, std::uint64_t limit) {
    return static_cast<std::size_t>(std::min<std::uint64_t>(size, limit - static_cast<std::uint64_t>(off)));
  }

  void do_read(fuse_req_t req, OpenFile& f, std::size_t size, off_t off) {
    DeviceRequest r(*this, req, f);
    const auto* b = f.node->bar(f.id);
    const std::uint64_t limit = f.id == kConfig ? f.node->dev->config_size() : b ? b->size : 0;
    if (!b && f.id != kConfig) return r.fail(EBADF);
    if (static_cast<std::uint64_t>(off) >= limit) return r.data(nullptr, 0);  // end of file
    const bool registers = b && b->kind != pci::BarKind::memory;
    if (registers && !register_access_valid(*b, size, off)) return r.fail(EINVAL);
    if (!r.link()) return;
    if (f.id == kConfig) {
      size = clip(size, off, limit);
      std::vector<char> buf(size);
      auto done =
          pci::access_split(static_cast<std::uint64_t>(off), size, pci::kConfigWidthMax,
                            [&](std::uint64_t o, unsigned w) -> Result<void> {
                              auto v = r.a().config_read(static_cast<std::uint16_t>(o), w, r.deadline());
                              if (!v) return tl::unexpected(v.error());
                              std::memcpy(buf.data() + (o - off), &*v, w);  // little-endian, like the kernel's file
                              return {};
                            });
      return done ? r.data(buf.data(), buf.size()) : r.fail(done.error());
    }
    if (registers) {
      auto v = r.a().mmio_read(b->bar, static_cast<std::uint64_t>(off), static_cast<unsigned>(size), r.deadline());
      if (!v) return r.fail(v.error());
      const std::uint64_t value = *v;
      return r.data(&value, size);
    }
    // A memory BAR: the reply goes out straight from the attachment's staging buffer (a
    // request is at most 1 MiB: one piece).
    size = clip(size, off, limit);
    bool answered = false;
    auto done = r.a().bar_read_visit(
        b->bar, static_cast<std::uint64_t>(off), size,
        [&](std::uint64_t, std::span<const std::uint8_t> piece) {
          if (piece.size() == size) r.data(piece.data(), piece.size()), answered = true;
        },
        r.deadline());
    if (!done) return r.fail(done.error());
    if (!answered) r.fail(EIO);  // more than one piece: cannot happen with 1 MiB requests
  }

  void do_write(fuse_req_t req, OpenFile& f, const char* data, std::size_t size, off_t off) {
    DeviceRequest r(*this, req, f);
    const auto* b = f.node->bar(f.id);
    const std::uint64_t limit = f.id == kConfig ? f.node->dev->config_size() : b ? b->size : 0;
    if (!b && f.id != kConfig) return r.fail(EBADF);
    if (static_cast<std::uint64_t>(off) >= limit) return r.fail(EFBIG);  // as sysfs
    const bool registers = b && b->kind != pci::BarKind::memory;
    if (registers && !register_access_valid(*b, size, off)) return r.fail(EINVAL);
    if (!r.link()) return;
    if (f.id == kConfig) {
      size = clip(size, off, limit);
      auto done = pci::access_split(static_cast<std::uint64_t>(off), size, pci::kConfigWidthMax,
                                    [&](std::uint64_t o, unsigned w) -> Result<void> {
                                      std::uint32_t v = 0;
                                      std::memcpy(&v, data + (o - off), w);
                                      return r.a().config_write(static_cast<std::uint16_t>(o), w, v, r.deadline());
                                    });
      return done ? r.written(size) : r.fail(done.error());
    }
    if (registers) {
      std::uint64_t v = 0;
      std::memcpy(&v, data, size);
      auto done =
          r.a().mmio_write(b->bar, static_cast<std::uint64_t>(off), static_cast<unsigned>(size), v, r.deadline());
      return done ? r.written(size) : r.fail(done.error());
    }
    size = clip(size, off, limit);
    auto done =
        r.a().bar_write(b->bar, static_cast<std::uint64_t>(off),
                        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(data), size), r.deadline());
    return done ? r.written(size) : r.fail(done.error());
  }

  // fsync / flush (close): every earlier write has reached the device, or its error.
  void do_flush(fuse_req_t req, OpenFile& f, bool sync) {
    if ((f.id != kConfig && !f.node->bar(f.id)) || (!sync && !f.writable)) {
      fuse_reply_err(req, 0);
      return;
    }
    DeviceRequest r(*this, req, f);
    if (!r.link()) return;
    auto done = r.a().flush(r.deadline());
    return done ? r.ok() : r.fail(done.error());
  }
};

namespace {

Tree::Impl& impl_of(fuse_req_t req) { return *static_cast<Tree::Impl*>(fuse_req_userdata(req)); }
OpenFile& file_of(const fuse_file_info* fi) { return *reinterpret_cast<OpenFile*>(fi->fh); }

void op_init(void* userdata, fuse_conn_info* conn) {
  (void)userdata;
  // Large requests for memory BARs (1 MiB is libfuse's largest buffer); write-through,
  // never the writeback cache: a write must reach the device before it is reported done.
  conn->max_write = 1u << 20;
  conn->max_readahead = 1u << 20;
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_WRITEBACK_CACHE);
  conn->want |= FUSE_CAP_ASYNC_READ;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto& t = impl_of(req);
  const std::string n = name;
  if (parent == kInoRoot && n == "pci") return t.entry_reply(req, kInoPci);
  if (parent == kInoPci && n == "devices") return t.entry_reply(req, kInoDevices);
  if (parent == kInoDevices) {
    auto node = t.node_named(n);
    if (!node || node->bdf != n) return (void)fuse_reply_err(req, ENOENT);
    return t.entry_reply(req, node->ino());
  }
  if ((parent & 0xff) == kDir && parent > kInoDevices) {
    if (auto node = t.node_of(parent))
      for (const auto& [fname, id] : node->files())
        if (fname == n) return t.entry_reply(req, node->ino(id));
  }
  fuse_reply_err(req, ENOENT);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  if (!impl_of(req).attr_fill(ino, &st)) return (void)fuse_reply_err(req, ENOENT);
  fuse_reply_attr(req, &st, kAttrTimeout);
}

// Sizes are the device's; truncation (dd without conv=notrunc, O_TRUNC) is accepted and
// changes nothing, as on sysfs. Owner and mode cannot change.
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat*, int to_set, fuse_file_info*) {
  if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) return (void)fuse_reply_err(req, EPERM);
  struct stat st;
  if (!impl_of(req).attr_fill(ino, &st)) return (void)fuse_reply_err(req, ENOENT);
  fuse_reply_attr(req, &st, kAttrTimeout);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  auto node = impl_of(req).node_of(ino);
  if (!node || (ino & 0xff) != kDma) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_readlink(req, node->dev->window_path().c_str());
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  auto& t = impl_of(req);
  std::vector<std::pair<std::string, fuse_ino_t>> entries{{".", ino}, {"..", kInoRoot}};
  if (ino == kInoRoot) {
    entries.emplace_back("pci", kInoPci);
  } else if (ino == kInoPci) {
    entries[1].second = kInoRoot;
    entries.emplace_back("devices", kInoDevices);
  } else if (ino == kInoDevices) {
    entries[1].second = kInoPci;
    std::lock_guard g(t.lock);
    for (const auto& [s, n] : t.nodes) entries.emplace_back(n->bdf, n->ino());
  } else if (auto node = t.node_of(ino); node && (ino & 0xff) == kDir) {
    entries[1].second = kInoDevices;
    for (const auto& [name, id] : node->files()) entries.emplace_back(name, node->ino(id));
  } else {
    return (void)fuse_reply_err(req, ENOTDIR);
  }
  std::vector<char> buf(size);
  std::size_t used = 0;
  for (std::size_t i = static_cast<std::size_t>(off); i < entries.size(); ++i) {
    struct stat st {};
    st.st_ino = entries[i].second;
    const fuse_ino_t e = entries[i].second;
    const unsigned id = e & 0xff;
    st.st_mode = e <= kInoDevices || id == kDir ? S_IFDIR : id == kDma ? S_IFLNK : S_IFREG;
    const std::size_t need = fuse_add_direntry(req, buf.data() + used, size - used, entries[i].first.c_str(), &st,
                                               static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto& t = impl_of(req);
  auto node = t.node_of(ino);
  const unsigned id = ino & 0xff;
  if (!node || !node->has(id)) return (void)fuse_reply_err(req, ENOENT);
  if (id == kDir) return (void)fuse_reply_err(req, EISDIR);
  struct stat st;
  t.attr_fill(ino, &st);
  const bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
  // As sysfs: a file without write permission cannot be opened for writing, not even by root.
  if (writing && (st.st_mode & 0222) == 0) return (void)fuse_reply_err(req, EACCES);
  auto f = std::make_unique<OpenFile>();
  f->node = node;
  f->id = id;
  f->writable = writing;
  const auto* bar = node->bar(id);
  const bool cached = bar && bar->kind == pci::BarKind::memory;
  fi->direct_io = cached ? 0 : 1;  // page cache and mmap only for memory BARs
  fi->keep_cache = 0;              // a fresh open sees what the device holds now
  fi->nonseekable = id >= kEvents ? 1 : 0;
  if (id >= kEvents) {
    std::lock_guard g(t.events_lock);
    f->seen = node->dev->interrupts(f->vector());  // counts from its open
    f->losses = node->dev->losses();
    t.events_open.insert(f.get());
  }
  fi->fh = reinterpret_cast<std::uint64_t>(f.release());
  if (fuse_reply_open(req, fi) != 0) {
    // The opener is gone (interrupted): the kernel will not release this file.
    auto* lost = reinterpret_cast<OpenFile*>(fi->fh);
    if (lost->id >= kEvents) t.events_release(*lost);
    delete lost;
  }
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto* f = &file_of(fi);
  if (f->id >= kEvents) impl_of(req).events_release(*f);
  delete f;
  fuse_reply_err(req, 0);
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto& t = impl_of(req);
  auto& f = file_of(fi);
  if (f.id >= kEvents) return t.events_read(req, f, size, fi->flags);
  if (f.id == kConfig || f.node->bar(f.id)) return t.do_read(req, f, size, off);
  const std::string text = t.text_of(*f.node, f.id);
  if (off < 0 || static_cast<std::size_t>(off) >= text.size()) return (void)fuse_reply_buf(req, nullptr, 0);
  fuse_reply_buf(req, text.data() + off, std::min(size, text.size() - static_cast<std::size_t>(off)));
}

void op_write(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  auto& t = impl_of(req);
  auto& f = file_of(fi);
  if (f.id >= kEvents) return t.events_write(req, f, buf, size);
  if (f.id == kConfig || f.node->bar(f.id)) return t.do_write(req, f, buf, size, off);
  fuse_reply_err(req, EACCES);
}

// close (flush) of a file opened for writing, and fsync: earlier writes are performed.
void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { impl_of(req).do_flush(req, file_of(fi), false); }
void op_fsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) { impl_of(req).do_flush(req, file_of(fi), true); }

void op_poll(fuse_req_t req, fuse_ino_t, fuse_file_info* fi, fuse_pollhandle* ph) {
  auto& t = impl_of(req);
  auto& f = file_of(fi);
  if (f.id < kEvents) {
    if (ph) fuse_pollhandle_destroy(ph);
    return (void)fuse_reply_poll(req, POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM);
  }
  unsigned revents;
  {
    std::lock_guard g(t.events_lock);
    revents = t.events_revents_locked(f);
    if (ph) {
      if (f.ph) fuse_pollhandle_destroy(f.ph);
      f.ph = revents ? nullptr : ph;
      if (revents) fuse_pollhandle_destroy(ph);
    }
  }
  fuse_reply_poll(req, revents);
}

const fuse_lowlevel_ops kOps = [] {
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.getattr = op_getattr;
  ops.setattr = op_setattr;
  ops.readlink = op_readlink;
  ops.readdir = op_readdir;
  ops.open = op_open;
  ops.release = op_release;
  ops.read = op_read;
  ops.write = op_write;
  ops.flush = op_flush;
  ops.fsync = op_fsync;
  ops.poll = op_poll;
  return ops;
}();

// The topmost mount at `path` in /proc/self/mountinfo: its device ("0:N", the name of its
// bdi) and file system type ("fuse.rpcie" for ours). Empty fields when nothing is mounted.
struct MountInfo {
  std::string dev, fstype;
};
MountInfo mountinfo_find(const std::string& path) {
  MountInfo found;
  FILE* f = std::fopen("/proc/self/mountinfo", "r");
  if (!f) return found;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    char id[64], where[3072], fstype[64];
    const char* sep = std::strstr(line, " - ");
    if (sep && std::sscanf(line, "%*d %*d %63s %*s %3071s", id, where) == 2 && path == where &&
        std::sscanf(sep + 3, "%63s", fstype) == 1)
      found = {id, fstype};  // later lines are mounted on top of earlier ones
  }
  std::fclose(f);
  return found;
}

// Mounts of an earlier hostd at `path` (possibly stacked): a dead daemon's mount fails
// statfs (ENOTCONN, ECONNABORTED) and is detached; a live one is EBUSY. statfs, not stat:
// the kernel answers stat of the root from cached attributes without asking the daemon.
Result<void> mounts_stale_remove(const std::string& path) {
  for (int i = 0; i < 16 && mountinfo_find(path).fstype == "fuse.rpcie"; ++i) {
    struct statfs sf;
    if (::statfs(path.c_str(), &sf) == 0) return fail(EBUSY, path + " is served by a running rpcie-hostd");
    RPCIE_LOG_WARN("hostd", "{}: a stale mount of an earlier hostd ({}); detaching it", path, std::strerror(errno));
    if (::umount2(path.c_str(), MNT_DETACH) != 0) return fail(errno, "unmount stale " + path);
  }
  return {};
}

// Links to `<mount>/...` that an earlier hostd left in dev_dir.
void links_stale_remove(const TreeOptions& o) {
  auto remove_if_ours = [&](const std::string& path) {
    char target[4096];
    ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n <= 0) return;
    target[n] = 0;
    if (std::string(target).rfind(o.mount + "/", 0) == 0) ::unlink(path.c_str());
  };
  for (unsigned i = 0; i < 256; ++i) remove_if_ours(o.dev_dir + "/rpcie" + std::to_string(i));
  const std::string by = o.dev_dir + "/rpcie/by-export";
  if (auto* hosts = ::opendir(by.c_str())) {
    while (auto* h = ::readdir(hosts)) {
      if (h->d_name[0] == '.') continue;
      const std::string hd = by + "/" + h->d_name;
      if (auto* exports = ::opendir(hd.c_str())) {
        while (auto* e = ::readdir(exports))
          if (e->d_name[0] != '.') remove_if_ours(hd + "/" + e->d_name);
        ::closedir(exports);
      }
      ::rmdir(hd.c_str());
    }
    ::closedir(hosts);
  }
}

// The kernel reads a FUSE file ahead in at most read_ahead_kb of the mount's bdi (128 KiB
// by default): with a round trip to the exporter per request, a 1 MiB pread of a memory
// BAR would be eight. Raised to the 1 MiB a request can carry. The bdi is named after the
// mount's device number, found in mountinfo (a stat of the mount would wait for ourselves).
void readahead_raise(const std::string& mount) {
  const auto dev = mountinfo_find(mount).dev;
  if (dev.empty()) return;
  const std::string path = "/sys/class/bdi/" + dev + "/read_ahead_kb";
  if (FILE* ra = std::fopen(path.c_str(), "w")) {
    std::fputs("1024", ra);
    std::fclose(ra);
  }
}

Result<void> mkdir_p(const std::string& path, mode_t mode) {
  std::string at;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    at = path.substr(0, pos);
    if (at.empty()) continue;
    if (::mkdir(at.c_str(), mode) != 0 && errno != EEXIST) return fail(errno, "mkdir " + at);
  }
  return {};
}

}  // namespace

Tree::Tree(const TreeOptions& options) : impl_(std::make_unique<Impl>()) { impl_->opt = options; }

Result<std::unique_ptr<Tree>> Tree::mount(const TreeOptions& options) {
  std::unique_ptr<Tree> t(new Tree(options));
  auto& m = *t->impl_;
  if (auto r = mounts_stale_remove(options.mount); !r) return tl::unexpected(r.error());
  if (auto r = mkdir_p(options.mount, 0755); !r) return tl::unexpected(r.error());
  links_stale_remove(options);
  const std::string fs_opts = "-oallow_other,default_permissions,fsname=rpcie,subtype=rpcie";
  const char* argv[] = {"rpcie-hostd", fs_opts.c_str(), nullptr};
  fuse_args args = FUSE_ARGS_INIT(2, const_cast<char**>(argv));
  m.se = fuse_session_new(&args, &kOps, sizeof kOps, &m);
  fuse_opt_free_args(&args);  // the session copied what it needs (and may have added to args)
  if (!m.se) return fail(EIO, "FUSE session could not be created (see the message above)");
  if (fuse_session_mount(m.se, options.mount.c_str()) != 0)
    return fail(EIO, "mount FUSE at " + options.mount + " (is /dev/fuse there, are we root?)");
  m.mounted = true;
  readahead_raise(options.mount);
  m.watchdog = std::thread([&m] { m.watchdog_run(); });
  return t;
}

int Tree::run() {
  auto& m = *impl_;
  // A library loaded with libfabric installs handlers that exit at once (measured: exit
  // status 1, mount left behind); libfuse installs its own only over the default.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
  if (fuse_set_signal_handlers(m.se) != 0) return -EIO;
  // Only this thread and the FUSE workers (created by the loop, inheriting this mask) take
  // the stop signals: libfuse's handler ends the loop only if the signal interrupts one of
  // them. Delivered to any other thread of ours, the loop would go on until the next request.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, 64);
  fuse_loop_cfg_set_idle_threads(cfg, 8);
  const int rc = fuse_session_loop_mt(m.se, cfg);
  fuse_loop_cfg_destroy(cfg);
  fuse_remove_signal_handlers(m.se);
  return rc < 0 ? rc : 0;
}

unsigned Tree::index_reserve() {
  std::lock_guard g(impl_->lock);
  unsigned i = 0;
  while (impl_->indices.count(i)) ++i;
  impl_->indices.insert(i);
  return i;
}

void Tree::index_release(unsigned index) {
  std::lock_guard g(impl_->lock);
  impl_->indices.erase(index);
}

Result<Tree::Published> Tree::publish(std::shared_ptr<RemoteDevice> device) {
  auto& m = *impl_;
  auto node = std::make_shared<Node>();
  node->dev = std::move(device);
  node->name = "rpcie" + std::to_string(node->dev->index());
  char bdf[32];
  std::snprintf(bdf, sizeof bdf, "%05x:00:00.0", 0x10000 + node->dev->index());
  node->bdf = bdf;
  Published p{node->name, impl_->opt.dev_dir + "/" + node->name, m.sysfs_path(*node)};
  // Links: /dev/rpcieN and /dev/rpcie/by-export/<host>[:port]/<export>.
  const auto& prm = node->dev->params();
  const std::string host_dir = impl_->opt.dev_dir + "/rpcie/by-export/" + prm.host +
                               (prm.port == kDefaultPort ? "" : ":" + std::to_string(prm.port));
  if (auto r = mkdir_p(host_dir, 0755); !r) return tl::unexpected(r.error());
  for (const auto& link : {p.path, host_dir + "/" + prm.export_name}) {
    ::unlink(link.c_str());  // a leftover of ours (the name is free in this hostd)
    if (::symlink(p.sysfs.c_str(), link.c_str()) != 0) {
      const int e = errno;
      for (const auto& made : node->links) ::unlink(made.c_str());
      return fail(e, "symlink " + link);
    }
    node->links.push_back(link);
  }
  {
    std::lock_guard g(m.lock);
    node->serial = m.next_serial++;
    m.nodes.emplace(node->serial, node);
  }
  // Interrupts and link changes reach the events files; a new attachment makes what the
  // page cache holds of memory BARs stale.
  node->dev->listen([&m, raw = node.get()](DeviceChange c) {
    m.events_changed(raw, false);
    if (c == DeviceChange::reconnected)
      for (const auto& b : raw->dev->desc().bars)
        if (b.kind == pci::BarKind::memory && b.bar < 6)
          fuse_lowlevel_notify_inval_inode(m.se, raw->ino(kBar0 + b.bar), 0, 0);
  });
  RPCIE_LOG_INFO("hostd", "{}: {} on {}:{} at {}", node->name, prm.export_name, prm.host, prm.port, p.sysfs);
  return p;
}

Result<void> Tree::withdraw(const std::string& name, Deadline deadline) {
  auto& m = *impl_;
  std::shared_ptr<Node> node;
  {
    std::lock_guard g(m.lock);
    for (auto it = m.nodes.begin(); it != m.nodes.end(); ++it)
      if (it->second->name == name) {
        node = it->second;
        m.nodes.erase(it);
        break;
      }
  }
  if (!node) return fail(ENOENT, "no device " + name);
  node->dev->listen(nullptr);
  for (const auto& link : node->links) ::unlink(link.c_str());
  const std::string host_dir = node->links.size() > 1 ? node->links[1].substr(0, node->links[1].rfind('/')) : "";
  if (!host_dir.empty()) ::rmdir(host_dir.c_str());  // only when empty
  // The kernel forgets the directory and its entries now (no stale cached lookups).
  for (const auto& [fname, id] : node->files())
    (void)fuse_lowlevel_notify_inval_entry(m.se, node->ino(), fname.c_str(), fname.size());
  (void)fuse_lowlevel_notify_delete(m.se, kInoDevices, node->ino(), node->bdf.c_str(), node->bdf.size());
  m.events_changed(node.get(), true);
  auto r = node->dev->detach(deadline);
  index_release(node->dev->index());
  RPCIE_LOG_INFO("hostd", "{}: detached{}", name, r ? "" : " (" + r.error().describe() + ")");
  return r;
}

std::vector<std::string> Tree::names() const {
  std::lock_guard g(impl_->lock);
  std::vector<std::string> out;
  for (const auto& [s, n] : impl_->nodes) out.push_back(n->name);
  return out;
}

std::vector<Tree::DeviceView> Tree::devices() const {
  std::lock_guard g(impl_->lock);
  std::vector<DeviceView> out;
  for (const auto& [s, n] : impl_->nodes)
    out.push_back({n->name, impl_->opt.dev_dir + "/" + n->name, impl_->sysfs_path(*n), n->dev});
  return out;
}

Tree::~Tree() {
  auto& m = *impl_;
  // Every device stops reconnecting first, so that the detaches below do not wait out one
  // reconnect attempt after another (an exporter going down with us).
  for (const auto& d : devices()) d.device->stop_request();
  for (const auto& name : names()) (void)withdraw(name, Deadline::after(std::chrono::seconds(1)));
  {
    std::lock_guard g(m.pending_lock);
    m.watchdog_stop = true;
    m.pending_changed.notify_all();
  }
  if (m.watchdog.joinable()) m.watchdog.join();
  if (m.se) {
    if (m.mounted) fuse_session_unmount(m.se);
    fuse_session_destroy(m.se);
  }
}

}  // namespace rpcie::hostd
