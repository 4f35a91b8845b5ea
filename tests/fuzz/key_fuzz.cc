// libFuzzer target: key files (auth::key_parse, and auth::key_load of the same bytes).
//
// Checks, beyond the sanitizers':
//  - key_parse agrees with a reference reading of the documented format: hex digits (either
//    case), whitespace (space, tab, CR, LF, VT, FF) anywhere, every digit on one line, an
//    even count, kKeyMinBytes .. kKeyMaxBytes bytes; the key's bytes are the digits' bytes;
//  - a refusal is EINVAL and never quotes the text (no run of 16 hex digits in the message);
//  - key_load of a file holding the input (a memfd, mode 0600, opened through
//    /proc/self/fd) gives the same key or the same code, and EFBIG over kKeyFileMaxBytes.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "rpcie/auth.hpp"

namespace {

using namespace rpcie;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) fuzz::die("key_fuzz", what, detail);
}

int hex_of(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

// The key the format says `text` holds, or nullopt.
std::optional<std::vector<std::uint8_t>> reference(std::string_view text) {
  std::string digits;
  int lines = 0;
  bool in_line = false;
  for (char c : text) {
    if (c == '\n') in_line = false;
    if (space(c)) continue;
    if (hex_of(c) < 0) return std::nullopt;
    if (!in_line) ++lines;
    in_line = true;
    digits.push_back(c);
  }
  if (lines != 1 || digits.size() % 2 != 0) return std::nullopt;
  const std::size_t n = digits.size() / 2;
  if (n < auth::kKeyMinBytes || n > auth::kKeyMaxBytes) return std::nullopt;
  std::vector<std::uint8_t> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<std::uint8_t>(hex_of(digits[2 * i]) * 16 + hex_of(digits[2 * i + 1]));
  return out;
}

std::size_t hex_run(std::string_view s) {
  std::size_t best = 0, run = 0;
  for (char c : s) {
    run = hex_of(c) >= 0 ? run + 1 : 0;
    if (run > best) best = run;
  }
  return best;
}

bool same(const auth::Key& k, const std::vector<std::uint8_t>& bytes) {
  auto b = k.bytes();
  return b.size() == bytes.size() && std::equal(b.begin(), b.end(), bytes.begin());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto want = reference(text);
  auto parsed = auth::key_parse(text);
  if (want) {
    check(parsed.has_value(), "key_parse refused a valid key", parsed ? "" : parsed.error().message);
    check(same(*parsed, *want), "key_parse decoded other bytes than the digits say");
  } else {
    check(!parsed.has_value(), "key_parse accepted text the format refuses");
    check(parsed.error().code == EINVAL, "key_parse refused with a code other than EINVAL", parsed.error().message);
    check(hex_run(parsed.error().message) < 16, "key_parse's error quotes the key", parsed.error().message);
  }

  // The same bytes as a key file.
  const int fd = ::memfd_create("key", MFD_CLOEXEC);
  check(fd >= 0, "memfd_create failed");
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    check(n > 0, "write to the memfd failed");
    done += static_cast<std::size_t>(n);
  }
  check(::fchmod(fd, 0600) == 0, "fchmod of the memfd failed");
  auto loaded = auth::key_load("/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
  if (size > auth::kKeyFileMaxBytes) {
    check(!loaded.has_value() && loaded.error().code == EFBIG, "key_load took a file over kKeyFileMaxBytes");
  } else if (want) {
    check(loaded.has_value(), "key_load refused a file key_parse accepts", loaded ? "" : loaded.error().message);
    check(same(*loaded, *want), "key_load gave other bytes than key_parse");
  } else {
    check(!loaded.has_value() && loaded.error().code == EINVAL, "key_load disagrees with key_parse's refusal");
    check(hex_run(loaded.error().message) < 16, "key_load's error quotes the key", loaded.error().message);
  }
  return 0;
}
