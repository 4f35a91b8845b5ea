// The steps of the edu sample driver. Each reads like the corresponding part of a kernel
// driver for edu (probe, liveness self-test, interrupt-driven compute, DMA), with the
// register accesses going through the device's files.
#include "edu_driver.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

namespace rpcie::edu_driver {
namespace {

using Clock = std::chrono::steady_clock;

std::string hex(std::uint64_t value, int digits = 0) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, digits, value);
  return buf;
}

// A step under construction; its helpers record the first failure and the caller returns.
class Step {
 public:
  explicit Step(std::string name) { result_.step = std::move(name); }

  StepResult pass(std::string detail) {
    result_.outcome = Outcome::pass;
    result_.detail = std::move(detail);
    return std::move(result_);
  }
  StepResult fail(std::string detail) {
    result_.outcome = Outcome::fail;
    result_.detail = std::move(detail);
    return std::move(result_);
  }
  StepResult fail(Error error) {
    result_.outcome = Outcome::fail;
    result_.detail = error.what + ": " + std::strerror(error.code);
    result_.error = std::move(error);
    return std::move(result_);
  }
  void value(std::string name, std::string text) { result_.values.emplace_back(std::move(name), std::move(text)); }

 private:
  StepResult result_;
};

Error read32(Device& device, std::uint64_t offset, std::uint32_t& value) {
  std::uint64_t wide = 0;
  Error error = device.bar_read(offset, 4, wide);
  value = static_cast<std::uint32_t>(wide);
  return error;
}

Error write32(Device& device, std::uint64_t offset, std::uint32_t value) { return device.bar_write(offset, 4, value); }

// Parses a sysfs number such as "0x1234\n".
bool attr_number(const std::string& text, std::uint32_t& value) {
  errno = 0;
  char* end = nullptr;
  const unsigned long parsed = std::strtoul(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || parsed > 0xffffffffUL) return false;
  while (*end == '\n' || *end == ' ') ++end;
  if (*end != '\0') return false;
  value = static_cast<std::uint32_t>(parsed);
  return true;
}

// Polls a register until (value & mask) == 0 or the timeout passes. Every read is a remote
// access, so the interval grows to 1 ms rather than spinning on the link.
Error register_wait_clear(Device& device, std::uint64_t offset, std::uint64_t mask, unsigned width,
                          std::chrono::milliseconds timeout, std::uint64_t& last) {
  const auto deadline = Clock::now() + timeout;
  auto interval = std::chrono::microseconds(10);
  for (;;) {
    if (Error error = device.bar_read(offset, width, last)) return error;
    if ((last & mask) == 0) return {};
    if (Clock::now() >= deadline)
      return {ETIMEDOUT, "register " + hex(offset) + " & " + hex(mask) + " still set after " +
                             std::to_string(timeout.count()) + " ms"};
    std::this_thread::sleep_for(interval);
    interval = std::min<std::chrono::microseconds>(interval * 2, std::chrono::milliseconds(1));
  }
}

// Waits for an interrupt whose status has `bit`, acknowledging what each interrupt
// reports (a stray one, e.g. left by an earlier run, is acknowledged and waited past).
// Returns the count and the status it acknowledged last.
Error interrupt_wait_ack(Device& device, const Options& options, std::uint32_t bit, std::uint32_t& count,
                         std::uint32_t& status) {
  const auto deadline = Clock::now() + options.timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return {ETIMEDOUT,
              "no interrupt " + hex(bit) + " on events within " + std::to_string(options.timeout.count()) + " ms"};
    if (Error error = device.events_wait(left, count)) return error;
    if (Error error = read32(device, kRegIrqStatus, status)) return error;
    // Acknowledge exactly what was pending, as a driver's handler does: acknowledging more
    // than was read could lose an interrupt that arrived in between.
    if (status != 0) {
      if (Error error = write32(device, kRegIrqAck, status)) return error;
    }
    // UIO practice: re-enable delivery after handling, in case the daemon masks on delivery.
    if (Error error = device.events_unmask()) return error;
    if ((status & bit) != 0) return {};
  }
}

