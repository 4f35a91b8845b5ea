// rpcie-edu-driver: a userspace driver for the edu device, through the files of a device
// directory (rpcie-hostd's <mount>/pci/devices/<bdf>/ or /dev/rpcieN). It checks the
// device's identity, liveness register, interrupt-driven factorial and DMA both ways, and
// prints each step's result. Exit 0: every step passed; 1: a step failed; 2: usage.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "edu_driver.hpp"
#include "posix_device.hpp"

namespace {

constexpr const char* kProgram = "rpcie-edu-driver";

void error_print(const std::string& step, const std::string& text) {
  std::fprintf(stderr, "%s: error: %s: %s\n", kProgram, step.c_str(), text.c_str());
}

int run(const std::string& path, rpcie::edu_driver::BarAccess access, double timeout_s, bool json) {
  rpcie::edu_driver::Options options;
  options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000.0 + 0.5));
  // Different data each run, so a result left by an earlier run cannot pass for this one.
  options.seed = static_cast<std::uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                 static_cast<std::uint32_t>(::getpid());

  rpcie::edu_driver::Report report;
  std::unique_ptr<rpcie::edu_driver::PosixDevice> device;
  if (rpcie::edu_driver::Error error = rpcie::edu_driver::PosixDevice::open(path, access, device)) {
    rpcie::edu_driver::StepResult open_step;
    open_step.step = "open";
    open_step.outcome = rpcie::edu_driver::Outcome::fail;
    open_step.detail = error.what + ": " + std::strerror(error.code);
    open_step.error = error;
    report.steps.push_back(std::move(open_step));
  } else {
    report = rpcie::edu_driver::steps_run(*device, options);
  }

  for (const rpcie::edu_driver::StepResult& step : report.steps)
    if (step.outcome == rpcie::edu_driver::Outcome::fail) error_print(step.step, step.detail);
  const std::string out =
      json ? rpcie::edu_driver::report_json(report, path) : rpcie::edu_driver::report_text(report, path);
  std::fputs(out.c_str(), stdout);
  if (std::fflush(stdout) != 0) {
    error_print("output", std::strerror(errno));
    return 1;
  }
  return report.passed() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rpcie-edu-driver: test an edu device through its device directory (open/pread/pwrite/mmap/poll only)"};
  std::string path;
  bool json = false;
  double timeout_s = 5.0;
  app.add_option("device", path, "device directory, e.g. /dev/rpcie0 or /run/rpcie/pci/devices/10000:00:00.0")
      ->required();
  bool mapped = false;
  app.add_flag("--json", json, "print the result as one JSON object");
  app.add_flag("--mmap", mapped,
               "reach BAR0's registers by loads and stores on a mapping of resource0 (run under `rpcie run`) "
               "instead of pread/pwrite");
  app.add_option("--timeout", timeout_s, "seconds each wait may take (default 5)")->check(CLI::Range(0.001, 3600.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      app.exit(e);  // --help
      return 0;
    }
    std::fprintf(stderr, "%s: error: %s (see --help)\n", kProgram, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 2;
  }
  try {
    return run(path, mapped ? rpcie::edu_driver::BarAccess::mapped : rpcie::edu_driver::BarAccess::file, timeout_s,
               json);
  } catch (const std::exception& e) {  // std::bad_alloc and friends: report, never abort
    error_print("internal", e.what());
    return 1;
  }
}
