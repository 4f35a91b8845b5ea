// rpcie-exportd — exports PCIe functions (emulated or real) to rpcie clients over
// libfabric. See docs/rpcie-exportd.md.

#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "config.hpp"
#include "exporter.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/log.hpp"
#include "rpcie/metrics_server.hpp"
#include "rpcie/process.hpp"

namespace {

int error_exit(const std::string& text, int code = 1) {
  std::fprintf(stderr, "rpcie-exportd: error: %s\n", text.c_str());
  return code;
}

// Every connection holds a descriptor, pre-authentication ones included (up to
// preauth-max of them): take the hard limit rather than the usual soft 1024.
void descriptors_raise() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  r.rlim_cur = r.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &r);  // the soft limit stays as it was if refused
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  rpcie::stop_signals_install();  // before anything that can take a while (key files, backends)
  // A daemon's operators want attaches, detaches and lease lapses in the log: info unless
  // $RPCIE_LOG says otherwise.
  if (std::getenv("RPCIE_LOG") == nullptr) rpcie::log_level_set(rpcie::LogLevel::info);
  CLI::App app{"rpcie-exportd: export PCIe devices to rpcie clients over libfabric"};
  std::string config_file, listen, provider, psk_file, access_log, data_path, metrics;
  std::vector<std::string> exports;
  app.add_option("--config", config_file, "TOML configuration file");
  app.add_option("--listen", listen, "ADDR[:PORT] to listen on (default 0.0.0.0:7385)");
  app.add_option("--provider", provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  app.add_option("--psk-file", psk_file, "pre-shared key accepted from any client (default /etc/rpcie/psk)");
  app.add_option("--export", exports, "NAME=BACKEND[,key=value...] (repeatable)");
  app.add_option("--access-log", access_log, "append one line per MMIO access performed to FILE");
  app.add_option("--data-path", data_path,
                 "sealed, open or auto: the data-path policy of exports that set none (default auto)");
  app.add_option("--metrics", metrics,
                 "ADDR:PORT or [IPV6]:PORT to serve Prometheus metrics on (http://ADDR:PORT/metrics; default: none)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  rpcie::dev::ExporterConfig config;
  if (!config_file.empty()) {
    auto r = rpcie::dev::config_file_apply(config_file, config);
    if (!r) return error_exit(r.error().message);
  }
  if (!listen.empty()) {
    auto a = rpcie::address_parse(listen, config.port);
    if (!a) return error_exit(a.error().message, 2);
    config.listen_host = a->first;
    config.port = a->second;
  }
  if (!provider.empty()) {
    std::string why;
    auto p = rpcie::providers::provider_parse(provider, &why);
    if (!p) return error_exit("--provider: " + why, 2);
    config.provider = *p;
  }
  if (!data_path.empty()) {
    auto choice = rpcie::data_path_choice_parse(data_path);
    if (!choice) return error_exit("--data-path: " + choice.error().message, 2);
    config.data_path = *choice;
  }
  if (!listen.empty()) config.listen_origin = "--listen";
  if (!psk_file.empty()) {
    config.psk_file = psk_file;
    config.psk_file_origin = "--psk-file";
  }
  if (!access_log.empty()) {
    config.access_log = access_log;
    config.access_log_origin = "--access-log";
  }
  if (config.psk_file.empty() && config.clients.empty()) {
    config.psk_file = rpcie::auth::kDefaultKeyPath;
    config.psk_file_origin = "the default shared key";
  }
  for (const auto& text : exports) {
    auto e = rpcie::dev::export_config_parse(text);
    if (!e) return error_exit("--export: " + e.error().message, 2);
    config.exports.push_back(std::move(*e));
  }

  std::optional<std::pair<std::string, std::uint16_t>> metrics_address;
  if (!metrics.empty()) {
    auto m = rpcie::metrics::listen_address_parse(metrics);
    if (!m) return error_exit("--metrics: " + m.error().message, 2);
    metrics_address = *m;
  }

  descriptors_raise();
  auto exporter = rpcie::dev::Exporter::create(config);
  if (!exporter) return error_exit(exporter.error().describe());
  std::unique_ptr<rpcie::metrics::MetricsServer> metrics_server;
  if (metrics_address) {
    auto m = rpcie::metrics::MetricsServer::start(metrics_address->first, metrics_address->second,
                                                  [e = exporter->get()] { return e->metrics_text(); });
    if (!m) return error_exit("--metrics: " + m.error().describe());
    metrics_server = std::move(*m);
    std::fprintf(stderr, "rpcie-exportd: metrics on http://%s%s%s:%u/metrics\n",
                 metrics_address->first.find(':') != std::string::npos ? "[" : "", metrics_address->first.c_str(),
                 metrics_address->first.find(':') != std::string::npos ? "]" : "", metrics_server->port());
  }
  // The port line is what scripts wait for (port 0 picks a free one).
  std::fprintf(stderr, "rpcie-exportd: listening on %s:%u\n", config.listen_host.c_str(), (*exporter)->port());
  if (rpcie::stop_requested().load()) return 0;  // a signal during start-up
  (*exporter)->run(rpcie::stop_requested());
  metrics_server.reset();  // before the exporter it reads
  return 0;
}
