// rpcie-hostd — the compute side: remote devices as files (a FUSE tree in sysfs layout,
// /dev/rpcieN links), attached and detached through a control socket by the rpcie CLI.
// See docs/rpcie-hostd.md.

#include <cstdio>
#include <cstdlib>
#include <limits>
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
#include "remote_device.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/client.hpp"
#include "rpcie/control.hpp"
#include "rpcie/log.hpp"
#include "rpcie/metrics_server.hpp"
#include "rpcie/process.hpp"
#include "rpcie/providers/choice.hpp"
#include "rpcie/units.hpp"
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
};

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
  std::string psk_file = auth::kDefaultKeyPath, provider, timeout = "5", attach_timeout = "10", window = "16M",
              window_max = "256M", group, mode = "0660", name, data_path = "auto", metrics_address;
  std::vector<std::string> remotes;
  app.add_option("--mount", o.tree.mount, "mount point (default /run/rpcie)");
  app.add_option("--control", o.control_path, "control socket (default $RPCIE_CONTROL, else /run/rpcie.sock)");
  app.add_option("--psk-file", psk_file, "pre-shared key (default /etc/rpcie/psk)");
  app.add_option("--provider", provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  app.add_option("--timeout", timeout, "bound on every operation, in seconds (default 5; also 500ms)");
  app.add_option("--attach-timeout", attach_timeout, "bound on one attach or reconnect, in seconds (default 10)");
  app.add_option("--data-path", data_path,
                 "sealed, open or auto: the data path attaches ask for unless they say (default auto)");
  app.add_option("--dma-window", window, "default DMA window size per attachment (default 16M)");
  app.add_option("--max-dma-window", window_max, "largest DMA window an attach may ask for (default 256M)");
  app.add_option("--allow-remote", remotes,
                 "HOST[:PORT] non-root users may attach from (repeatable; default: any; root: any)");
  app.add_option("--group", group, "group that may use the devices and the control socket");
  app.add_option("--mode", mode, "mode of device files, DMA windows and the control socket (default 0660)");
  app.add_option("--name", name, "client name the exporters know our key by (default: host name)");
  app.add_option("--dev-dir", o.tree.dev_dir, "where rpcieN links go (default /dev)");
  app.add_option("--state-file", o.state_path,
                 "the attachments held, re-attached at start (default /run/rpcie-hostd-state.json; '' for none)");
  app.add_option("--metrics", metrics_address,
                 "ADDR:PORT or [IPV6]:PORT to serve Prometheus metrics on (http://ADDR:PORT/metrics; default: none)");
  app.add_flag("--foreground", o.foreground, "stay in the foreground (default: background once mounted)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // The same resolution as the rpcie CLI's, so that both find one socket.
  o.control_path = control::socket_path_resolve(o.control_path);
  if (auto wrong = options_check(o, timeout, attach_timeout, group, mode, provider, data_path))
    return error_exit(*wrong, 2);
  if (auto wrong = policy_check(o.policy, window, window_max, remotes)) return error_exit(*wrong, 2);
  if (!metrics_address.empty()) {
    auto m = metrics::listen_address_parse(metrics_address);
    if (!m) return error_exit("--metrics: " + m.error().message, 2);
    o.metrics = *m;
  }
  auto key = auth::key_load(psk_file);
  if (!key) return error_exit(key.error().describe());
  o.context.client.key = std::make_shared<const auth::Key>(std::move(*key));
  o.context.client.name = name.empty() ? host_name() : name;
  // Drivers wait for interrupts in poll() on events files, outside the client API: its
  // background receiver must be back on duty soon after their last register access.
  // Measured (docs/performance.md): interrupt to poll() wake-up ~2 ms with the API default
  // of 2 ms, 0.2-0.3 ms with 250 us; a 4-byte register pread +5 vs +7 us over the API.
  o.context.client.receiver_quiet = std::chrono::microseconds(250);
  // Programs' register stores (mapped BARs, resource files) are posted writes as on PCIe:
  // one the device refuses is dropped and counted, never charged to the next access.
  o.context.client.posted_errors = client::ClientOptions::PostedErrors::counted;
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  signals_init();
  // Stop signals stay blocked in every thread but the FUSE loop's (Tree::run); set before
  // any thread exists, so that all inherit it.
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
  background_ready(ready_fd);
  manager.restore_start();  // in the background: the exporters may not be reachable yet
  const int rc = (*tree)->run();
  RPCIE_LOG_INFO("hostd", "stopping: detaching every device");
  control->reset();        // no new requests
  metrics_server.reset();  // no scrape of devices going away
  manager.restore_stop();
  tree->reset();  // detach all, unmount, remove links
  return rc == 0 ? 0 : 1;
}
