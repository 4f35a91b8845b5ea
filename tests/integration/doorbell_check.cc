// rpcie-doorbellcheck: drives a membar export with doorbell=on through the client API and
// checks the device end to end, including what the exporter's access log says it did.
//
//   rpcie-doorbellcheck -r HOST[:PORT] --psk-file FILE [--provider P] EXPORT ACCESS_LOG
//
// A pattern goes into BAR0 by one-sided RMA (bar_write_from_window) and one 8-byte MMIO
// store; then OFFSET, LENGTH and DOORBELL on BAR2; after the interrupt RESULT must equal the
// FNV-1a computed here (core's checksum, not the device's code), STATUS 0 and COUNT 1. An
// out-of-range doorbell must set STATUS.error, and a 4-byte read of RESULT be EINVAL. Last,
// the lines ACCESS_LOG gained for EXPORT during this run must be exactly the MMIO accesses
// made, in order, with their widths, offsets and values (and none for the RMA transfer).
// Prints "ok: ..." lines and exits 0, or "FAIL: ..." lines and exits 1; 2 for bad arguments.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "check_report.hpp"

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/client.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/membar_registers.hpp"
#include "rpcie/process.hpp"
#include "rpcie/protocol.hpp"

namespace {

using namespace std::chrono_literals;
using namespace rpcie::membar;
using rpcie::Deadline;
using rpcie::client::Attachment;

using rpcie::testing::check_failures;

Deadline soon() { return Deadline::after(5s); }

// The accesses made, as the access log must show them.
struct Expected {
  std::string export_name;
  std::vector<std::string> lines;
  void add(const char* dir, std::uint8_t bar, std::uint64_t offset, unsigned width, const std::string& tail) {
    char text[160];
    std::snprintf(text, sizeof text, " %s bar=%u offset=0x%llx width=%u ", dir, unsigned{bar},
                  static_cast<unsigned long long>(offset), width);
    lines.push_back(export_name + text + tail);
  }
};

std::string hex(std::uint64_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "value=0x%llx", static_cast<unsigned long long>(v));
  return text;
}

std::uint64_t rd(Attachment& a, Expected& log, std::uint8_t bar, std::uint64_t offset, unsigned width) {
  auto v = a.mmio_read(bar, offset, width, soon());
  CHECK_THAT(v.has_value(), "read BAR%u+0x%llx: %s", unsigned{bar}, static_cast<unsigned long long>(offset),
             v ? "" : v.error().describe().c_str());
  if (v) log.add("read", bar, offset, width, hex(*v));
  return v ? *v : ~0ULL;
}

void wr(Attachment& a, Expected& log, std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value) {
  auto r = a.mmio_write(bar, offset, width, value, soon());
  CHECK_THAT(r.has_value(), "write BAR%u+0x%llx: %s", unsigned{bar}, static_cast<unsigned long long>(offset),
             r ? "" : r.error().describe().c_str());
  log.add("write", bar, offset, width, hex(value));
}

// OFFSET, LENGTH, DOORBELL, then the interrupt: exactly one more on vector 0.
void doorbell_ring(Attachment& a, Expected& log, std::uint64_t offset, std::uint64_t length, std::uint32_t value) {
  wr(a, log, kRegisterBar, kRegOffset, 8, offset);
  wr(a, log, kRegisterBar, kRegLength, 8, length);
  const std::uint64_t seen = a.interrupt_count(kDoorbellVector);
  wr(a, log, kRegisterBar, kRegDoorbell, 4, value);
  auto n = a.interrupt_wait(kDoorbellVector, seen, Deadline::after(10s));
  CHECK_THAT(n && *n == seen + 1, "one interrupt per doorbell: %s",
             n ? std::to_string(*n - seen).c_str() : n.error().describe().c_str());
}

std::vector<std::string> log_lines_since(const std::string& path, std::uint64_t from, const std::string& name) {
  std::ifstream in(path);
  in.seekg(static_cast<std::streamoff>(from));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (l.compare(0, name.size() + 1, name + " ") == 0) lines.push_back(l);
  return lines;
}