StepResult identify(Device& device) {
  Step step("identify");
  std::string text;
  std::uint32_t vendor = 0, device_id = 0;
  if (Error error = device.attr_read("vendor", text)) return step.fail(error);
  if (!attr_number(text, vendor)) return step.fail("vendor: not a number: \"" + text + "\"");
  if (Error error = device.attr_read("device", text)) return step.fail(error);
  if (!attr_number(text, device_id)) return step.fail("device: not a number: \"" + text + "\"");
  step.value("vendor", hex(vendor, 4));
  step.value("device", hex(device_id, 4));

  std::uint8_t config[4] = {};
  if (Error error = device.config_read(0, config)) return step.fail(error);
  // Config space is little-endian whatever the host's byte order.
  const std::uint32_t config_vendor = config[0] | (config[1] << 8);
  const std::uint32_t config_device = config[2] | (config[3] << 8);
  step.value("config_id", hex(config_vendor, 4) + ":" + hex(config_device, 4));
  if (vendor != kVendor || device_id != kDevice)
    return step.fail("not an edu device: " + hex(vendor, 4) + ":" + hex(device_id, 4) + ", expected " +
                     hex(kVendor, 4) + ":" + hex(kDevice, 4));
  if (config_vendor != vendor || config_device != device_id)
    return step.fail("config space says " + hex(config_vendor, 4) + ":" + hex(config_device, 4) +
                     ", the vendor and device files " + hex(vendor, 4) + ":" + hex(device_id, 4));

  std::uint32_t id = 0;
  if (Error error = read32(device, kRegId, id)) return step.fail(error);
  step.value("id", hex(id, 8));
  if (!id_compatible(id))
    return step.fail("ID register " + hex(id, 8) + ", expected " + hex(kIdExpected, 8) +
                     " (major 1, low 16 bits 0x00ed)");
  return step.pass("1234:11e8, ID register " + hex(id, 8) + " (edu " + std::to_string(id >> 24) + "." +
                   std::to_string((id >> 16) & 0xff) + ")");
}

StepResult liveness(Device& device, const Options& options) {
  Step step("liveness");
  const std::uint32_t written = 0x5a5a0000u ^ options.seed;
  if (Error error = write32(device, kRegLiveness, written)) return step.fail(error);
  std::uint32_t read = 0;
  if (Error error = read32(device, kRegLiveness, read)) return step.fail(error);
  step.value("written", hex(written, 8));
  step.value("read", hex(read, 8));
  if (read != static_cast<std::uint32_t>(~written))
    return step.fail("wrote " + hex(written, 8) + ", read " + hex(read, 8) + ", expected its inverse " +
                     hex(~written, 8));
  return step.pass("wrote " + hex(written, 8) + ", read back " + hex(read, 8));
}

StepResult factorial(Device& device, const Options& options) {
  Step step("factorial");
  // Writes to 0x08 are ignored while a computation runs (one left by an earlier run).
  std::uint64_t status = 0;
  if (Error error = register_wait_clear(device, kRegStatus, kStatusComputing, 4, options.timeout, status))
    return step.fail(error);
  if (Error error = write32(device, kRegStatus, kStatusIrqOnFactorial)) return step.fail(error);
  if (Error error = write32(device, kRegFactorial, options.factorial_n)) return step.fail(error);

  std::uint32_t count = 0, irq_status = 0;
  Error error = interrupt_wait_ack(device, options, kIrqFactorial, count, irq_status);
  step.value("interrupts", std::to_string(count));
  step.value("irq_status", hex(irq_status, 8));
  if (error) return step.fail(error);

  std::uint32_t result = 0;
  if (Error e = read32(device, kRegFactorial, result)) return step.fail(e);
  const std::uint32_t expected = factorial32(options.factorial_n);
  step.value("n", std::to_string(options.factorial_n));
  step.value("result", std::to_string(result));
  if (result != expected)
    return step.fail(std::to_string(options.factorial_n) + "! read as " + std::to_string(result) + ", expected " +
                     std::to_string(expected));
  return step.pass(std::to_string(options.factorial_n) + "! = " + std::to_string(result) + " after interrupt " +
                   std::to_string(count) + " (status " + hex(irq_status) + ", acknowledged)");
}

