#include "local_doorbell.hpp"

#include "rpcie/fd.hpp"
#include "rpcie/protocol.hpp"

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
  char buf[32];
  std::snprintf(buf, sizeof buf, "/rpcie-db-%016llx", static_cast<unsigned long long>(proto::checksum_fnv1a(address)));
  return buf;
}

Result<LocalDoorbell> LocalDoorbell::create(std::span<const std::uint8_t> address) {
  auto name = name_for(address);
  // A file of that name is a leftover of a process that died with this address (shm's
  // addresses hold the pid): take the name over.
  (void)::shm_unlink(name.c_str());
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (!fd) return fail(errno, "create doorbell " + name);
  // Whatever the umask: the peer may run as another user.
  Result<Mapping> mapped = fail(EINVAL, "not sized");
  if (::fchmod(fd.get(), 0666) != 0 || ::ftruncate(fd.get(), kFileSize) != 0)
    mapped = fail(errno, "size");
  else
    mapped = Mapping::shared(fd.get(), kFileSize);
  if (!mapped) {
    (void)::shm_unlink(name.c_str());
    return fail(mapped.error().code, "doorbell " + name + ": " + mapped.error().message);
  }
  return LocalDoorbell(std::move(*mapped), std::move(name), true);
}

Result<LocalDoorbell> LocalDoorbell::open(std::span<const std::uint8_t> address) {
  auto name = name_for(address);
  Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd) return fail(errno, "open doorbell " + name);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) < kFileSize)
    return fail(EINVAL, "doorbell " + name + " is not one");
  auto mapped = Mapping::shared(fd.get(), kFileSize);
  if (!mapped) return fail(mapped.error().code, "doorbell " + name + ": " + mapped.error().message);
  return LocalDoorbell(std::move(*mapped), std::move(name), false);
}

LocalDoorbell::~LocalDoorbell() {
  if (owner_ && mapping_) (void)::shm_unlink(name_.c_str());
}

LocalDoorbell::Shared& LocalDoorbell::shared() const noexcept { return *reinterpret_cast<Shared*>(mapping_.data()); }

void LocalDoorbell::ring() noexcept {
  // Pairs with the fence in sleep_announce(): the post before this is visible to a sleeper's
  // last poll, or its announcement is visible here.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (atomic_of(shared().sleepers).load(std::memory_order_relaxed) == 0) return;
  atomic_of(shared().word).fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, &shared().word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::uint32_t LocalDoorbell::sleep_announce() noexcept {
  atomic_of(shared().sleepers).fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return atomic_of(shared().word).load(std::memory_order_relaxed);
}

bool LocalDoorbell::sleep(std::uint32_t word, std::chrono::microseconds most) noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(most).count();
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  // Shared (not FUTEX_PRIVATE): the ringer is another process.
  ::syscall(SYS_futex, &shared().word, FUTEX_WAIT, word, &ts, nullptr, 0);
  return atomic_of(shared().word).load(std::memory_order_relaxed) != word;
}

void LocalDoorbell::sleep_end() noexcept { atomic_of(shared().sleepers).fetch_sub(1, std::memory_order_relaxed); }

}  // namespace rpcie
