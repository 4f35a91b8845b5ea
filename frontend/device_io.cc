#include "device_io.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <thread>
#include <vector>

#include "rpcie/client.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/log.hpp"
#include "rpcie/pci.hpp"

namespace rpcie::hostd {

namespace {

// The test hook that reaches the watchdog (docs/rpcie-hostd.md, ENVIRONMENT): with
// RPCIE_HOSTD_TEST_STALL=FILE, while FILE exists and holds a number of milliseconds (at most
// 60000), each device request waits that long once it is tracked, ignoring its deadline, as a
// provider call stuck in the kernel would. Only the watchdog can answer such a request in time.
void test_stall() {
  static const char* const file = std::getenv("RPCIE_HOSTD_TEST_STALL");
  if (file == nullptr) return;
  std::ifstream in(file);
  unsigned ms = 0;
  if (!(in >> ms)) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 60000u)));
}

LogLimiter& request_failure_log() {
  static LogLimiter limiter;
  return limiter;
}

// A request that goes to the device: tracked for the watchdog from the start, answered at most
// once (by whoever untracks it), with the attachment current at its start and a deadline a
// little under the timeout.
class DeviceRequest {
 public:
  // Holds the node (and so its device) itself: once the watchdog has answered, the
  // application may close the file and free `f` while this request is still in the fabric.
  // So nothing of `f` is read after this is made (the watchdog may answer at any time after,
  // if this thread stalls for the timeout: seen under ThreadSanitizer).
  DeviceRequest(Watchdog& w, fuse_req_t req, const OpenFile& f)
      : w_(w), req_(req), node_(f.node), generation_(f.generation), ticket_(w.track(req)), deadline_(w.op_deadline()) {}
  // The attachment, or false after answering the error (reconnecting, reset since the file
  // was opened, detached).
  bool link() {
    test_stall();
    auto l = node_->dev->link(generation_);
    if (!l) return fail(errno_of(l.error())), false;
    link_ = std::move(*l);
    return true;
  }
  client::Attachment& a() { return *link_; }
  Deadline deadline() const { return deadline_; }
  void fail(int e) {
    if (w_.untrack(ticket_)) fuse_reply_err(req_, e);
  }
  // A fabric operation failed. A deadline that passed (ETIMEDOUT: a stalled exporter) fails
  // this request alone: the attachment stays, a late reply to it is dropped by the
  // attachment's reply router, and only lost heartbeats end the link (issue 13 point 3).
  // Logged when it becomes EIO: the application sees only the errno, and an operator
  // needs to know which device failed and why (as the kernel logs a completion timeout).
  void fail(const Error& e) {
    const int code = errno_of(e);
    if (code == EIO)
      RPCIE_LOG_LIMITED(request_failure_log(), LogLevel::warn, "hostd", "{}: a request failed (EIO): {}", node_->name,
                        e.describe());
    fail(code);
  }
  void data(const void* p, std::size_t n) {
    if (w_.untrack(ticket_)) fuse_reply_buf(req_, static_cast<const char*>(p), n);
  }
  void written(std::size_t n) {
    if (w_.untrack(ticket_)) fuse_reply_write(req_, n);
  }
  void ok() {
    if (w_.untrack(ticket_)) fuse_reply_err(req_, 0);
  }

 private:
  Watchdog& w_;
  fuse_req_t req_;
  std::shared_ptr<Node> node_;
  std::uint64_t generation_;
  std::uint64_t ticket_;
  Deadline deadline_;
  std::shared_ptr<client::Attachment> link_;
};

// A register BAR access is exactly one naturally aligned 1/2/4/8-byte access inside it.
bool register_access_valid(const client::BarDesc& b, std::size_t size, off_t off) {
  return size <= pci::kBarWidthMax &&
         pci::access_valid(static_cast<std::uint64_t>(off), static_cast<unsigned>(size), b.size);
}

// Bytes of [off, off+size) inside a file of `limit` bytes (off < limit).
std::size_t clip(std::size_t size, off_t off, std::uint64_t limit) {
  return static_cast<std::size_t>(std::min<std::uint64_t>(size, limit - static_cast<std::uint64_t>(off)));
}

// What a device file reaches: config space (no BAR) or a BAR, `limit` bytes long.
struct Region {
  bool exists = false;  // false: the file is no device file
  const client::BarDesc* bar = nullptr;
  std::uint64_t limit = 0;
  bool registers = false;  // a register or I/O BAR: one exact access at a time
};

Region region_of(const OpenFile& f) {
  Region g;
  g.bar = f.node->bar(f.id);
  g.exists = g.bar || f.id == kConfig;
  g.limit = g.bar ? g.bar->size : g.exists ? f.node->dev->config_size() : 0;
  g.registers = g.bar && g.bar->kind != pci::BarKind::memory;
  return g;
}

void config_read(DeviceRequest& r, std::size_t size, off_t off) {
  std::vector<char> buf(size);
  auto done = pci::access_split(
      static_cast<std::uint64_t>(off), size, pci::kConfigWidthMax, [&](std::uint64_t o, unsigned w) -> Result<void> {
        RPCIE_TRY_ASSIGN(auto v, r.a().config_read(static_cast<std::uint16_t>(o), w, r.deadline()));
        std::memcpy(buf.data() + (o - off), &v, w);  // little-endian, like the kernel's file
        return {};
      });
  return done ? r.data(buf.data(), buf.size()) : r.fail(done.error());
}

