// The Prometheus text format as MetricsText writes it: exact text, escaping, grouping.
#include <string>

#include <doctest/doctest.h>

#include "rpcie/metrics_text.hpp"

using rpcie::LatencyHistogram;
using rpcie::metrics::MetricsText;

TEST_CASE("label values escape backslash, double quote and newline, and nothing else") {
  CHECK(rpcie::metrics::label_escape("plain-name_1.x") == "plain-name_1.x");
  CHECK(rpcie::metrics::label_escape("a\\b") == "a\\\\b");
  CHECK(rpcie::metrics::label_escape("say \"hi\"") == "say \\\"hi\\\"");
  CHECK(rpcie::metrics::label_escape("two\nlines") == "two\\nlines");
  CHECK(rpcie::metrics::label_escape("tab\there caf\xc3\xa9") == "tab\there caf\xc3\xa9");
}

TEST_CASE("numbers are written shortest, with the format's names for the special values") {
  CHECK(rpcie::metrics::number_text(0) == "0");
  CHECK(rpcie::metrics::number_text(3) == "3");
  CHECK(rpcie::metrics::number_text(0.25) == "0.25");
  CHECK(rpcie::metrics::number_text(1e-6) == "1e-06");
  CHECK(rpcie::metrics::number_text(1.0 / 0.0) == "+Inf");
  CHECK(rpcie::metrics::number_text(-1.0 / 0.0) == "-Inf");
  CHECK(rpcie::metrics::number_text(0.0 / 0.0) == "NaN");
}

TEST_CASE("counters are NAME_total, grouped by family under one HELP and TYPE") {
  MetricsText m;
  m.counter("rpcie_x", "Things.", {{"device", "rpcie0"}}, 3);
  m.gauge("rpcie_up", "Up.", {}, 1);
  m.counter("rpcie_x", "Things.", {{"device", "a\"b\\c\nd"}}, 4);
  m.gauge("rpcie_x_total", "Another type under a counter's name.", {}, 9);  // dropped
  CHECK(m.text() ==
        "# HELP rpcie_x_total Things.\n"
        "# TYPE rpcie_x_total counter\n"
        "rpcie_x_total{device=\"rpcie0\"} 3\n"
        "rpcie_x_total{device=\"a\\\"b\\\\c\\nd\"} 4\n"
        "# HELP rpcie_up Up.\n"
        "# TYPE rpcie_up gauge\n"
        "rpcie_up 1\n");
}

TEST_CASE("HELP text escapes backslash and newline") {
  MetricsText m;
  m.gauge("rpcie_g", "a\\b\nc \"q\"", {}, 0.5);
  CHECK(m.text() == "# HELP rpcie_g a\\\\b\\nc \"q\"\n# TYPE rpcie_g gauge\nrpcie_g 0.5\n");
}

TEST_CASE("a histogram is cumulative buckets in seconds, +Inf, _sum in seconds and _count") {
  LatencyHistogram h;
  h.record(std::chrono::microseconds(1));
  h.record(std::chrono::microseconds(3));
  h.record(std::chrono::microseconds(3));
  h.record(std::chrono::seconds(11));
  MetricsText m;
  m.histogram("rpcie_lat_seconds", "Latency.", {{"device", "rpcie0"}, {"op", "read"}}, h.snapshot());
  const std::string lb = "rpcie_lat_seconds_bucket{device=\"rpcie0\",op=\"read\",le=\"";
  std::string want = "# HELP rpcie_lat_seconds Latency.\n# TYPE rpcie_lat_seconds histogram\n";
  const char* les[] = {"1e-06", "2e-06", "5e-06", "1e-05", "2e-05", "5e-05", "1e-04", "2e-04",
                       "5e-04", "0.001", "0.002", "0.005", "0.01",  "0.02",  "0.05",  "0.1",
                       "0.2",   "0.5",   "1",     "2",     "5",     "10"};
  for (int i = 0; i < 22; ++i) want += lb + les[i] + "\"} " + (i == 0 ? "1" : i == 1 ? "1" : "3") + "\n";
  want += lb + "+Inf\"} 4\n";
  want += "rpcie_lat_seconds_sum{device=\"rpcie0\",op=\"read\"} 11.000007\n";
  want += "rpcie_lat_seconds_count{device=\"rpcie0\",op=\"read\"} 4\n";
  CHECK(m.text() == want);
}

TEST_CASE("no samples, no text") { CHECK(MetricsText().text().empty()); }
