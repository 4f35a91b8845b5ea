// The edu sample driver's steps (tools/edu-driver) against rpcie's own edu backend: the
// backend behind a Device adapter that plays the part of rpcie-hostd's files (the fake
// DmaPort's byte vector is the dma window, the fake IrqSink's count is events). Faults are
// injected by wrapping the adapter. No FUSE: PosixDevice is covered by the CLI test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "../../support/fake_device_ports.hpp"
#include "backends/edu/edu.hpp"
#include "edu_driver.hpp"

using namespace std::chrono_literals;
using rpcie::edu_driver::Device;
using rpcie::edu_driver::Error;
using rpcie::edu_driver::Outcome;
using rpcie::edu_driver::Report;

namespace {

std::string hex_text(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x\n", digits, value);
  return buf;
}

// The edu backend seen through the device directory's operations.
class BackendDevice : public Device {
 public:
  BackendDevice() : port_(64 * 1024) {
    auto made = rpcie::dev::edu_create({});
    REQUIRE(made);
    backend_ = std::move(*made);
    REQUIRE(backend_->attach(&port_, &irq_));
  }
  ~BackendDevice() override { backend_->detach(); }

  Error attr_read(std::string_view name, std::string& text) override {
    const auto& id = backend_->identity();
    if (name == "vendor")
      text = hex_text(id.vendor, 4);
    else if (name == "device")
      text = hex_text(id.device, 4);
    else
      return {ENOENT, "open " + std::string(name)};
    return {};
  }
  Error config_read(std::uint32_t offset, std::span<std::uint8_t> into) override {
    for (std::size_t i = 0; i < into.size(); ++i) {
      auto byte = backend_->config_read(offset + static_cast<std::uint32_t>(i), 1);
      if (!byte) return {byte.error().code, "pread config"};
      into[i] = static_cast<std::uint8_t>(*byte);
    }
    return {};
  }
  Error bar_read(std::uint64_t offset, unsigned width, std::uint64_t& value) override {
    auto read = backend_->mmio_read(0, offset, width);
    if (!read) return {read.error().code, "pread resource0"};
    value = *read;
    return {};
  }
  Error bar_write(std::uint64_t offset, unsigned width, std::uint64_t value) override {
    auto done = backend_->mmio_write(0, offset, width, value);
    if (!done) return {done.error().code, "pwrite resource0"};
    return {};
  }
  Error dma_map(std::span<std::uint8_t>& window) override {
    window = port_.window;
    return {};
  }
  // UIO semantics: returns once the total differs from what this "open file" last saw.
  Error events_wait(std::chrono::milliseconds timeout, std::uint32_t& count) override {
    const int now = irq_.wait(0, seen_ + 1, timeout);
    if (now == seen_) return {ETIMEDOUT, "wait for an interrupt on events"};
    seen_ = now;
    count = static_cast<std::uint32_t>(now);
    return {};
  }
  Error events_unmask() override {
    ++unmasks;
    return {};
  }

  int unmasks = 0;

 private:
  rpcie::test::FakeDmaPort port_;
  rpcie::test::FakeIrqSink irq_;
  std::unique_ptr<rpcie::dev::Backend> backend_;
  int seen_ = 0;
};

// Forwards to a BackendDevice; tests override what they break.
class Wrapper : public Device {
 public:
  Error attr_read(std::string_view name, std::string& text) override { return inner.attr_read(name, text); }
  Error config_read(std::uint32_t offset, std::span<std::uint8_t> into) override {
    return inner.config_read(offset, into);
  }
  Error bar_read(std::uint64_t offset, unsigned width, std::uint64_t& value) override {
    return inner.bar_read(offset, width, value);
  }
  Error bar_write(std::uint64_t offset, unsigned width, std::uint64_t value) override {
    return inner.bar_write(offset, width, value);
  }
  Error dma_map(std::span<std::uint8_t>& window) override { return inner.dma_map(window); }
  Error events_wait(std::chrono::milliseconds timeout, std::uint32_t& count) override {
    return inner.events_wait(timeout, count);
  }
  Error events_unmask() override { return inner.events_unmask(); }
  BackendDevice inner;
};

const rpcie::edu_driver::StepResult& step_of(const Report& report, const std::string& name) {
  for (const auto& step : report.steps)
    if (step.step == name) return step;
  FAIL("no step " << name);
  return report.steps.front();
}

rpcie::edu_driver::Options fast_options() {
  rpcie::edu_driver::Options options;
  options.timeout = 2000ms;
  options.seed = 0x1234;
  return options;
}

}  // namespace

TEST_CASE("the driver's steps all pass against the edu backend") {
  BackendDevice device;
  const Report report = rpcie::edu_driver::steps_run(device, fast_options());
  REQUIRE(report.steps.size() == 4);
  for (const auto& step : report.steps) CHECK_MESSAGE(step.outcome == Outcome::pass, step.step << ": " << step.detail);
  CHECK(report.passed());
  // One unmask at the start and one after each of the three interrupts it handled.
  CHECK(device.unmasks == 4);
}

TEST_CASE("factorial32 wraps at 32 bits as edu does") {
  CHECK(rpcie::edu_driver::factorial32(0) == 1);
  CHECK(rpcie::edu_driver::factorial32(12) == 479001600u);
  CHECK(rpcie::edu_driver::factorial32(13) == 1932053504u);  // 6227020800 mod 2^32
}

TEST_CASE("the ID register check takes any minor of major 1 and nothing else") {
  CHECK(rpcie::edu_driver::id_compatible(0x010000ed));
  CHECK(rpcie::edu_driver::id_compatible(0x010300ed));
  CHECK_FALSE(rpcie::edu_driver::id_compatible(0x020000ed));
  CHECK_FALSE(rpcie::edu_driver::id_compatible(0x010000ee));
  CHECK_FALSE(rpcie::edu_driver::id_compatible(0xffffffff));
}

