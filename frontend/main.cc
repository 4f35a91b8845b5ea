// rpcie-hostd — the compute side: remote devices as files (a FUSE tree in sysfs layout,
// /dev/rpcieN links), attached and detached through a control socket by the rpcie CLI.
// See docs/rpcie-hostd.md.

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "attach_manager.hpp"
#include "control_server.hpp"
#include "dev_links.hpp"
#include "hostd_config.hpp"
#include "remote_device.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/client.hpp"
#include "rpcie/control.hpp"
#include "rpcie/log.hpp"
#include "rpcie/metrics_server.hpp"
#include "rpcie/process.hpp"
#include "rpcie/providers/choice.hpp"
#include "rpcie/service_notify.hpp"
#include "rpcie/units.hpp"
#include "service_loop.hpp"
#include "stale_state.hpp"
#include "tree.hpp"

namespace {

using namespace rpcie;
using nlohmann::json;

int error_exit(const std::string& text, int code = 1) {
  std::fprintf(stderr, "rpcie-hostd: error: %s\n", text.c_str());
  return code;
}

std::optional<gid_t> group_parse(const std::string& text) {
  if (text.empty()) return 0;
  if (text.find_first_not_of("0123456789") == std::string::npos) {
    errno = 0;
    const unsigned long id = std::strtoul(text.c_str(), nullptr, 10);
    if (errno != 0 || id > std::numeric_limits<gid_t>::max()) return std::nullopt;
    return static_cast<gid_t>(id);
  }
  if (const group* g = ::getgrnam(text.c_str())) return g->gr_gid;
  return std::nullopt;
}

// Forks into the background; the parent exits 0 once the child reports ready (mounted,
// control socket up), 1 if it fails first. Returns the fd to report on (-1: foreground).
int background_start() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid > 0) {
    ::close(p[1]);
    char ok = 0;
    pollfd w{p[0], POLLIN, 0};
    if (::poll(&w, 1, 60000) == 1 && ::read(p[0], &ok, 1) == 1 && ok == '1') std::_Exit(0);
    std::_Exit(1);
  }
  ::close(p[0]);
  ::setsid();
  return p[1];
}

void background_ready(int fd) {
  if (fd < 0) return;
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
  (void)::write(fd, "1", 1);
  ::close(fd);
}

// What the command line sets.
struct Options {
  hostd::TreeOptions tree;
  hostd::AttachContext context;
  hostd::AttachPolicy policy;
  std::string control_path;
  std::string state_path = hostd::kStateFileDefault;
  bool foreground = false;
  std::optional<std::pair<std::string, std::uint16_t>> metrics;  // --metrics ADDR:PORT
  hostd::ConfigSource config_source;                             // --config, or the default file and directory
  hostd::HostdConfig config;                                     // what they hold
};

// The options' texts, before they are checked and made values.
struct OptionTexts {
  std::string psk_file = auth::kDefaultKeyPath, provider, timeout = "5", attach_timeout = "10", window = "16M",
              window_max = "256M", group, mode = "0660", name, data_path = "auto", splice_writes = "on";
  std::vector<std::string> remotes;
  std::string metrics;
};

// The configuration's top-level keys applied where the command line did not set the option.
void config_options_apply(const CLI::App& app, const hostd::HostdConfig& config, Options& o, OptionTexts& t) {
  const std::map<std::string, std::string*> texts{
      {"mount", &o.tree.mount},
      {"control", &o.control_path},
      {"psk-file", &t.psk_file},
      {"provider", &t.provider},
      {"timeout", &t.timeout},
      {"attach-timeout", &t.attach_timeout},
      {"data-path", &t.data_path},
      {"dma-window", &t.window},
      {"max-dma-window", &t.window_max},
      {"group", &t.group},
      {"mode", &t.mode},
      {"name", &t.name},
      {"dev-dir", &o.tree.dev_dir},
      {"state-file", &o.state_path},
      {"metrics", &t.metrics},
      {"splice-writes", &t.splice_writes},
  };
  for (const auto& [key, setting] : config.options) {
    if (app.count("--" + key) > 0) continue;  // the command line overrides the file
    if (key == "allow-remote")
      t.remotes = setting.values;
    else
      *texts.at(key) = setting.values.at(0);
  }
}

