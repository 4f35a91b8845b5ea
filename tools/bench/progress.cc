#include "progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace rpcie::bench {

Progress::Progress(std::size_t rounds, int fd)
    : fd_(fd), shown_(isatty(fd) == 1), total_(rounds), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { erase(); }

void Progress::erase() {
  if (!drawn_) return;
  draw("");
  drawn_ = false;
}

void Progress::draw(const std::string& text) {
  const std::string line = "\r\033[K" + text;                      // to the line's start, erase it, write
  const ssize_t written = ::write(fd_, line.data(), line.size());  // a lost frame is redrawn next round
  (void)written;
}

void Progress::round_done(const std::string& row) {
  ++done_;
  if (!shown_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fflush(stderr);  // whatever else went to the terminal first
  draw(line(done_, total_, row, elapsed));
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