TEST_CASE("a device that is not edu fails identify and skips the other steps") {
  struct Other : Wrapper {
    Error attr_read(std::string_view name, std::string& text) override {
      if (name == "device") {
        text = "0x4d42\n";
        return {};
      }
      return Wrapper::attr_read(name, text);
    }
  } device;
  const Report report = rpcie::edu_driver::steps_run(device, fast_options());
  CHECK_FALSE(report.passed());
  CHECK(step_of(report, "identify").outcome == Outcome::fail);
  CHECK(step_of(report, "identify").detail.find("not an edu device") != std::string::npos);
  for (const char* name : {"liveness", "factorial", "dma"}) CHECK(step_of(report, name).outcome == Outcome::skipped);
}

TEST_CASE("a wrong ID register value fails identify") {
  struct BadId : Wrapper {
    Error bar_read(std::uint64_t offset, unsigned width, std::uint64_t& value) override {
      if (offset == rpcie::edu_driver::kRegId) {
        value = 0x020000ed;
        return {};
      }
      return Wrapper::bar_read(offset, width, value);
    }
  } device;
  const Report report = rpcie::edu_driver::steps_run(device, fast_options());
  CHECK(step_of(report, "identify").outcome == Outcome::fail);
  CHECK(step_of(report, "identify").detail.find("0x020000ed") != std::string::npos);
}

TEST_CASE("an interrupt that never comes fails factorial and dma within the timeout") {
  struct Silent : Wrapper {
    Error events_wait(std::chrono::milliseconds timeout, std::uint32_t&) override {
      std::this_thread::sleep_for(timeout);
      return {ETIMEDOUT, "wait for an interrupt on events"};
    }
  } device;
  auto options = fast_options();
  options.timeout = 100ms;
  const auto start = std::chrono::steady_clock::now();
  const Report report = rpcie::edu_driver::steps_run(device, options);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(step_of(report, "liveness").outcome == Outcome::pass);
  CHECK(step_of(report, "factorial").outcome == Outcome::fail);
  CHECK(step_of(report, "factorial").error.code == ETIMEDOUT);
  CHECK(step_of(report, "dma").outcome == Outcome::fail);
  CHECK(step_of(report, "dma").error.code == ETIMEDOUT);
  // Two waits of 100 ms each, plus register polls: far under a second.
  CHECK(took < 1s);
}

TEST_CASE("a file error names the step's operation and keeps its errno") {
  struct Broken : Wrapper {
    Error bar_read(std::uint64_t offset, unsigned width, std::uint64_t& value) override {
      if (offset == rpcie::edu_driver::kRegLiveness) return {EIO, "pread resource0 at 0x4"};
      return Wrapper::bar_read(offset, width, value);
    }
  } device;
  const Report report = rpcie::edu_driver::steps_run(device, fast_options());
  const auto& liveness = step_of(report, "liveness");
  CHECK(liveness.outcome == Outcome::fail);
  CHECK(liveness.error.code == EIO);
  CHECK(liveness.detail == std::string("pread resource0 at 0x4: ") + std::strerror(EIO));
  // The other steps do not depend on the liveness register.
  CHECK(step_of(report, "factorial").outcome == Outcome::pass);
  CHECK(step_of(report, "dma").outcome == Outcome::pass);
}

TEST_CASE("a byte the DMA got wrong is found and named") {
  // Corrupts the destination after the device-to-RAM interrupt (the third one).
  struct Corrupting : Wrapper {
    Error events_wait(std::chrono::milliseconds timeout, std::uint32_t& count) override {
      Error error = Wrapper::events_wait(timeout, count);
      if (!error && count == 3) {
        std::span<std::uint8_t> window;
        REQUIRE_FALSE(inner.dma_map(window));
        window[rpcie::edu_driver::kDmaDstIova + 100] ^= 0x01;
      }
      return error;
    }
  } device;
  const Report report = rpcie::edu_driver::steps_run(device, fast_options());
  const auto& dma = step_of(report, "dma");
  CHECK(dma.outcome == Outcome::fail);
  CHECK(dma.detail.find("byte 100 ") != std::string::npos);
}

TEST_CASE("a DMA window too small for the test fails the dma step only") {
  struct Small : Wrapper {
    Error dma_map(std::span<std::uint8_t>& window) override {
      REQUIRE_FALSE(inner.dma_map(window));
      window = window.first(4096);
      return {};
    }
  } device;
  const Report report = rpcie::edu_driver::steps_run(device, fast_options());
  CHECK(step_of(report, "factorial").outcome == Outcome::pass);
  CHECK(step_of(report, "dma").outcome == Outcome::fail);
  CHECK(step_of(report, "dma").detail.find("needs") != std::string::npos);
}

TEST_CASE("the JSON report parses and carries every step") {
  BackendDevice device;
  const Report report = rpcie::edu_driver::steps_run(device, fast_options());
  const auto json = nlohmann::json::parse(rpcie::edu_driver::report_json(report, "/dev/rpcie0 \"quoted\"\n"));
  CHECK(json["device"] == "/dev/rpcie0 \"quoted\"\n");
  CHECK(json["passed"] == true);
  REQUIRE(json["steps"].size() == 4);
  CHECK(json["steps"][0]["step"] == "identify");
  CHECK(json["steps"][0]["values"]["id"] == "0x010000ed");
  CHECK(json["steps"][3]["values"]["checksum_src"] == json["steps"][3]["values"]["checksum_dst"]);
}