// A checked option's error: about a value the configuration gave (the message starts with
// its "--KEY"), it is the file's, at its line, with a bad configuration's status (1); about
// the command line's, a usage error (2).
int option_error_exit(const CLI::App& app, const hostd::HostdConfig& config, const std::string& text) {
  const std::string key = text.starts_with("--") ? text.substr(2, text.find_first_of(": ", 2) - 2) : "";
  auto it = config.options.find(key);
  if (it != config.options.end() && app.count("--" + key) == 0)
    return error_exit(it->second.origin + ": " + text.substr(2));
  return error_exit(text, 2);
}

// The flags' texts made values; an error message for the first that is wrong.
// --dma-window, --max-dma-window and --allow-remote: what attach requests may ask for.
std::optional<std::string> policy_check(hostd::AttachPolicy& policy, const std::string& window,
                                        const std::string& window_max, const std::vector<std::string>& remotes) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  auto w = size_parse(window);
  if (!w || *w == 0 || *w % page != 0) return "--dma-window: expected a size in pages (e.g. 16M), got '" + window + "'";
  auto m = size_parse(window_max);
  if (!m || *m == 0 || *m % page != 0)
    return "--max-dma-window: expected a size in pages (e.g. 256M), got '" + window_max + "'";
  if (*w > *m) return "--dma-window " + window + " is over --max-dma-window " + window_max;
  policy.window_default = *w;
  policy.window_max = *m;
  for (const auto& text : remotes) {
    auto a = address_parse(text, kDefaultPort);
    if (!a) return "--allow-remote: " + a.error().message;
    if (auto ok = hostd::host_name_check(a->first); !ok) return "--allow-remote: " + ok.error().message;
    policy.remotes.push_back(*a);
  }
  return std::nullopt;
}

std::optional<std::string> options_check(Options& o, const std::string& timeout, const std::string& attach_timeout,
                                         const std::string& group, const std::string& mode, const std::string& provider,
                                         const std::string& data_path) {
  auto t = duration_parse(timeout);
  if (!t || *t < std::chrono::milliseconds(100)) return "--timeout: expected seconds >= 0.1, got '" + timeout + "'";
  o.tree.timeout = o.context.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*t);
  auto at = duration_parse(attach_timeout);
  if (!at || *at < std::chrono::milliseconds(100))
    return "--attach-timeout: expected seconds >= 0.1, got '" + attach_timeout + "'";
  o.context.attach_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*at);
  auto g = group_parse(group);
  if (!g) return "--group: no group '" + group + "'";
  char* end = nullptr;
  const unsigned long m = std::strtoul(mode.c_str(), &end, 8);
  if (mode.empty() || *end != 0 || m > 0777) return "--mode: expected octal like 0660, got '" + mode + "'";
  o.tree.group = o.context.group = *g;
  o.tree.mode = o.context.mode = static_cast<mode_t>(m);
  if (!provider.empty()) {
    std::string why;
    auto p = providers::provider_parse(provider, &why);
    if (!p) return "--provider: " + why;
    o.context.client.provider = *p;
  }
  auto choice = data_path_choice_parse(data_path);
  if (!choice) return "--data-path: " + choice.error().message;
  o.context.client.data_path = *choice;
  return std::nullopt;
}

