#include "rpcie/metrics_text.hpp"

#include <charconv>
#include <cmath>

namespace rpcie::metrics {

namespace {

// Backslash and newline escaped, and double quotes too where `quotes` (label values; HELP
// text keeps them).
std::string escape(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quotes)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

// `{a="x",b="y"}` with `extra` (already escaped) last; "" without labels.
std::string labels_text(const Labels& labels, std::string_view extra = {}) {
  if (labels.empty() && extra.empty()) return {};
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    if (out.size() > 1) out += ',';
    out += k + "=\"" + label_escape(v) + "\"";
  }
  if (!extra.empty()) {
    if (out.size() > 1) out += ',';
    out += extra;
  }
  return out + "}";
}

}  // namespace

std::string label_escape(std::string_view value) { return escape(value, true); }

std::string number_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

MetricsText::Family* MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
  for (auto& f : families_)
    if (f.name == name) return f.type == type && f.help == help ? &f : nullptr;
  families_.push_back(Family{std::string(name), std::string(type), std::string(help), {}});
  return &families_.back();
}

void MetricsText::counter(std::string_view name, std::string_view help, const Labels& labels, std::uint64_t value) {
  const std::string full = std::string(name) + "_total";
  if (Family* f = family(full, "counter", help))
    f->samples += full + labels_text(labels) + " " + std::to_string(value) + "\n";
}

void MetricsText::counters(const Labels& labels, std::span<const Counter> list) {
  for (const auto& c : list) counter(c.name, c.help, labels, c.value);
}

void MetricsText::gauge(std::string_view name, std::string_view help, const Labels& labels, double value) {
  if (Family* f = family(name, "gauge", help))
    f->samples += std::string(name) + labels_text(labels) + " " + number_text(value) + "\n";
}

void MetricsText::histogram(std::string_view name, std::string_view help, const Labels& labels,
                            const LatencyHistogram::Snapshot& s) {
  Family* f = family(name, "histogram", help);
  if (!f) return;
  const std::string n(name);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    cumulative += s.counts[i];
    const std::string le = "le=\"" + number_text(static_cast<double>(LatencyHistogram::kBoundsNs[i]) / 1e9) + "\"";
    f->samples += n + "_bucket" + labels_text(labels, le) + " " + std::to_string(cumulative) + "\n";
  }
  f->samples += n + "_bucket" + labels_text(labels, "le=\"+Inf\"") + " " + std::to_string(s.count) + "\n";
  f->samples += n + "_sum" + labels_text(labels) + " " + number_text(static_cast<double>(s.sum_ns) / 1e9) + "\n";
  f->samples += n + "_count" + labels_text(labels) + " " + std::to_string(s.count) + "\n";
}

std::string MetricsText::text() const {
  std::string out;
  for (const auto& f : families_) {
    out += "# HELP " + f.name + " " + escape(f.help, false) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    out += f.samples;
  }
  return out;
}

}  // namespace rpcie::metrics
