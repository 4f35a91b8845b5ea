// rpcie-bench's progress line: rounds done, the row being measured and the time left, on
// stderr (or another descriptor, --progress-fd), only when that is a terminal (redrawn in
// place; erased when the run ends). Nothing at all otherwise, so `-o json >FILE 2>LOG` and
// CI logs stay clean.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace rpcie::bench {

class Progress {
 public:
  // `rounds` in the whole run, drawn on `fd`. Shows nothing unless `fd` is a terminal.
  explicit Progress(std::size_t rounds, int fd = 2);
  ~Progress();  // erases the line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // One round of `row` is done: redraws the line.
  void round_done(const std::string& row);
  // Erases the line (before something else is printed on the terminal); the next round
  // draws it again.
  void erase();

  // "rounds 3/20, rma_write 4096, 0:12 left" (no line ending), from the counts and the
  // seconds elapsed; the time left is the mean time per round so far times the rounds left.
  static std::string line(std::size_t done, std::size_t total, const std::string& row, double elapsed_seconds);

 private:
  void draw(const std::string& text);
  int fd_;
  bool shown_;
  bool drawn_ = false;
  std::size_t done_ = 0, total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace rpcie::bench
