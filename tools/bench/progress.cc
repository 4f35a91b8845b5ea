#include "progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace rpcie::bench {

Progress::Progress(std::size_t rounds, bool force)
    : shown_(force || isatty(STDERR_FILENO) == 1), total_(rounds), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { erase(); }

void Progress::erase() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

void Progress::round_done(const std::string& row) {
  ++done_;
  if (!shown_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r\033[K%s", line(done_, total_, row, elapsed).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

std::string Progress::line(std::size_t done, std::size_t total, const std::string& row, double elapsed_seconds) {
  const std::size_t left_rounds = total > done ? total - done : 0;
  const double left = done ? elapsed_seconds / static_cast<double>(done) * static_cast<double>(left_rounds) : 0;
  const long seconds = std::lround(left);
  char text[256];
  std::snprintf(text, sizeof text, "rpcie-bench: rounds %zu/%zu, %s, %ld:%02ld left", done, total, row.c_str(),
                seconds / 60, seconds % 60);
  return text;
}

}  // namespace rpcie::bench
