#include "sysfs_files.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

namespace rpcie::dev::sysfs {

Result<Fd> file_open(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return fail(errno, "open " + path);
  return Fd(fd);
}

Result<std::string> text_read(const std::string& path) {
  auto fd = file_open(path, O_RDONLY);
  if (!fd) return tl::unexpected(fd.error());
  constexpr std::size_t kLimit = 64 * 1024;
  std::string text;
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd->get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, "read " + path);
    if (n == 0) return text;
    text.append(chunk, static_cast<std::size_t>(n));
    if (text.size() > kLimit) return fail(EIO, path + " is larger than a sysfs attribute can be");
  }
}

std::optional<std::uint64_t> hex_parse(std::string_view text, std::uint64_t max) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (text.size() < 3 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) return std::nullopt;
  text.remove_prefix(2);
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (ec != std::errc() || end != text.data() + text.size() || value > max) return std::nullopt;
  return value;
}

std::string driver_bound(const std::string& dir) {
  char target[PATH_MAX];
  const ssize_t n = ::readlink((dir + "/driver").c_str(), target, sizeof target - 1);
  if (n < 0 && errno == ENOENT) return {};
  if (n < 0) return std::string("unknown (") + std::strerror(errno) + ")";
  std::string_view link(target, static_cast<std::size_t>(n));
  while (!link.empty() && link.back() == '/') link.remove_suffix(1);
  const auto slash = link.rfind('/');
  if (slash != std::string_view::npos) link.remove_prefix(slash + 1);
  // Never report "no driver" for a link that exists, whatever its target looks like.
  return link.empty() ? std::string("unknown") : std::string(link);
}

}  // namespace rpcie::dev::sysfs
