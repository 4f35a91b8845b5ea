// A program outside the rpcie tree: built by tests/integration/library_install.sh with only
// `pkg-config --cflags --libs rpcie` against an installed librpcie, it drives an exported
// edu device through the client API — identity, the liveness register, a factorial with its
// interrupt — and says what it saw.
//   edu_client HOST PORT EXPORT PSK_FILE
#include <rpcie/client.hpp>
#include <rpcie/edu_registers.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

using namespace std::chrono_literals;

int failed(const char* what, const rpcie::Error& e) {
  std::fprintf(stderr, "edu_client: %s: %s\n", what, e.describe().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: edu_client HOST PORT EXPORT PSK_FILE\n");
    return 2;
  }
  auto key = rpcie::auth::key_load(argv[4]);
  if (!key) return failed("key", key.error());
  rpcie::client::ClientOptions options;
  options.key = std::make_shared<const rpcie::auth::Key>(std::move(*key));
  const auto port = static_cast<std::uint16_t>(std::strtoul(argv[2], nullptr, 10));
  auto deadline = [] { return rpcie::Deadline::after(5s); };
  // edu does DMA: its attachment needs a window of host memory, page-aligned.
  constexpr std::size_t kWindow = std::size_t{1} << 20;
  std::unique_ptr<void, decltype(&std::free)> window(std::aligned_alloc(4096, kWindow), &std::free);
  if (!window) return 1;
  auto a = rpcie::client::Attachment::open(argv[1], port, argv[3], options, {window.get(), kWindow},
                                           rpcie::Deadline::after(10s));
  if (!a) return failed("attach", a.error());
  auto& dev = **a;
  namespace edu = rpcie::edu;
  auto id = dev.mmio_read(0, edu::kRegId, 4, deadline());
  if (!id) return failed("identity", id.error());
  if (*id != edu::kIdValue) {
    std::fprintf(stderr, "edu_client: identity 0x%llx, not edu's\n", static_cast<unsigned long long>(*id));
    return 1;
  }
  if (auto w = dev.mmio_write(0, edu::kRegLiveness, 4, 0x12345678, deadline()); !w)
    return failed("liveness", w.error());
  auto live = dev.mmio_read(0, edu::kRegLiveness, 4, deadline());
  if (!live) return failed("liveness", live.error());
  const std::uint64_t seen = dev.interrupt_count(0);
  if (auto w = dev.mmio_write(0, edu::kRegStatus, 4, edu::kStatusIrqOnFactorial, deadline()); !w)
    return failed("status", w.error());
  if (auto w = dev.mmio_write(0, edu::kRegFactorial, 4, 10, deadline()); !w) return failed("factorial", w.error());
  auto irq = dev.interrupt_wait(0, seen, deadline());
  if (!irq) return failed("interrupt", irq.error());
  auto fact = dev.mmio_read(0, edu::kRegFactorial, 4, deadline());
  if (!fact) return failed("factorial", fact.error());
  if (auto w = dev.mmio_write(0, edu::kRegIrqAck, 4, edu::kIrqFactorial, deadline()); !w)
    return failed("ack", w.error());
  if (auto d = dev.detach(deadline()); !d) return failed("detach", d.error());
  std::printf("liveness 0x%08llx factorial(10) %llu interrupts %llu\n", static_cast<unsigned long long>(*live),
              static_cast<unsigned long long>(*fact), static_cast<unsigned long long>(*irq - seen));
  return 0;
}
