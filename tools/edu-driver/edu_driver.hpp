// The edu sample driver's core: the test steps, written against the device's files as an
// abstract Device so that they run unchanged over rpcie-hostd's directory (PosixDevice) and,
// in unit tests, over an in-process model of the device.
//
// Deliberately plain C++20 and libc: this is the example a driver author copies, and it
// must run against any directory that has the files (it links nothing of rpcie).
//
// Thread-safety: none; one driver run uses one Device from one thread.
// Errors: every Device operation returns an Error (errno value 0 on success) naming what
// it did, e.g. "pread resource0 at 0x8"; a step that fails on one stops there.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rpcie/edu_registers.hpp"

namespace rpcie::edu_driver {

// edu's identity and BAR0 register map.
using namespace ::rpcie::edu;

// The ID register is 0xMMmm00ed: major, minor, then 0x00ed. The driver accepts any minor
// of major 1 (a minor release keeps the register map) but nothing else.
inline constexpr std::uint32_t kIdExpected = kIdValue;
inline constexpr bool id_compatible(std::uint32_t id) noexcept { return (id & 0xffff) == 0x00ed && (id >> 24) == 0x01; }

// The DMA step's IOVAs: offset == IOVA in the dma file. Neither is 0, so that a daemon
// that got the offset wrong fails the comparison instead of passing by luck.
inline constexpr std::uint64_t kDmaSrcIova = 0x1000;
inline constexpr std::uint64_t kDmaDstIova = 0x2000;
inline constexpr std::size_t kDmaWindowMin = kDmaDstIova + kDmaBufferSize;

struct Error {
  int code = 0;      // errno value; 0: no error
  std::string what;  // the operation, e.g. "pread resource0 at 0x8"
  explicit operator bool() const noexcept { return code != 0; }
};

// The files of one device directory, as a driver uses them.
class Device {
 public:
  virtual ~Device() = default;
  // A sysfs text attribute ("vendor", "device", ...), whole, e.g. "0x1234\n".
  virtual Error attr_read(std::string_view name, std::string& text) = 0;
  // Config space bytes [offset, offset + into.size()).
  virtual Error config_read(std::uint32_t offset, std::span<std::uint8_t> into) = 0;
  // One BAR0 access of exactly `width` bytes (4 or 8 here).
  virtual Error bar_read(std::uint64_t offset, unsigned width, std::uint64_t& value) = 0;
  virtual Error bar_write(std::uint64_t offset, unsigned width, std::uint64_t value) = 0;
  // The DMA window, mapped shared: byte i is IOVA i. Mapped on first use, then the same
  // span every time; valid as long as the Device.
  virtual Error dma_map(std::span<std::uint8_t>& window) = 0;
  // Waits at most `timeout` for the interrupt count to differ from the last one this
  // Device saw, and returns the new total in `count`. ETIMEDOUT when none came.
  virtual Error events_wait(std::chrono::milliseconds timeout, std::uint32_t& count) = 0;
  // Unmasks interrupt delivery (writes 1 to events).
  virtual Error events_unmask() = 0;
};

enum class Outcome { pass, fail, skipped };

struct StepResult {
  std::string step;  // "identify", "liveness", "factorial", "dma"
  Outcome outcome = Outcome::skipped;
  std::string detail;  // what was seen (pass) or why it failed
  Error error;         // set when a file operation failed (detail then says the same)
  // Values worth printing, in order: name -> text (hex numbers as 0x...).
  std::vector<std::pair<std::string, std::string>> values;
};

struct Options {
  std::chrono::milliseconds timeout{5000};  // every wait, each on its own
  std::uint32_t factorial_n = 12;           // 12! = 479001600 still fits in 32 bits
  std::uint32_t seed = 0;                   // varies the patterns between runs
};

struct Report {
  std::vector<StepResult> steps;
  bool passed() const noexcept;
};

// Runs identify, liveness, factorial and dma in that order. If identify fails the others
// are skipped (the registers of another device may do anything); otherwise each runs
// whatever the previous one did, as they use different registers.
Report steps_run(Device& device, const Options& options);

// n! in 32 bits, wrapping, as edu computes it.
std::uint32_t factorial32(std::uint32_t n) noexcept;
// FNV-1a, 64 bits: a checksum to print for the DMA data.
std::uint64_t checksum64(std::span<const std::uint8_t> bytes) noexcept;

// Output. `path` is the device directory as given.
std::string report_text(const Report& report, std::string_view path);
std::string report_json(const Report& report, std::string_view path);
std::string json_escape(std::string_view text);

}  // namespace rpcie::edu_driver