// One DMA transfer with the completion interrupt: program, start, wait, acknowledge.
Error dma_transfer(Device& device, const Options& options, std::uint64_t src, std::uint64_t dst, bool to_host) {
  std::uint64_t cmd = 0;
  // A command written while a transfer runs is ignored.
  if (Error error = register_wait_clear(device, kRegDmaCmd, kDmaCmdStart, 8, options.timeout, cmd)) return error;
  if (Error error = device.bar_write(kRegDmaSrc, 8, src)) return error;
  if (Error error = device.bar_write(kRegDmaDst, 8, dst)) return error;
  if (Error error = device.bar_write(kRegDmaCount, 8, kDmaBufferSize)) return error;
  // The driver's stores into the window must be visible before the device can read them:
  // the write barrier a kernel driver puts before its doorbell.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (Error error = device.bar_write(kRegDmaCmd, 8, kDmaCmdStart | kDmaCmdIrq | (to_host ? kDmaCmdToHost : 0)))
    return error;
  std::uint32_t count = 0, status = 0;
  if (Error error = interrupt_wait_ack(device, options, kIrqDma, count, status)) return error;
  // The interrupt says the transfer is done; the start bit must agree.
  if (Error error = device.bar_read(kRegDmaCmd, 8, cmd)) return error;
  if ((cmd & kDmaCmdStart) != 0) return {EPROTO, "DMA command " + hex(cmd) + " still busy after its interrupt"};
  // Pairs with the daemon's write of the data before the interrupt.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return {};
}

StepResult dma(Device& device, const Options& options) {
  Step step("dma");
  std::span<std::uint8_t> window;
  if (Error error = device.dma_map(window)) return step.fail(std::move(error));
  step.value("window", std::to_string(window.size()));
  if (window.size() < kDmaWindowMin)
    return step.fail("the DMA window has " + std::to_string(window.size()) + " bytes; the test needs " +
                     std::to_string(kDmaWindowMin));
  std::span<std::uint8_t> src = window.subspan(kDmaSrcIova, kDmaBufferSize);
  std::span<std::uint8_t> dst = window.subspan(kDmaDstIova, kDmaBufferSize);
  // A pattern that differs per run and per byte position, so that stale data of an earlier
  // run or a shifted copy cannot match.
  std::uint32_t x = options.seed * 2654435761u + 1;
  for (std::uint8_t& byte : src) {
    x = x * 1664525u + 1013904223u;
    byte = static_cast<std::uint8_t>(x >> 24);
  }
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<std::uint8_t>(~src[i]);
  const std::uint64_t sum_src = checksum64(src);
  step.value("src_iova", hex(kDmaSrcIova));
  step.value("dst_iova", hex(kDmaDstIova));
  step.value("bytes", std::to_string(kDmaBufferSize));
  step.value("checksum_src", hex(sum_src, 16));

  if (Error error = dma_transfer(device, options, kDmaSrcIova, kDmaBufferAddress, false)) {
    error.what = "RAM to device: " + error.what;
    return step.fail(std::move(error));
  }
  if (Error error = dma_transfer(device, options, kDmaBufferAddress, kDmaDstIova, true)) {
    error.what = "device to RAM: " + error.what;
    return step.fail(std::move(error));
  }
  const std::uint64_t sum_dst = checksum64(dst);
  step.value("checksum_dst", hex(sum_dst, 16));
  for (std::size_t i = 0; i < dst.size(); ++i) {
    if (dst[i] != src[i])
      return step.fail("byte " + std::to_string(i) + " (IOVA " + hex(kDmaDstIova + i) + ") is " + hex(dst[i], 2) +
                       ", expected " + hex(src[i], 2) + "; checksum " + hex(sum_dst, 16) + ", expected " +
                       hex(sum_src, 16));
  }
  return step.pass(std::to_string(kDmaBufferSize) + " bytes IOVA " + hex(kDmaSrcIova) + " -> device " +
                   hex(kDmaBufferAddress) + " -> IOVA " + hex(kDmaDstIova) + ", checksum " + hex(sum_dst, 16));
}