// Fills `o` from the command line; an exit status if the program is to end (help, bad usage).
std::optional<int> options_parse(int argc, char** argv, Options& o) {
  CLI::App app{"rpcie-hostd: remote PCIe devices as files (FUSE, sysfs layout)"};
  OptionTexts t;
  std::string config_path;
  app.add_option("--config", config_path,
                 "configuration file (default /etc/rpcie/hostd.toml, then /etc/rpcie/hostd.d/*.toml, if present)");
  app.add_option("--mount", o.tree.mount, "mount point (default /run/rpcie)");
  app.add_option("--control", o.control_path, "control socket (default $RPCIE_CONTROL, else /run/rpcie.sock)");
  app.add_option("--psk-file", t.psk_file, "pre-shared key (default /etc/rpcie/psk)");
  app.add_option("--provider", t.provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  app.add_option("--timeout", t.timeout, "bound on every operation, in seconds (default 5; also 500ms)");
  app.add_option("--attach-timeout", t.attach_timeout, "bound on one attach or reconnect, in seconds (default 10)");
  app.add_option("--data-path", t.data_path,
                 "sealed, open or auto: the data path attaches ask for unless they say (default auto)");
  app.add_option("--dma-window", t.window, "default DMA window size per attachment (default 16M)");
  app.add_option("--max-dma-window", t.window_max, "largest DMA window an attach may ask for (default 256M)");
  app.add_option("--allow-remote", t.remotes,
                 "HOST[:PORT] non-root users may attach from (repeatable; default: any; root: any)");
  app.add_option("--group", t.group, "group that may use the devices and the control socket");
  app.add_option("--mode", t.mode, "mode of device files, DMA windows and the control socket (default 0660)");
  app.add_option("--name", t.name, "client name the exporters know our key by (default: host name)");
  app.add_option("--dev-dir", o.tree.dev_dir, "where rpcieN links go (default /dev)");
  app.add_option("--state-file", o.state_path,
                 "the attachments held, re-attached at start (default /run/rpcie-hostd-state.json; '' for none)");
  app.add_option("--metrics", t.metrics,
                 "ADDR:PORT or [IPV6]:PORT to serve Prometheus metrics on (http://ADDR:PORT/metrics; default: none)");
  app.add_option("--splice-writes", t.splice_writes,
                 "on or off: memory-BAR writes spliced from FUSE, one copy fewer, where a pipe holds a request "
                 "(default on; rpcie-hostd(8), TUNING)");
  app.add_flag("--foreground", o.foreground, "stay in the foreground (default: background once mounted)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  o.config_source = hostd::config_source_of(config_path);
  auto config = hostd::hostd_config_load(o.config_source);
  if (!config) return error_exit(config.error().message);
  o.config = std::move(*config);
  config_options_apply(app, o.config, o, t);
  // The same resolution as the rpcie CLI's, so that both find one socket.
  o.control_path = control::socket_path_resolve(o.control_path);
  if (auto wrong = options_check(o, t.timeout, t.attach_timeout, t.group, t.mode, t.provider, t.data_path))
    return option_error_exit(app, o.config, *wrong);
  if (auto wrong = policy_check(o.policy, t.window, t.window_max, t.remotes))
    return option_error_exit(app, o.config, *wrong);
  if (t.splice_writes != "on" && t.splice_writes != "off")
    return option_error_exit(app, o.config, "--splice-writes: expected on or off, got '" + t.splice_writes + "'");
  o.tree.splice_writes = t.splice_writes == "on";
  for (const auto& c : o.config.attaches)
    if (auto p = hostd::configured_params(c, o.policy); !p) return error_exit(p.error().message);
  if (!t.metrics.empty()) {
    auto m = metrics::listen_address_parse(t.metrics);
    if (!m) return option_error_exit(app, o.config, "--metrics: " + m.error().message);
    o.metrics = *m;
  }
  auto key = auth::key_load(t.psk_file);
  if (!key) return error_exit(key.error().describe());
  o.context.client.key = std::make_shared<const auth::Key>(std::move(*key));
  o.context.client.name = t.name.empty() ? host_name() : t.name;
  // Drivers wait for interrupts in poll() on events files, outside the client API: its
  // background receiver must be back on duty soon after their last register access.
  // Measured (docs/performance.md): interrupt to poll() wake-up ~2 ms with the API default
  // of 2 ms, 0.2-0.3 ms with 250 us; a 4-byte register pread +5 vs +7 us over the API.
  o.context.client.receiver_quiet = std::chrono::microseconds(250);
  // Programs' register stores (mapped BARs, resource files) are posted writes as on PCIe:
  // one the device refuses is dropped and counted, never charged to the next access.
  o.context.client.posted_errors = client::ClientOptions::PostedErrors::counted;
  // hostd's waiters (FUSE workers, dispatchers) wait for the programs it serves: when those
  // want the CPU, they get it (docs/performance.md, "A spinner that yields while contended").
  o.context.client.spin_yield = true;
  return std::nullopt;
}

// The one point where hostd is ready: mounted, control socket up, the state file's
// re-attaches (and any configured attaches) started.
void service_ready(ServiceNotifier& notifier) { notifier.ready(); }

}  // namespace

int main(int argc, char** argv) {
  signals_init();
  // Stop signals stay blocked in every thread but the FUSE loop's (Tree::run), SIGHUP in
  // every thread (ServiceLoop takes it); set before any thread exists, so that all inherit it.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  if (std::getenv("RPCIE_LOG") == nullptr) log_level_set(LogLevel::info);
  Options o;
  if (auto rc = options_parse(argc, argv, o)) return *rc;

  const int ready_fd = o.foreground ? -1 : background_start();
  auto stale = hostd::stale_state_remove({o.tree.mount, o.tree.dev_dir, o.context.shm_dir});
  if (!stale) return error_exit(stale.error().describe());
  auto tree = hostd::Tree::mount(o.tree);
  if (!tree) return error_exit(tree.error().describe());
  hostd::AttachManager manager(o.context, o.policy, **tree, o.state_path);
  manager.config_source_set(o.config_source);
  auto control =
      hostd::ControlServer::start(o.control_path, o.tree.group, o.tree.mode,
                                  [&manager](const json& r, const ucred& peer) { return manager.request(r, peer); });
  if (!control) return error_exit(control.error().describe());
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (o.metrics) {
    auto m =
        metrics::MetricsServer::start(o.metrics->first, o.metrics->second, [&manager] { return manager.metrics(); });
    if (!m) return error_exit("--metrics: " + m.error().describe());
    metrics_server = std::move(*m);
  }
  std::fprintf(stderr, "rpcie-hostd: mounted %s, control %s\n", o.tree.mount.c_str(), o.control_path.c_str());
  // The state file's attachments, then the configuration's: in the background (the
  // exporters may not be reachable yet), before hostd reports ready.
  manager.restore_start(o.config.attaches);
  background_ready(ready_fd);
  // Attaches that start with the daemon are under way (above); the service manager is told
  // READY=1 below.
  auto notifier = ServiceNotifier::from_environment();
  auto service = hostd::ServiceLoop::start(notifier, o.control_path, [&manager] {
    // SIGHUP: new [[attach]] entries of the configuration are attached (in the background).
    auto added = manager.config_reload();
    if (!added)
      RPCIE_LOG_WARN("hostd", "SIGHUP: the configuration stays as it was: {}", added.error().describe());
    else
      RPCIE_LOG_INFO("hostd", "SIGHUP: configuration reloaded, {} new attach entr{}", *added,
                     *added == 1 ? "y" : "ies");
  });
  if (!service) return error_exit(service.error().describe());
  service_ready(notifier);
  const int rc = (*tree)->run();
  notifier.stopping();
  service->reset();
  RPCIE_LOG_INFO("hostd", "stopping: detaching every device");
  control->reset();        // no new requests
  metrics_server.reset();  // no scrape of devices going away
  manager.restore_stop();
  tree->reset();  // detach all, unmount, remove links
  return rc == 0 ? 0 : 1;
}
