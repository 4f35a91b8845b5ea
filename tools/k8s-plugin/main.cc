// rpcie-k8s-plugin: a Kubernetes device plugin (API v1beta1) that hands out the remote
// devices of a pool as the extended resource rpcie.io/<name>, attaching them through
// rpcie-hostd when the kubelet allocates them (docs/rpcie-k8s-plugin.md).
//
// The main thread serves the loop: every check-interval one round of checks (allocator.hpp)
// and a look whether the kubelet restarted (our socket removed: serve anew, register again);
// SIGTERM / SIGINT end it (sigtimedwait: signals are blocked before any thread starts).
// gRPC's threads serve the kubelet's calls.
#include <csignal>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "allocator.hpp"
#include "config.hpp"
#include "plugin_server.hpp"
#include "plugin_service.hpp"
#include "pod_resources.hpp"
#include "registration.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/control.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"

namespace {

using namespace rpcie::k8s;

struct Options {
  std::string config = kDefaultConfig;
  std::string kubelet_dir = kDefaultKubeletDir;
  std::string pod_resources = kDefaultPodResources;
  std::string log_level = "info";
};

int error_exit(const std::string& text, int code = 1) {
  std::fprintf(stderr, "rpcie-k8s-plugin: error: %s\n", text.c_str());
  return code;
}

rpcie::Result<AllocatorOptions> allocator_options(const PluginConfig& c, const Options& o) {
  AllocatorOptions a;
  a.control = rpcie::control::socket_path_resolve(c.control);
  a.pod_resources = o.pod_resources;
  a.resource_name = c.resource_name();
  a.release_grace = c.release_grace;
  a.call_timeout = std::min(c.check_interval * 2, std::chrono::milliseconds(5000));
  RPCIE_TRY_ASSIGN(auto key, rpcie::auth::key_load(c.psk_file));
  a.probe.key = std::make_shared<const rpcie::auth::Key>(std::move(key));
  a.probe.name = c.client_name;
  return a;
}

// Serves and registers; false (logged) when either fails: the loop tries again.
bool serve_and_register(PluginServer& server, const Options& o, const PluginConfig& c) {
  server.shutdown(std::chrono::seconds(1));
  if (auto s = server.start(); !s) {
    rpcie::log(rpcie::LogLevel::error, kLog, "{}", s.error().describe());
    return false;
  }
  const std::string endpoint = server.socket_path().substr(o.kubelet_dir.size() + 1);
  auto r =
      kubelet_register(o.kubelet_dir, endpoint, c.resource_name(), rpcie::Deadline::after(std::chrono::seconds(5)));
  if (!r) {
    rpcie::log(rpcie::LogLevel::warn, kLog, "{} (trying again)", r.error().describe());
    return false;
  }
  rpcie::log(rpcie::LogLevel::info, kLog, "registered {} ({} devices) with the kubelet, serving {}", c.resource_name(),
             c.devices.size(), server.socket_path());
  return true;
}

// Until SIGTERM or SIGINT: the checks, and serving again when the kubelet restarted.
void serve_loop(PluginServer& server, Allocator& allocator, const Options& o, const PluginConfig& c,
                const sigset_t& stop_set) {
  bool registered = serve_and_register(server, o, c);
  for (;;) {
    const auto ms = c.check_interval.count();
    const timespec wait{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
    const int sig = ::sigtimedwait(&stop_set, nullptr, &wait);
    if (sig > 0) {
      rpcie::log(rpcie::LogLevel::info, kLog, "signal {}: stopping (attachments stay for their containers)", sig);
      return;
    }
    if (!registered || !server.socket_present()) {
      if (registered) rpcie::log(rpcie::LogLevel::info, kLog, "our socket is gone (kubelet restart): serving anew");
      registered = serve_and_register(server, o, c);
    }
    allocator.check();
  }
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  CLI::App app{"rpcie-k8s-plugin: remote PCIe devices of rpcie as a Kubernetes extended resource"};
  Options o;
  app.add_option("--config", o.config, "configuration file (default /etc/rpcie/k8s-plugin.toml)");
  app.add_option("--kubelet-dir", o.kubelet_dir,
                 "the kubelet's device-plugins directory (default /var/lib/kubelet/device-plugins)");
  app.add_option("--pod-resources", o.pod_resources,
                 "the kubelet's pod resources socket; empty: never release devices (default "
                 "/var/lib/kubelet/pod-resources/kubelet.sock)");
  app.add_option("--log-level", o.log_level, "error, warn, info, debug (default info)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  rpcie::LogLevel level;
  if (!rpcie::log_level_parse(o.log_level, &level)) return error_exit("--log-level: unknown '" + o.log_level + "'", 2);
  rpcie::log_level_set(level);
  while (o.kubelet_dir.size() > 1 && o.kubelet_dir.back() == '/') o.kubelet_dir.pop_back();

  auto config = config_load(o.config);
  if (!config) return error_exit(config.error().message);
  auto options = allocator_options(*config, o);
  if (!options) return error_exit(options.error().describe());

  // Before any thread starts, so that only sigtimedwait() takes them.
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGTERM);
  sigaddset(&stop_set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);

  Pool pool(config->devices);
  Allocator allocator(pool, std::move(*options));
  DevicePluginService service(pool, allocator);
  allocator.adopt();
  allocator.check();  // the first list the kubelet sees has checked health
  PluginServer server(o.kubelet_dir + "/rpcie-" + config->resource + ".sock", service);
  serve_loop(server, allocator, o, *config, stop_set);
  pool.stop();
  server.shutdown(std::chrono::seconds(2));
  return 0;
}
