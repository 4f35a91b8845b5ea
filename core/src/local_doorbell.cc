#include "local_doorbell.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <string_view>

namespace rpcie {

// The file's contents: the futex word and how many sleep on it.
struct LocalDoorbell::Shared {
  std::uint32_t word;
  std::uint32_t sleepers;
};

namespace {

constexpr std::size_t kFileSize = 4096;

std::atomic_ref<std::uint32_t> atomic_of(std::uint32_t& v) { return std::atomic_ref<std::uint32_t>(v); }

Result<void*> map(int fd, const std::string& name) {
  void* p = ::mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(errno, "mmap of doorbell " + name);
  return p;
}

}  // namespace

std::string LocalDoorbell::name_for(std::span<const std::uint8_t> address) {
  // shm's addresses name its region: "fi_shm://PID:N:M". The doorbell goes beside it as
  // "PID:N:M.rpcie-db", so that what removes a dead process's regions (the shm adapter's
  // fabric_prepare, by the "PID:" prefix) removes its doorbells too.
  std::string_view text(reinterpret_cast<const char*>(address.data()), address.size());
  while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  constexpr std::string_view kScheme = "fi_shm://";
  if (text.starts_with(kScheme)) {
    const auto region = text.substr(kScheme.size());
    if (!region.empty() && region.size() <= 64 && region.find_first_not_of("0123456789:") == std::string_view::npos &&
        region.front() != ':')
      return "/" + std::string(region) + ".rpcie-db";
  }
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (auto b : address) h = (h ^ b) * 1099511628211ull;
  char buf[32];
  std::snprintf(buf, sizeof buf, "/rpcie-db-%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Result<LocalDoorbell> LocalDoorbell::create(std::span<const std::uint8_t> address) {
  const auto name = name_for(address);
  // A file of that name is a leftover of a process that died with this address (shm's
  // addresses hold the pid): take the name over.
  (void)::shm_unlink(name.c_str());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return fail(errno, "create doorbell " + name);
  // Whatever the umask: the peer may run as another user.
  if (::fchmod(fd, 0666) != 0 || ::ftruncate(fd, kFileSize) != 0) {
    const int e = errno;
    ::close(fd);
    (void)::shm_unlink(name.c_str());
    return fail(e, "size doorbell " + name);
  }
  auto p = map(fd, name);
  ::close(fd);
  if (!p) {
    (void)::shm_unlink(name.c_str());
    return tl::unexpected(p.error());
  }
  return LocalDoorbell(static_cast<Shared*>(*p), name, true);
}

Result<LocalDoorbell> LocalDoorbell::open(std::span<const std::uint8_t> address) {
  const auto name = name_for(address);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return fail(errno, "open doorbell " + name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kFileSize) {
    ::close(fd);
    return fail(EINVAL, "doorbell " + name + " is not one");
  }
  auto p = map(fd, name);
  ::close(fd);
  if (!p) return tl::unexpected(p.error());
  return LocalDoorbell(static_cast<Shared*>(*p), name, false);
}

LocalDoorbell::LocalDoorbell(LocalDoorbell&& other) noexcept
    : shared_(other.shared_), name_(std::move(other.name_)), owner_(other.owner_) {
  other.shared_ = nullptr;
}

LocalDoorbell::~LocalDoorbell() {
  if (!shared_) return;
  ::munmap(shared_, kFileSize);
  if (owner_) (void)::shm_unlink(name_.c_str());
}

void LocalDoorbell::ring() noexcept {
  // Pairs with the fence in sleep_announce(): the post before this is visible to a sleeper's
  // last poll, or its announcement is visible here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (atomic_of(shared_->sleepers).load(std::memory_order_relaxed) == 0) return;
  atomic_of(shared_->word).fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, &shared_->word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::uint32_t LocalDoorbell::sleep_announce() noexcept {
  atomic_of(shared_->sleepers).fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return atomic_of(shared_->word).load(std::memory_order_relaxed);
}

bool LocalDoorbell::sleep(std::uint32_t word, std::chrono::microseconds most) noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(most).count();
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  // Shared (not FUTEX_PRIVATE): the ringer is another process.
  ::syscall(SYS_futex, &shared_->word, FUTEX_WAIT, word, &ts, nullptr, 0);
  return atomic_of(shared_->word).load(std::memory_order_relaxed) != word;
}

void LocalDoorbell::sleep_end() noexcept { atomic_of(shared_->sleepers).fetch_sub(1, std::memory_order_relaxed); }

}  // namespace rpcie
