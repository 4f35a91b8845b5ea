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

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "config.hpp"
#include "exporter.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/log.hpp"
#include "rpcie/metrics_server.hpp"
#include "rpcie/process.hpp"
#include "rpcie/service_notify.hpp"

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

// The command line as given: read again on every reload, so that a reload builds the
// configuration the way start-up did (the file, then the flags over it).
struct Flags {
  std::string config_file, listen, provider, psk_file, access_log, data_path;
  std::vector<std::string> exports;
  std::optional<int> data_nice;
};

// Why a configuration could not be built, and the exit status that says so at start-up.
struct BuildError {
  std::string text;
  int code = 1;
};

std::optional<BuildError> config_build(const Flags& f, rpcie::dev::ExporterConfig& config) {
  if (!f.config_file.empty()) {
    auto r = rpcie::dev::config_file_apply(f.config_file, config);
    if (!r) return BuildError{r.error().message};
  }
  if (!f.listen.empty()) {
    auto a = rpcie::address_parse(f.listen, config.port);
    if (!a) return BuildError{a.error().message, 2};
    config.listen_host = a->first;
    config.port = a->second;
    config.listen_origin = "--listen";
  }
  if (!f.provider.empty()) {
    std::string why;
    auto p = rpcie::providers::provider_parse(f.provider, &why);
    if (!p) return BuildError{"--provider: " + why, 2};
    config.provider = *p;
  }
  if (!f.data_path.empty()) {
    auto choice = rpcie::data_path_choice_parse(f.data_path);
    if (!choice) return BuildError{"--data-path: " + choice.error().message, 2};
    config.data_path = *choice;
  }
  if (f.data_nice) config.data_nice = *f.data_nice;
  if (!f.psk_file.empty()) {
    config.psk_file = f.psk_file;
    config.psk_file_origin = "--psk-file";
  }
  if (!f.access_log.empty()) {
    config.access_log = f.access_log;
    config.access_log_origin = "--access-log";
  }
  if (config.psk_file.empty() && config.clients.empty()) {
    config.psk_file = rpcie::auth::kDefaultKeyPath;
    config.psk_file_origin = "the default shared key";
  }
  for (const auto& text : f.exports) {
    auto e = rpcie::dev::export_config_parse(text);
    if (!e) return BuildError{"--export: " + e.error().message, 2};
    config.exports.push_back(std::move(*e));
  }
  return std::nullopt;
}

std::string names(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& n : list) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// SIGHUP: the exports of the configuration file again. A configuration that does not build
// is logged with the text start-up would have printed, and the running one stays.
void reload(const Flags& flags, rpcie::dev::Exporter& exporter, rpcie::ServiceNotifier& notifier) {
  if (flags.config_file.empty()) {
    RPCIE_LOG_WARN("exportd", "SIGHUP: nothing to reload (no --config); the exports stay as they are");
    return;
  }
  notifier.reloading();
  rpcie::dev::ExporterConfig config;
  auto error = config_build(flags, config);
  auto outcome = error ? rpcie::Result<rpcie::dev::ExportTable::ReloadOutcome>(rpcie::fail(EINVAL, error->text))
                       : exporter.reload(config);
  if (!outcome) {
    RPCIE_LOG_ERROR("exportd", "reload of {} refused, the running configuration stays: {}", flags.config_file,
                    outcome.error().message);
  } else {
    const auto& o = *outcome;
    RPCIE_LOG_INFO("exportd", "reloaded {}: added [{}], replaced [{}], removed [{}], removed once detached [{}]",
                   flags.config_file, names(o.added), names(o.replaced), names(o.removed), names(o.retiring));
    if (!o.refused.empty())
      RPCIE_LOG_WARN("exportd",
                     "reload of {}: changed but attached, kept as they run until a reload after their "
                     "detach: [{}]",
                     flags.config_file, names(o.refused));
  }
  notifier.ready();
}

// What the service manager's status line says: the exports held now.
std::string status_text(const rpcie::dev::Exporter& exporter) {
  const auto c = exporter.counts();
  return fmt::format("serving {} export{}, {} attached", c.exports, c.exports == 1 ? "" : "s", c.attached);
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  // Before anything that can take a while (key files, backends). SIGHUP reloads.
  rpcie::daemon_signals_install();
  // A daemon's operators want attaches, detaches and lease lapses in the log: info unless
  // $RPCIE_LOG says otherwise.
  if (std::getenv("RPCIE_LOG") == nullptr) rpcie::log_level_set(rpcie::LogLevel::info);
  CLI::App app{"rpcie-exportd: export PCIe devices to rpcie clients over libfabric"};
  Flags flags;
  std::string metrics;  // not reloaded: the command line only
  app.add_option("--config", flags.config_file, "TOML configuration file (read again on SIGHUP)");
  app.add_option("--listen", flags.listen, "ADDR[:PORT] to listen on (default 0.0.0.0:7385)");
  app.add_option("--provider", flags.provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  app.add_option("--psk-file", flags.psk_file, "pre-shared key accepted from any client (default /etc/rpcie/psk)");
  app.add_option("--export", flags.exports, "NAME=BACKEND[,key=value...] (repeatable)");
  app.add_option("--access-log", flags.access_log, "append one line per MMIO access performed to FILE");
  app.add_option("--data-path", flags.data_path,
                 "sealed, open or auto: the data-path policy of exports that set none (default auto)");
  app.add_option("--data-nice", flags.data_nice,
                 "nice value (-20 to 19) of the threads serving attachments, -10 to put them ahead of batch work "
                 "on the same CPUs (default: the daemon's own)")
      ->check(CLI::Range(-20, 19));
  app.add_option("--metrics", metrics,
                 "ADDR:PORT or [IPV6]:PORT to serve Prometheus metrics on (http://ADDR:PORT/metrics; default: none)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  rpcie::dev::ExporterConfig config;
  if (auto error = config_build(flags, config)) return error_exit(error->text, error->code);
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
  auto notifier = rpcie::ServiceNotifier::from_environment();
  notifier.status(status_text(**exporter));
  notifier.ready();  // the socket listens: connections queue until the loop takes them
  (*exporter)->run(rpcie::stop_requested(), [&] {
    if (rpcie::reload_requested().exchange(false)) reload(flags, **exporter, notifier);
    notifier.status(status_text(**exporter));
    notifier.alive();  // the accept loop went round
  });
  notifier.stopping();
  metrics_server.reset();  // before the exporter it reads
  return 0;
}