void config_write(DeviceRequest& r, const char* data, std::size_t size, off_t off) {
  auto done = pci::access_split(static_cast<std::uint64_t>(off), size, pci::kConfigWidthMax,
                                [&](std::uint64_t o, unsigned w) -> Result<void> {
                                  std::uint32_t v = 0;
                                  std::memcpy(&v, data + (o - off), w);
                                  return r.a().config_write(static_cast<std::uint16_t>(o), w, v, r.deadline());
                                });
  return done ? r.written(size) : r.fail(done.error());
}

// The reply goes out straight from the attachment's staging buffer (a request is at most
// 1 MiB: one piece).
void memory_read(DeviceRequest& r, const client::BarDesc& b, std::size_t size, off_t off) {
  bool answered = false;
  auto done = r.a().bar_read_visit(
      b.bar, static_cast<std::uint64_t>(off), size,
      [&](std::uint64_t, std::span<const std::uint8_t> piece) {
        if (piece.size() == size) r.data(piece.data(), piece.size()), answered = true;
      },
      r.deadline());
  if (!done) return r.fail(done.error());
  if (!answered) r.fail(EIO);  // more than one piece: cannot happen with 1 MiB requests
}

}  // namespace

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

void device_read(Watchdog& watchdog, fuse_req_t req, const OpenFile& f, std::size_t size, off_t off) {
  const Region g = region_of(f);  // before tracking: see DeviceRequest
  DeviceRequest r(watchdog, req, f);
  if (!g.exists) return r.fail(EBADF);
  if (static_cast<std::uint64_t>(off) >= g.limit) return r.data(nullptr, 0);  // end of file
  if (g.registers && !register_access_valid(*g.bar, size, off)) return r.fail(EINVAL);
  if (!r.link()) return;
  if (!g.bar) return config_read(r, clip(size, off, g.limit), off);
  if (!g.registers) return memory_read(r, *g.bar, clip(size, off, g.limit), off);
  auto v = r.a().mmio_read(g.bar->bar, static_cast<std::uint64_t>(off), static_cast<unsigned>(size), r.deadline());
  if (!v) return r.fail(v.error());
  const std::uint64_t value = *v;
  r.data(&value, size);
}

namespace {

// FUSE_BUFVEC_INIT without its C compound literal: one buffer of `size` bytes at `mem`.
fuse_bufvec memory_bufvec(void* mem, std::size_t size) {
  fuse_bufvec v{};
  v.count = 1;
  v.buf[0].size = size;
  v.buf[0].mem = mem;
  v.buf[0].fd = -1;
  return v;
}

}  // namespace

const char* write_bytes(fuse_bufvec& src, std::size_t size, std::vector<char>& copy) {
  if (src.count == 1 && !(src.buf[0].flags & FUSE_BUF_IS_FD)) return static_cast<const char*>(src.buf[0].mem) + src.off;
  copy.resize(size);
  fuse_bufvec dst = memory_bufvec(copy.data(), size);
  return fuse_buf_copy(&dst, &src, FUSE_BUF_NO_SPLICE) == static_cast<ssize_t>(size) ? copy.data() : nullptr;
}

namespace {

// A memory BAR's write: each piece of the staging buffer filled from `src` (out of the pipe
// when spliced), then sent.
Result<void> memory_write(DeviceRequest& r, const client::BarDesc& b, fuse_bufvec& src, std::size_t size, off_t off) {
  return r.a().bar_write_fill(
      b.bar, static_cast<std::uint64_t>(off), size,
      [&src](std::uint64_t, std::span<std::uint8_t> piece) -> Result<void> {
        fuse_bufvec dst = memory_bufvec(piece.data(), piece.size());
        const ssize_t got = fuse_buf_copy(&dst, &src, FUSE_BUF_NO_SPLICE);
        if (got < 0) return fail(static_cast<int>(-got), "reading the write's data from FUSE");
        if (static_cast<std::size_t>(got) != piece.size()) return fail(EIO, "the write's data ended early");
        return {};
      },
      r.deadline());
}

}  // namespace

void device_write(Watchdog& watchdog, fuse_req_t req, const OpenFile& f, fuse_bufvec& src, off_t off) {
  const Region g = region_of(f);  // before tracking: see DeviceRequest
  DeviceRequest r(watchdog, req, f);
  std::size_t size = fuse_buf_size(&src);
  if (!g.exists) return r.fail(EBADF);
  if (static_cast<std::uint64_t>(off) >= g.limit) return r.fail(EFBIG);  // as sysfs
  if (g.registers && !register_access_valid(*g.bar, size, off)) return r.fail(EINVAL);
  if (!r.link()) return;
  size = clip(size, off, g.limit);
  if (g.bar && !g.registers) {
    auto done = memory_write(r, *g.bar, src, size, off);
    return done ? r.written(size) : r.fail(done.error());
  }
  std::vector<char> copy;
  const char* data = write_bytes(src, size, copy);
  if (!data) return r.fail(EIO);
  if (!g.bar) return config_write(r, data, size, off);
  std::uint64_t v = 0;
  std::memcpy(&v, data, size);
  auto done =
      r.a().mmio_write(g.bar->bar, static_cast<std::uint64_t>(off), static_cast<unsigned>(size), v, r.deadline());
  return done ? r.written(size) : r.fail(done.error());
}

void device_flush(Watchdog& watchdog, fuse_req_t req, const OpenFile& f, bool sync) {
  if (!region_of(f).exists) return (void)fuse_reply_err(req, 0);
  const bool writable = f.writable;  // before tracking: see DeviceRequest
  DeviceRequest r(watchdog, req, f);
  if (!r.link()) return;  // a reset device: even a read-only file's close says so
  if (!sync && !writable) return r.ok();
  auto done = r.a().flush(r.deadline());
  return done ? r.ok() : r.fail(done.error());
}

}  // namespace rpcie::hostd
