#include "top.hpp"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <thread>

#include "rpcie/control.hpp"
#include "rpcie/latency_histogram.hpp"

namespace rpcie::cli {

namespace {

using nlohmann::json;

std::uint64_t counter_of(const json& j, const char* key) {
  if (!j.is_object()) return 0;
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

// The histogram `op` of a `latency` object (a status entry's, or its device_telemetry's),
// as a snapshot (empty if absent or malformed).
LatencyHistogram::Snapshot histogram_of(const json& holder, const char* op) {
  LatencyHistogram::Snapshot s;
  const auto l = holder.is_object() ? holder.find("latency") : holder.end();
  if (!holder.is_object() || l == holder.end() || !l->is_object()) return s;
  const auto h = l->find(op);
  if (h == l->end() || !h->is_object()) return s;
  const auto c = h->find("counts");
  if (c == h->end() || !c->is_array() || c->size() != s.counts.size()) return s;
  for (std::size_t i = 0; i < s.counts.size(); ++i) {
    s.counts[i] = (*c)[i].is_number_unsigned() ? (*c)[i].get<std::uint64_t>() : 0;
    s.count += s.counts[i];
  }
  const auto sum = h->find("sum_seconds");
  if (sum != h->end() && sum->is_number()) s.sum_ns = static_cast<std::uint64_t>(sum->get<double>() * 1e9);
  return s;
}

// The device's DMA in both directions, as the exporter timed it (device_telemetry; empty
// where the answer has none).
LatencyHistogram::Snapshot dma_of(const json& device) {
  const auto t = device.find("device_telemetry");
  if (t == device.end()) return {};
  auto s = histogram_of(*t, "dma_read");
  const auto w = histogram_of(*t, "dma_write");
  for (std::size_t i = 0; i < s.counts.size(); ++i) s.counts[i] += w.counts[i];
  s.count += w.count;
  s.sum_ns += w.sum_ns;
  return s;
}

std::string latency_text(std::uint64_t ns) {
  if (ns == 0) return "-";
  if (ns == UINT64_MAX) return ">10s";
  char buf[16];
  if (ns < 1'000'000)
    std::snprintf(buf, sizeof buf, "%lluus", static_cast<unsigned long long>(ns / 1000));
  else if (ns < 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%llums", static_cast<unsigned long long>(ns / 1'000'000));
  else
    std::snprintf(buf, sizeof buf, "%llus", static_cast<unsigned long long>(ns / 1'000'000'000));
  return buf;
}

std::map<std::string, json> by_device(const json& answer) {
  std::map<std::string, json> out;
  const auto list = answer.is_object() ? answer.find("attachments") : answer.end();
  if (!answer.is_object() || list == answer.end() || !list->is_array()) return out;
  for (const auto& a : *list)
    if (a.is_object() && a.contains("device") && a["device"].is_string()) out[a["device"].get<std::string>()] = a;
  return out;
}

std::string text_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "-";
}

}  // namespace

std::string top_frame(const json& before, const json& now, double seconds) {
  const auto old = by_device(before);
  const auto cur = by_device(now);
  if (seconds <= 0) seconds = 1;
  char line[256];
  std::snprintf(line, sizeof line, "rpcie top: %zu device%s, rates over %.1f s\n", cur.size(),
                cur.size() == 1 ? "" : "s", seconds);
  std::string out = line;
  std::snprintf(line, sizeof line, "%-8s %-16s %-12s %10s %10s %9s %8s %8s %8s %8s %8s %8s\n", "DEVICE", "EXPORT",
                "STATE", "READS/s", "WRITES/s", "MB/s", "IRQ/s", "RD_P50", "RD_P99", "IRQ_P99", "DMA/s", "DMA_P99");
  out += line;
  for (const auto& [name, d] : cur) {
    if (d.value("hidden", false)) {
      std::snprintf(line, sizeof line, "%-8s (another user's attachment)\n", name.c_str());
      out += line;
      continue;
    }
    const json empty = json::object();
    const auto it = old.find(name);
    const json& p = it != old.end() ? it->second : empty;
    const json c_now = d.contains("counters") ? d["counters"] : empty;
    const json c_old = p.contains("counters") ? p["counters"] : empty;
    // A counter that went down belongs to a new attachment (a reconnect): all of it is new.
    const auto delta = [&](const char* key) {
      const auto a = counter_of(c_now, key), b = counter_of(c_old, key);
      return static_cast<double>(a >= b ? a - b : a);
    };
    const double bytes = delta("bar_bytes_read") + delta("bar_bytes_written");
    const auto reads = histogram_of(d, "mmio_read").since(histogram_of(p, "mmio_read"));
    const auto irqs = histogram_of(d, "interrupt_delivery").since(histogram_of(p, "interrupt_delivery"));
    // A count that went down is a new attachment's: since() then keeps what it has.
    const auto dma = dma_of(d).since(dma_of(p));
    std::snprintf(line, sizeof line, "%-8s %-16.16s %-12.12s %10.1f %10.1f %9.2f %8.1f %8s %8s %8s %8.1f %8s\n",
                  name.c_str(), text_of(d, "export").c_str(), text_of(d, "state").c_str(),
                  delta("mmio_reads") / seconds, delta("mmio_writes") / seconds, bytes / seconds / 1e6,
                  delta("interrupts") / seconds, latency_text(reads.quantile_ns(0.5)).c_str(),
                  latency_text(reads.quantile_ns(0.99)).c_str(), latency_text(irqs.quantile_ns(0.99)).c_str(),
                  static_cast<double>(dma.count) / seconds, latency_text(dma.quantile_ns(0.99)).c_str());
    out += line;
  }
  return out;
}

int top_run(const TopOptions& o) {
  const auto path = control::socket_path_resolve(o.control_path);
  const auto ask = [&]() {
    return control::call(path, {{"op", "status"}, {"device_telemetry", true}},
                         Deadline::after(std::chrono::seconds(o.timeout_s)));
  };
  auto before = ask();
  if (!before) {
    std::fprintf(stderr, "rpcie: error: %s\n", before.error().message.c_str());
    return 1;
  }
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  auto taken = std::chrono::steady_clock::now();
  for (int frame = 0; o.count == 0 || frame < o.count; ++frame) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.interval_s));
    auto now = ask();
    if (!now) {
      std::fprintf(stderr, "rpcie: error: %s\n", now.error().message.c_str());
      return 1;
    }
    const auto at = std::chrono::steady_clock::now();
    const std::string text = top_frame(*before, *now, std::chrono::duration<double>(at - taken).count());
    if (terminal)
      std::printf("\033[H\033[2J%s", text.c_str());
    else
      std::printf("%s%s", frame > 0 ? "\n" : "", text.c_str());
    std::fflush(stdout);
    before = std::move(now);
    taken = at;
  }
  return 0;
}

}  // namespace rpcie::cli
