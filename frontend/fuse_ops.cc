// The FUSE operation table: each operation finds its inode or open file and hands the request
// to the part that answers it (inode attributes, sysfs text, events, device I/O).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "device_io.hpp"
#include "open_file.hpp"
#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"
#include "rpcie/sanitizer.hpp"
#include "sysfs_text.hpp"
#include "tree_impl.hpp"

namespace rpcie::hostd {

namespace {

constexpr std::size_t kEventsWriteMax = 64;
// The largest request, 1 MiB: libfuse's largest buffer, and the largest a read or write of a
// memory BAR may carry; libfuse adds a page for headers.
constexpr unsigned kRequestMax = 1u << 20;
constexpr unsigned kRequestHeaders = 4096;

TreeImpl& impl_of(fuse_req_t req) { return *static_cast<TreeImpl*>(fuse_req_userdata(req)); }
OpenFile& file_of(const fuse_file_info* fi) { return *reinterpret_cast<OpenFile*>(fi->fh); }

// libfuse splices a request into a pipe only if the pipe grows to hold the largest one
// (max_write and a page of headers; the kernel rounds it up to 2 MiB), which beyond
// fs.pipe-max-size needs CAP_SYS_RESOURCE; otherwise it reads the request into memory.
bool pipe_holds_request() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return false;
  const bool grown = ::fcntl(p[0], F_SETPIPE_SZ, kRequestMax + kRequestHeaders) >= 0;
  ::close(p[0]);
  ::close(p[1]);
  return grown;
}

void op_init(void* userdata, fuse_conn_info* conn) {
  const auto& t = *static_cast<const TreeImpl*>(userdata);
  // Large requests for memory BARs (1 MiB is libfuse's largest buffer); write-through,
  // never the writeback cache: a write must reach the device before it is reported done.
  conn->max_write = kRequestMax;
  conn->max_readahead = kRequestMax;
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_WRITEBACK_CACHE);
  conn->want |= FUSE_CAP_ASYNC_READ;
  // A write's pages come as references in a pipe, read once into the staging buffer.
  // libfuse asks for splicing by default once write_buf is set: it is this option's alone.
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_SPLICE_READ);
  if (!t.opt.splice_writes) {
    RPCIE_LOG_INFO("hostd", "memory-BAR writes are copied (--splice-writes off)");
  } else if ((conn->capable & FUSE_CAP_SPLICE_READ) && pipe_holds_request()) {
    // ThreadSanitizer orders a reply before the requests it leads to (a flush before its
    // file's release) through the write and the read on /dev/fuse; a request spliced into a
    // pipe hides that read from it, and it reports races that the kernel's ordering rules out.
    if (kThreadSanitizer) {
      RPCIE_LOG_INFO("hostd", "memory-BAR writes are copied: a ThreadSanitizer build does not splice");
    } else {
      conn->want |= FUSE_CAP_SPLICE_READ;
      RPCIE_LOG_INFO("hostd", "memory-BAR writes are spliced");
    }
  } else {
    RPCIE_LOG_INFO("hostd",
                   "memory-BAR writes are copied: a pipe cannot hold a FUSE request (fs.pipe-max-size below 2097152 "
                   "and no CAP_SYS_RESOURCE; rpcie-hostd(8), TUNING)");
  }
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto& t = impl_of(req);
  const std::string n = name;
  if (parent == kInoRoot && n == "pci") return t.entry_reply(req, kInoPci);
  if (parent == kInoPci && n == "devices") return t.entry_reply(req, kInoDevices);
  if (parent == kInoDevices) {
    auto node = t.nodes.find_named(n);
    if (!node || node->bdf != n) return (void)fuse_reply_err(req, ENOENT);
    return t.entry_reply(req, node->ino());
  }
  if (ino_file(parent) == kDir && !ino_fixed(parent)) {
    if (auto node = t.nodes.find(parent))
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
  auto node = impl_of(req).nodes.find(ino);
  if (!node || ino_file(ino) != kDma) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_readlink(req, node->dev->window_path().c_str());
}

