// rpcie-exportd's access log (`--access-log FILE`, config key `access-log`): one line per
// MMIO access the exporter performs on a device, in the order it performs them — the
// device's own view of widths, offsets, values and order, for tests and for debugging a
// driver. docs/rpcie-exportd.md documents the format:
//
//   <export> <read|write> bar=<n> offset=0x<hex> width=<w> value=0x<hex>
//
// `value` is the value read or written (hex, lower case, no leading zeros). An access the
// device refused ends in ` error=<ERRNO NAME>` (e.g. `error=EINVAL`); a refused read has no
// value, a refused write keeps the value it tried to write.
//
// Contract:
//  - open(): the file is created (0644) if missing and appended to (O_APPEND); an error
//    (ENOENT for a missing directory, EACCES, EISDIR...) names the path.
//  - record(): one write(2) per line, so a reader tailing the file while exportd runs never
//    sees half a line, and lines from several attachments do not interleave. The line is
//    formatted on the stack: no allocation. A failed write(2) (disk full) is logged once and
//    the access itself goes on. Thread-safe.
//  - AccessLog::Lines: the lines of one batch of accesses (a batch of posted writes) gathered
//    and written with one write(2) of whole lines when it is full or flushed (at the latest
//    when it goes): a write(2) per access cost a burst of 1000 posted writes 0.5 ms. Lines
//    keep the order they were recorded in; one thread owns a Lines.
//  - Ordering is the caller's: the exporter records an access after performing it, under
//    the export's call lock, so the file's order is the device's order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rpcie/fd.hpp"
#include "rpcie/result.hpp"

namespace rpcie::dev {

struct AccessRecord {
  std::string_view export_name;
  bool write = false;
  std::uint8_t bar = 0;
  std::uint64_t offset = 0;
  unsigned width = 0;
  std::uint64_t value = 0;  // read: meaningful only when error == 0
  int error = 0;            // errno of a refused access, 0 when performed
};

class AccessLog {
 public:
  static Result<std::unique_ptr<AccessLog>> open(const std::string& path);

  void record(const AccessRecord& r) noexcept;

  // The line record() writes, newline included (exposed for tests).
  static std::string line_format(const AccessRecord& r);

  class Lines {
   public:
    explicit Lines(AccessLog* log) noexcept : log_(log) {}  // null: records nothing
    ~Lines() { flush(); }
    Lines(const Lines&) = delete;
    Lines& operator=(const Lines&) = delete;
    void record(const AccessRecord& r) noexcept;
    void flush() noexcept;

   private:
    AccessLog* log_;
    std::size_t used_ = 0;
    char buffer_[16384];
  };

 private:
  explicit AccessLog(Fd fd) noexcept : fd_(std::move(fd)) {}
  void bytes_write(const char* bytes, std::size_t n) noexcept;
  Fd fd_;
};

}  // namespace rpcie::dev