int doorbell_check(Attachment& a, const std::string& name, const std::string& log_path, std::uint64_t log_from,
                   rpcie::HostBuffer& window) {
  const auto& d = a.device();
  const auto* bar0 = d.bar_find(0);
  const auto* bar2 = d.bar_find(kRegisterBar);
  CHECK_THAT(bar0 && bar0->kind == rpcie::pci::BarKind::memory && bar0->direct, "BAR0 is direct memory");
  CHECK_THAT(bar2 && bar2->kind == rpcie::pci::BarKind::registers && bar2->size == kRegisterBarSize && !bar2->direct,
             "BAR2 is a 4K register BAR");
  CHECK_THAT(d.vectors == 1, "one interrupt vector, not %u", unsigned{d.vectors});
  if (check_failures || !bar0 || bar0->size > window.size()) return 1;
  const std::uint64_t size = bar0->size;
  Expected log{name, {}};

  // The pattern: RMA for the bulk, one MMIO store on top (the log shows only the store).
  std::mt19937 rng(2024);
  for (std::size_t i = 0; i < size; ++i) window.data()[i] = static_cast<std::uint8_t>(rng());
  auto z = a.bar_write_from_window(0, 0, 0, size, soon());
  CHECK_THAT(z.has_value(), "bar_write_from_window: %s", z ? "" : z.error().describe().c_str());
  const std::uint64_t word = 0x0123456789abcdefULL;
  wr(a, log, 0, 0x100, 8, word);
  std::memcpy(window.data() + 0x100, &word, 8);

  CHECK_THAT(rd(a, log, kRegisterBar, kRegId, 4) == kIdValue, "ID");
  const std::uint64_t offset = 0x34, length = size - offset - 7;  // covers the MMIO store
  doorbell_ring(a, log, offset, length, 1);
  const std::uint64_t want = rpcie::proto::checksum_fnv1a(std::span(window.data() + offset, length));
  const std::uint64_t got = rd(a, log, kRegisterBar, kRegResult, 8);
  CHECK_THAT(got == want, "RESULT 0x%llx, FNV-1a here 0x%llx", static_cast<unsigned long long>(got),
             static_cast<unsigned long long>(want));
  CHECK_THAT(rd(a, log, kRegisterBar, kRegStatus, 4) == 0, "STATUS after a good doorbell");
  CHECK_THAT(rd(a, log, kRegisterBar, kRegCount, 4) == 1, "COUNT after one doorbell");
  if (!check_failures) std::printf("ok: RMA pattern + MMIO store in BAR0, doorbell on BAR2: RESULT is its FNV-1a\n");

  doorbell_ring(a, log, size, 1, 2);
  CHECK_THAT(rd(a, log, kRegisterBar, kRegStatus, 4) == kStatusError, "STATUS.error for a range past BAR0");
  CHECK_THAT(rd(a, log, kRegisterBar, kRegResult, 8) == 0, "RESULT of a bad range");
  CHECK_THAT(rd(a, log, kRegisterBar, kRegCount, 4) == 2, "COUNT counts the bad doorbell too");
  auto refused = a.mmio_read(kRegisterBar, kRegResult, 4, soon());
  CHECK_THAT(!refused && refused.error().to_errno() == EINVAL, "a 4-byte read of RESULT is EINVAL");
  log.add("read", kRegisterBar, kRegResult, 4, "error=EINVAL");
  if (!check_failures) std::printf("ok: out-of-range doorbell sets STATUS.error; a wrong width is EINVAL\n");

  // Every line the exporter wrote for this export during this run, in order.
  const auto lines = log_lines_since(log_path, log_from, name);
  CHECK_THAT(lines.size() == log.lines.size(), "%zu access log lines, expected %zu", lines.size(), log.lines.size());
  for (std::size_t i = 0; i < std::min(lines.size(), log.lines.size()); ++i)
    CHECK_THAT(lines[i] == log.lines[i], "access log line %zu is '%s', expected '%s'", i + 1, lines[i].c_str(),
               log.lines[i].c_str());
  if (!check_failures) std::printf("ok: the access log shows the %zu MMIO accesses in order\n", lines.size());
  return check_failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  CLI::App app{"rpcie-doorbellcheck"};
  std::string remote, psk = "/etc/rpcie/psk", provider = "auto", name, log_path;
  app.add_option("-r,--remote", remote)->required();
  app.add_option("--psk-file", psk);
  app.add_option("--provider", provider);
  app.add_option("export", name)->required();
  app.add_option("access_log", log_path)->required();
  CLI11_PARSE(app, argc, argv);

  auto address = rpcie::address_parse(remote, rpcie::kDefaultPort);
  auto key = rpcie::auth::key_load(psk);
  std::string why;
  auto choice = rpcie::providers::provider_parse(provider, &why);
  auto window = rpcie::HostBuffer::create(std::size_t{16} << 20);
  if (!address || !key || !choice || !window) {
    std::printf("FAIL: bad arguments: %s\n", !address  ? address.error().message.c_str()
                                             : !key    ? key.error().describe().c_str()
                                             : !window ? window.error().describe().c_str()
                                                       : why.c_str());
    return 2;
  }
  struct stat st {};
  const std::uint64_t log_from = ::stat(log_path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  rpcie::client::ClientOptions options;
  options.key = std::make_shared<const rpcie::auth::Key>(std::move(*key));
  options.provider = *choice;
  auto a = Attachment::open(address->first, address->second, name, options, {window->data(), window->size()}, soon());
  if (!a) {
    std::printf("FAIL: attach %s: %s\n", name.c_str(), a.error().describe().c_str());
    return 1;
  }
  return doorbell_check(**a, name, log_path, log_from, *window);
}