// Indexed by Outcome, in its order.
constexpr const char* kOutcomeText[] = {"pass", "fail", "skipped"};
static_assert(std::size(kOutcomeText) == static_cast<std::size_t>(Outcome::skipped) + 1);

const char* outcome_text(Outcome outcome) { return kOutcomeText[static_cast<std::size_t>(outcome)]; }

}  // namespace

bool Report::passed() const noexcept {
  for (const StepResult& step : steps)
    if (step.outcome != Outcome::pass) return false;
  return !steps.empty();
}

std::uint32_t factorial32(std::uint32_t n) noexcept {
  std::uint32_t result = 1;
  for (std::uint32_t i = 2; i <= n; ++i) result *= i;
  return result;
}

std::uint64_t checksum64(std::span<const std::uint8_t> bytes) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::uint8_t byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

Report steps_run(Device& device, const Options& options) {
  Report report;
  report.steps.push_back(identify(device));
  const bool is_edu = report.steps.back().outcome == Outcome::pass;
  auto skipped = [](std::string name) {
    StepResult result;
    result.step = std::move(name);
    result.outcome = Outcome::skipped;
    result.detail = "identify failed";
    return result;
  };
  if (!is_edu) {
    for (const char* name : {"liveness", "factorial", "dma"}) report.steps.push_back(skipped(name));
    return report;
  }
  // A fresh open of events may start masked; and a run killed in its middle may have left
  // interrupt bits pending, whose line would never drop for this run's interrupts.
  if (Error error = device.events_unmask()) {
    Step step("setup");
    report.steps.push_back(step.fail(std::move(error)));
    return report;
  }
  std::uint32_t stale = 0;
  if (!read32(device, kRegIrqStatus, stale) && stale != 0) (void)write32(device, kRegIrqAck, stale);

  report.steps.push_back(liveness(device, options));
  report.steps.push_back(factorial(device, options));
  report.steps.push_back(dma(device, options));
  return report;
}

std::string json_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string report_text(const Report& report, std::string_view path) {
  std::string out = "device " + std::string(path) + "\n";
  for (const StepResult& step : report.steps) {
    char head[64];
    std::snprintf(head, sizeof head, "%-10s %-7s ", step.step.c_str(), outcome_text(step.outcome));
    out += head + step.detail + "\n";
  }
  out += report.passed() ? "result: pass\n" : "result: FAIL\n";
  return out;
}

std::string report_json(const Report& report, std::string_view path) {
  std::string out =
      "{\"device\":\"" + json_escape(path) + "\",\"passed\":" + (report.passed() ? "true" : "false") + ",\"steps\":[";
  bool first = true;
  for (const StepResult& step : report.steps) {
    if (!first) out += ",";
    first = false;
    out += "{\"step\":\"" + json_escape(step.step) + "\",\"result\":\"" + outcome_text(step.outcome) +
           "\",\"detail\":\"" + json_escape(step.detail) + "\"";
    if (step.error) out += ",\"errno\":" + std::to_string(step.error.code);
    out += ",\"values\":{";
    bool first_value = true;
    for (const auto& [name, text] : step.values) {
      if (!first_value) out += ",";
      first_value = false;
      out += "\"" + json_escape(name) + "\":\"" + json_escape(text) + "\"";
    }
    out += "}}";
  }
  out += "]}\n";
  return out;
}

}  // namespace rpcie::edu_driver
