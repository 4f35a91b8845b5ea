#include "device_ring.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rpcie/deadline.hpp"
#include "rpcie/fd.hpp"

namespace rpcie::mmio {

namespace {

constexpr int kConnectTimeoutMs = 1000;

// Raw system calls: in the preloaded library, mmap and munmap are our own hooks.
void* ring_map(std::size_t bytes, int fd) noexcept {
  // syscall(2) is variadic: every argument passed as a full long (a bare 0 would leave the
  // offset's upper half to chance).
  return reinterpret_cast<void*>(::syscall(SYS_mmap, 0L, static_cast<long>(bytes), long{PROT_READ | PROT_WRITE},
                                           long{MAP_SHARED}, static_cast<long>(fd), 0L));
}
void ring_unmap(void* memory, std::size_t bytes) noexcept { ::syscall(SYS_munmap, memory, static_cast<long>(bytes)); }
constexpr int kTimeoutMarginMs = 1000;

// Waits for `events` on `fd`, at most the connect timeout (core's fd_wait: poll, EINTR retried).
bool fd_ready(int fd, short events) noexcept {
  return static_cast<bool>(
      fd_wait(fd, events, Deadline::after(std::chrono::milliseconds(kConnectTimeoutMs)), "talking to rpcie-hostd"));
}

int control_connect(const char* path) noexcept {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (std::strlen(path) >= sizeof address.sun_path) return -1;
  std::strcpy(address.sun_path, path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The answer line (up to '\n') and the descriptor passed with it; false on anything else.
bool answer_receive(int fd, char* line, std::size_t size, int& passed) noexcept {
  passed = -1;
  std::size_t used = 0;
  while (used + 1 < size) {
    if (!fd_ready(fd, POLLIN)) break;
    iovec iov{line + used, size - 1 - used};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n <= 0) break;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && passed < 0)
        std::memcpy(&passed, CMSG_DATA(c), sizeof passed);
    used += static_cast<std::size_t>(n);
    line[used] = '\0';
    if (std::memchr(line, '\n', used) != nullptr) return passed >= 0;
  }
  if (passed >= 0) ::close(passed);
  passed = -1;
  return false;
}

// The unsigned number after "key": in a one-line JSON object; 0 when absent.
std::uint64_t answer_number(const char* line, const char* key) noexcept {
  char quoted[64];
  std::snprintf(quoted, sizeof quoted, "\"%s\":", key);
  const char* at = std::strstr(line, quoted);
  return at == nullptr ? 0 : std::strtoull(at + std::strlen(quoted), nullptr, 10);
}

}  // namespace

bool bar_fd_bdf(int bar_fd, char* bdf, std::size_t size) noexcept {
  char link[32];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", bar_fd);
  char path[kPathMax];
  const ssize_t n = ::readlink(link, path, sizeof path - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  char* slash = std::strrchr(path, '/');  // .../<bdf>/resourceN
  if (slash == nullptr || slash == path) return false;
  *slash = '\0';
  const char* name = std::strrchr(path, '/');
  name = name == nullptr ? path : name + 1;
  if (*name == '\0' || std::strlen(name) >= size) return false;
  std::strcpy(bdf, name);
  return true;
}

const char* control_path_default() noexcept {
  const char* path = std::getenv("RPCIE_CONTROL");
  return path != nullptr && *path != '\0' ? path : "/run/rpcie.sock";
}

bool DeviceRing::open(const char* control_path, int bar_fd) noexcept {
  close();
  char bdf[64];
  if (!bar_fd_bdf(bar_fd, bdf, sizeof bdf)) return false;
  const int fd = control_connect(control_path);
  if (fd < 0) return false;
  char request[128];
  const int length = std::snprintf(request, sizeof request, "{\"op\":\"mmio_ring\",\"bdf\":\"%s\"}\n", bdf);
  char answer[512];
  int memfd = -1;
  if (length <= 0 || !fd_ready(fd, POLLOUT) ||
      ::send(fd, request, static_cast<std::size_t>(length), MSG_NOSIGNAL) != length ||
      !answer_receive(fd, answer, sizeof answer, memfd)) {
    ::close(fd);
    return false;
  }
  const std::uint64_t bytes = answer_number(answer, "ring_bytes");
  const std::uint64_t timeout = answer_number(answer, "timeout_ms");
  void* memory = bytes == 0 ? MAP_FAILED : ring_map(bytes, memfd);
  ::close(memfd);  // the mapping keeps the ring
  if (memory == MAP_FAILED || !producer_.attach(memory, bytes)) {
    if (memory != MAP_FAILED) ring_unmap(memory, bytes);
    ::close(fd);
    producer_.reset();
    return false;
  }
  store_failures_taken_.store(producer_.store_failures());
  socket_ = fd;
  memory_ = memory;
  bytes_ = bytes;
  timeout_ms_ = static_cast<int>(timeout > 600000 ? 600000 : timeout) + kTimeoutMarginMs;
  return true;
}

void DeviceRing::close() noexcept {
  if (memory_ != nullptr) ring_unmap(memory_, bytes_);
  if (socket_ >= 0) ::close(socket_);
  memory_ = nullptr;
  bytes_ = 0;
  socket_ = -1;
  producer_.reset();
  store_failures_taken_.store(0);
}

std::uint64_t DeviceRing::store_failures_take() noexcept {
  const std::uint64_t now = producer_.store_failures();  // only grows while the ring is open
  std::uint64_t taken = store_failures_taken_.load();
  while (now > taken)
    if (store_failures_taken_.compare_exchange_weak(taken, now)) return now - taken;
  return 0;  // nothing new, or a racing take handed it out already
}

DeviceRing* DeviceRingPool::acquire(const DeviceKey& device, const char* control_path, int bar_fd) noexcept {
  Slot* free_slot = nullptr;
  for (Slot& s : slots_) {
    if (s.users > 0 && s.device == device) {
      ++s.users;
      return &s.ring;
    }
    if (s.users == 0 && free_slot == nullptr) free_slot = &s;
  }
  if (free_slot == nullptr || !free_slot->ring.open(control_path, bar_fd)) return nullptr;
  free_slot->device = device;
  free_slot->users = 1;
  return &free_slot->ring;
}

void DeviceRingPool::release(DeviceRing* ring) noexcept {
  for (Slot& s : slots_)
    if (&s.ring == ring && s.users > 0 && --s.users == 0) s.ring.close();
}

}  // namespace rpcie::mmio