// The entries of directory `ino` with their parent's; false if `ino` is no directory.
bool dir_entries(TreeImpl& t, fuse_ino_t ino, std::vector<std::pair<std::string, fuse_ino_t>>& entries) {
  entries = {{".", ino}, {"..", kInoRoot}};
  if (ino == kInoRoot) {
    entries.emplace_back("pci", kInoPci);
  } else if (ino == kInoPci) {
    entries.emplace_back("devices", kInoDevices);
  } else if (ino == kInoDevices) {
    entries[1].second = kInoPci;
    for (const auto& n : t.nodes.list()) entries.emplace_back(n->bdf, n->ino());
  } else if (auto node = t.nodes.find(ino); node && ino_file(ino) == kDir) {
    entries[1].second = kInoDevices;
    for (const auto& [name, id] : node->files()) entries.emplace_back(name, node->ino(id));
  } else {
    return false;
  }
  return true;
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  std::vector<std::pair<std::string, fuse_ino_t>> entries;
  if (!dir_entries(impl_of(req), ino, entries)) return (void)fuse_reply_err(req, ENOTDIR);
  std::vector<char> buf(size);
  std::size_t used = 0;
  for (std::size_t i = static_cast<std::size_t>(off); i < entries.size(); ++i) {
    struct stat st {};
    const fuse_ino_t e = entries[i].second;
    st.st_ino = e;
    st.st_mode = ino_fixed(e) || ino_file(e) == kDir ? S_IFDIR : ino_file(e) == kDma ? S_IFLNK : S_IFREG;
    const std::size_t need = fuse_add_direntry(req, buf.data() + used, size - used, entries[i].first.c_str(), &st,
                                               static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto& t = impl_of(req);
  auto node = t.nodes.find(ino);
  const unsigned id = ino_file(ino);
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
  f->generation = node->dev->generation();
  const auto* bar = node->bar(id);
  const bool cached = bar && bar->kind == pci::BarKind::memory;
  fi->direct_io = cached ? 0 : 1;  // page cache and mmap only for memory BARs
  fi->keep_cache = 0;              // a fresh open sees what the device holds now
  fi->nonseekable = id >= kEvents ? 1 : 0;
  if (id >= kEvents) t.events.open(*f);
  fi->fh = reinterpret_cast<std::uint64_t>(f.release());
  if (fuse_reply_open(req, fi) != 0) {
    // The opener is gone (interrupted): the kernel will not release this file.
    auto* lost = reinterpret_cast<OpenFile*>(fi->fh);
    if (lost->id >= kEvents) t.events.release(*lost);
    delete lost;
  }
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto* f = &file_of(fi);
  if (f->id >= kEvents) impl_of(req).events.release(*f);
  delete f;
  fuse_reply_err(req, 0);
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto& t = impl_of(req);
  auto& f = file_of(fi);
  if (f.id >= kEvents) return t.events.read(req, f, size, fi->flags);
  if (f.id == kConfig || f.node->bar(f.id)) return device_read(t.watchdog, req, f, size, off);
  const std::string text = sysfs_text(*f.node, f.id);
  if (off < 0 || static_cast<std::size_t>(off) >= text.size()) return (void)fuse_reply_buf(req, nullptr, 0);
  fuse_reply_buf(req, text.data() + off, std::min(size, text.size() - static_cast<std::size_t>(off)));
}

// A write's bytes are in memory, or in a pipe where splicing is on (FUSE_CAP_SPLICE_READ);
// libfuse discards what a handler leaves unread of the pipe.
void op_write_buf(fuse_req_t req, fuse_ino_t, fuse_bufvec* src, off_t off, fuse_file_info* fi) {
  auto& t = impl_of(req);
  auto& f = file_of(fi);
  if (f.id == kConfig || f.node->bar(f.id)) return device_write(t.watchdog, req, f, *src, off);
  if (f.id < kEvents) return (void)fuse_reply_err(req, EACCES);
  // An events write is 4 bytes; anything much longer is refused as the parser would.
  const std::size_t size = fuse_buf_size(src);
  if (size > kEventsWriteMax) return (void)fuse_reply_err(req, EINVAL);
  std::vector<char> copy;
  const char* bytes = write_bytes(*src, size, copy);
  if (!bytes) return (void)fuse_reply_err(req, EIO);
  t.events.write(req, f, bytes, size);
}

// close (flush) of a file opened for writing, and fsync: earlier writes are performed.
void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  device_flush(impl_of(req).watchdog, req, file_of(fi), false);
}
void op_fsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) {
  device_flush(impl_of(req).watchdog, req, file_of(fi), true);
}

// Files other than events are always ready, as the kernel answers for files without poll.
void op_poll(fuse_req_t req, fuse_ino_t, fuse_file_info* fi, fuse_pollhandle* ph) {
  auto& f = file_of(fi);
  if (f.id >= kEvents) return impl_of(req).events.poll(req, f, ph);
  if (ph) fuse_pollhandle_destroy(ph);
  fuse_reply_poll(req, POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM);
}

}  // namespace

const fuse_lowlevel_ops& fuse_ops_table() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = op_init;
    o.lookup = op_lookup;
    o.getattr = op_getattr;
    o.setattr = op_setattr;
    o.readlink = op_readlink;
    o.readdir = op_readdir;
    o.open = op_open;
    o.release = op_release;
    o.read = op_read;
    o.write_buf = op_write_buf;
    o.flush = op_flush;
    o.fsync = op_fsync;
    o.poll = op_poll;
    return o;
  }();
  return ops;
}

}  // namespace rpcie::hostd
