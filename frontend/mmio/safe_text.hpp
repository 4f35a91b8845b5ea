// Async-signal-safe text for librpcie-mmio.so's few messages: a fixed buffer, numbers in
// hex or decimal, one write(2) to stderr. No allocation, no stdio, errno kept.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rpcie::mmio {

class SafeLine {
 public:
  SafeLine& text(const char* s) noexcept {
    const std::size_t n = std::strlen(s);
    const std::size_t room = sizeof buffer_ - 1 - length_;  // one byte kept for the newline
    const std::size_t take = n < room ? n : room;
    std::memcpy(buffer_ + length_, s, take);
    length_ += take;
    return *this;
  }
  SafeLine& hex(std::uint64_t value) noexcept {
    char digits[19] = "0x";
    int n = 0;
    char reversed[16];
    do {
      reversed[n++] = "0123456789abcdef"[value & 0xf];
      value >>= 4;
    } while (value != 0);
    for (int i = 0; i < n; ++i) digits[2 + i] = reversed[n - 1 - i];
    digits[2 + n] = '\0';
    return text(digits);
  }
  SafeLine& dec(std::uint64_t value) noexcept {
    char reversed[21];
    int n = 0;
    do {
      reversed[n++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0);
    char digits[21];
    for (int i = 0; i < n; ++i) digits[i] = reversed[n - 1 - i];
    digits[n] = '\0';
    return text(digits);
  }
  // Writes the line and a newline to stderr (fd 2) in one write(2).
  void write_stderr() noexcept {
    const int saved = errno;
    buffer_[length_] = '\n';
    [[maybe_unused]] const ssize_t n = ::write(2, buffer_, length_ + 1);
    errno = saved;
  }
  const char* data() const noexcept { return buffer_; }
  std::size_t size() const noexcept { return length_; }

 private:
  char buffer_[512] = {};
  std::size_t length_ = 0;
};

}  // namespace rpcie::mmio
