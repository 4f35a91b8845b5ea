#include "access_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rpcie/log.hpp"

namespace rpcie::dev {

namespace {

// An export name is at most 64 characters; the rest of a line is under 120.
constexpr std::size_t kLineMax = 256;

// Formats into `out` (at most kLineMax bytes); returns the length, newline included.
std::size_t line_write(const AccessRecord& r, char* out) noexcept {
  auto* end = fmt::format_to_n(out, kLineMax - 1, "{} {} bar={} offset=0x{:x} width={}", r.export_name,
                               r.write ? "write" : "read", r.bar, r.offset, r.width)
                  .out;
  const std::size_t room = kLineMax - 1 - static_cast<std::size_t>(end - out);
  if (r.write || r.error == 0) end = fmt::format_to_n(end, room, " value=0x{:x}", r.value).out;
  if (r.error != 0) {
    const char* name = ::strerrorname_np(r.error);
    const std::size_t left = kLineMax - 1 - static_cast<std::size_t>(end - out);
    end = name != nullptr ? fmt::format_to_n(end, left, " error={}", name).out
                          : fmt::format_to_n(end, left, " error={}", r.error).out;
  }
  *end++ = '\n';
  return static_cast<std::size_t>(end - out);
}

}  // namespace

Result<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errno, "access log " + path + ": " + std::strerror(errno));
  return std::unique_ptr<AccessLog>(new AccessLog(Fd(fd)));
}

void AccessLog::record(const AccessRecord& r) noexcept {
  char line[kLineMax];
  bytes_write(line, line_write(r, line));
}

void AccessLog::bytes_write(const char* bytes, std::size_t n) noexcept {
  ssize_t rc;
  do rc = ::write(fd_.get(), bytes, n);
  while (rc < 0 && errno == EINTR);
  if (rc != static_cast<ssize_t>(n))
    RPCIE_LOG_ONCE(LogLevel::warn, "exportd", "access log: write failed ({}); lines are missing from it",
                   rc < 0 ? std::strerror(errno) : "short write");
}

void AccessLog::Lines::record(const AccessRecord& r) noexcept {
  if (log_ == nullptr) return;
  if (sizeof buffer_ - used_ < kLineMax) flush();
  used_ += line_write(r, buffer_ + used_);
}

void AccessLog::Lines::flush() noexcept {
  if (log_ == nullptr || used_ == 0) return;
  log_->bytes_write(buffer_, used_);
  used_ = 0;
}

std::string AccessLog::line_format(const AccessRecord& r) {
  char line[kLineMax];
  return std::string(line, line_write(r, line));
}

}  // namespace rpcie::dev
