#include "config_edit.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "rpcie/fd.hpp"

namespace rpcie::hostd {

namespace {

Result<void> write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  return {};
}

std::string trimmed(const std::string& line) {
  const auto b = line.find_first_not_of(" \t\r");
  return b == std::string::npos ? std::string() : line.substr(b);
}

bool header_line(const std::string& line) { return trimmed(line).starts_with("["); }

bool comment_or_blank(const std::string& line) {
  const auto t = trimmed(line);
  return t.empty() || t[0] == '#';
}

Result<std::string> file_read(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(errno, path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
}

}  // namespace

Result<void> file_store_atomic(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const auto failed = [&](const char* what) {
    const int code = errno;
    ::unlink(tmp.c_str());
    return fail(code, path + ": " + what + ": " + std::strerror(code));
  };
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) return fail(errno, tmp + ": " + std::strerror(errno));
  if (::fchmod(fd.get(), mode) != 0) return failed("chmod");  // the umask does not narrow it
  if (auto w = write_all(fd.get(), text); !w) {
    errno = w.error().code;
    return failed("write");
  }
  if (::fsync(fd.get()) != 0) return failed("fsync");
  if (fd.close() != 0) return failed("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return failed("rename");
  return {};
}

Result<void> config_writable(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK) != 0)
    return fail(errno, "cannot write the configuration file " + path + ": " + dir + ": " + std::strerror(errno));
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0)
    return fail(errno, "cannot write the configuration file " + path + ": " + std::strerror(errno));
  return {};
}

Result<void> config_table_append(const std::string& path, const std::string& table) {
  std::string text;
  if (::access(path.c_str(), F_OK) == 0) {
    RPCIE_TRY_ASSIGN(text, file_read(path));
  }
  if (!text.empty() && !text.ends_with("\n")) text += "\n";
  if (!text.empty()) text += "\n";
  return file_store_atomic(path, text + table, mode_of(path));
}

Result<std::string> config_text_table_remove(const std::string& text, unsigned line) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  if (line == 0 || line > lines.size() || !header_line(lines[line - 1]))
    return fail(EINVAL, "line " + std::to_string(line) + " is not a table header");
  std::size_t begin = line - 1, end = line;
  while (end < lines.size() && !header_line(lines[end])) ++end;
  if (end < lines.size())  // the next table's own comments stay with it
    while (end > begin + 1 && comment_or_blank(lines[end - 1])) --end;
  // Its own comments (just above it) go with it, and the blank line that set it apart.
  while (begin > 0 && trimmed(lines[begin - 1]).starts_with("#")) --begin;
  if (begin > 0 && trimmed(lines[begin - 1]).empty()) --begin;
  lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(begin), lines.begin() + static_cast<std::ptrdiff_t>(end));
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

Result<void> config_table_remove(const std::string& path, unsigned line) {
  RPCIE_TRY_ASSIGN(auto text, file_read(path));
  auto edited = config_text_table_remove(text, line);
  if (!edited) return fail(EINVAL, path + ": " + edited.error().message);
  return file_store_atomic(path, *edited, mode_of(path));
}

}  // namespace rpcie::hostd
