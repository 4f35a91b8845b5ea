// The Prometheus text exposition format (version 0.0.4), written: what the daemons' /metrics
// serve (metrics_server.hpp).
//
// A MetricsText collects samples in any order and writes them grouped by family (the format
// wants a family's samples together, after its one HELP and TYPE line), families in the order
// first added, samples in the order added.
//  - counter(): the family is NAME_total (the suffix is added: pass the name without it);
//    the value is an integer that never decreases (it restarts from 0 only with what it
//    counts, e.g. a new attachment).
//  - gauge(): NAME, any value.
//  - histogram(): NAME_bucket{...,le="B"} cumulative for every bound of a LatencyHistogram
//    in seconds, then le="+Inf", NAME_sum in seconds and NAME_count.
//  - Label values are escaped (backslash, double quote, newline), HELP text too (backslash,
//    newline). Names and label names are the caller's and must match
//    [a-zA-Z_:][a-zA-Z0-9_:]* (the daemons' are constants).
//  - A sample whose family was first added with another type or help is dropped (a
//    programming error, made harmless rather than an invalid exposition).
// Not thread-safe; build one per scrape.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rpcie/latency_histogram.hpp"

namespace rpcie::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// One counter of a table of them (MetricsText::counters).
struct Counter {
  const char* name;  // without _total
  const char* help;
  std::uint64_t value;
};

// `value` escaped for a label value between double quotes.
std::string label_escape(std::string_view value);
// A number as the format writes it: shortest round-trip decimal, NaN, +Inf, -Inf.
std::string number_text(double value);

class MetricsText {
 public:
  void counter(std::string_view name, std::string_view help, const Labels& labels, std::uint64_t value);
  // counter() of each, with the same labels.
  void counters(const Labels& labels, std::span<const Counter> list);
  void gauge(std::string_view name, std::string_view help, const Labels& labels, double value);
  void histogram(std::string_view name, std::string_view help, const Labels& labels,
                 const LatencyHistogram::Snapshot& s);
  // The exposition: every family, each ending in a newline.
  std::string text() const;

 private:
  struct Family {
    std::string name, type, help, samples;
  };
  // The family to append to; null when `name` exists with another type or help.
  Family* family(std::string_view name, std::string_view type, std::string_view help);
  std::vector<Family> families_;
};

}  // namespace rpcie::metrics
