// rpcie-hostd — the compute side: remote devices as files (a FUSE tree in sysfs layout,
// /dev/rpcieN links), attached and detached through a control socket by the rpcie CLI.
// See docs/rpcie-hostd.md.

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "control_server.hpp"
#include "remote_device.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/control.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"
#include "rpcie/units.hpp"
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

// DMA windows of a hostd that died without cleaning up (rpcie-dma-<pid>-...). Files with
// this process's PID are stale too: it has made no window yet, and a hostd restarted under
// the same PID (a container's PID 1) would otherwise find its window names taken (EEXIST).
void windows_stale_remove(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (auto* e = ::readdir(d)) {
    unsigned long pid = 0;
    if (std::sscanf(e->d_name, "rpcie-dma-%lu-", &pid) != 1 || pid == 0) continue;
    const bool ours = static_cast<pid_t>(pid) == ::getpid();
    if (!ours && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;
    const std::string path = dir + "/" + e->d_name;
    RPCIE_LOG_INFO("hostd", "removing {} (its hostd is gone)", path);
    ::unlink(path.c_str());
  }
  ::closedir(d);
}

struct Hostd {
  hostd::AttachContext context;
  std::size_t window_default = 16u << 20;
  hostd::Tree* tree = nullptr;

  json attach(const json& r) {
    if (!r.contains("host") || !r["host"].is_string() || !r.contains("export") || !r["export"].is_string())
      return {{"error", "attach needs \"host\" and \"export\""}, {"errno", EINVAL}};
    hostd::AttachParams p;
    p.host = r["host"].get<std::string>();
    p.export_name = r["export"].get<std::string>();
    p.port = r.value("port", kDefaultPort);
    p.window_size = r.value("dma_window", static_cast<std::uint64_t>(window_default));
    if (p.port == 0) return {{"error", "port 0"}, {"errno", EINVAL}};
    const unsigned index = tree->index_reserve();
    auto dev = hostd::RemoteDevice::attach(p, context, index, Deadline::after(context.timeout));
    if (!dev) {
      tree->index_release(index);
      return control::error_answer(dev.error());
    }
    auto pub = tree->publish(*dev);
    if (!pub) {
      (void)(*dev)->detach(Deadline::after(context.timeout));
      tree->index_release(index);
      return control::error_answer(pub.error());
    }
    return {{"device", pub->name}, {"path", pub->path}, {"sysfs", pub->sysfs}};
  }

  json detach(const json& r) {
    std::vector<std::string> names;
    if (r.value("all", false)) {
      names = tree->names();
    } else if (r.contains("device") && r["device"].is_string()) {
      names.push_back(r["device"].get<std::string>());
    } else {
      return {{"error", "detach needs \"device\" or \"all\""}, {"errno", EINVAL}};
    }
    json done = json::array();
    std::string failures;
    for (const auto& n : names) {
      auto w = tree->withdraw(n, Deadline::after(context.timeout));
      // The device is gone from the tree either way; a failed goodbye is only reported.
      if (w || w.error().code != ENOENT) done.push_back(n);
      if (!w) failures += (failures.empty() ? "" : "; ") + n + ": " + w.error().message;
    }
    if (done.empty() && !failures.empty()) return {{"error", failures}, {"errno", ENOENT}};
    json out{{"detached", done}};
    if (!failures.empty()) out["warning"] = failures;
    return out;
  }

  json status() const {
    json list = json::array();
    for (const auto& v : tree->devices()) {
      const auto s = v.device->status();
      const auto& p = v.device->params();
      const auto& d = v.device->desc();
      char id[16];
      std::snprintf(id, sizeof id, "%04x:%04x", d.vendor, d.device);
      json e{{"device", v.name},
             {"path", v.path},
             {"sysfs", v.sysfs},
             {"exporter", p.host + ":" + std::to_string(p.port)},
             {"export", p.export_name},
             {"id", id},
             {"state", hostd::link_state_name(s.state)},
             {"provider", s.provider},
             {"generation", s.generation},
             {"losses", s.losses},
             {"dma_window", p.window_size},
             {"dma", v.device->window_path()},
             {"counters",
              {{"config_reads", s.stats.config_reads},
               {"config_writes", s.stats.config_writes},
               {"mmio_reads", s.stats.mmio_reads},
               {"mmio_writes", s.stats.mmio_writes},
               {"bar_bytes_read", s.stats.bar_bytes_read},
               {"bar_bytes_written", s.stats.bar_bytes_written},
               {"interrupts", s.stats.interrupts}}}};
      if (!s.last_error.empty()) e["error"] = s.last_error;
      list.push_back(std::move(e));
    }
    return {{"attachments", list}};
  }

  json handle(const json& r) {
    const auto op = r["op"].get<std::string>();
    if (op == "attach") return attach(r);
    if (op == "detach") return detach(r);
    if (op == "status") return status();
    return {{"error", "unknown op '" + op + "'"}, {"errno", EINVAL}};
  }
};

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
  CLI::App app{"rpcie-hostd: remote PCIe devices as files (FUSE, sysfs layout)"};
  hostd::TreeOptions tree_options;
  std::string control_path, psk_file = auth::kDefaultKeyPath, provider, timeout = "5", window = "16M", group,
                            mode = "0660", name;
  bool foreground = false;
  app.add_option("--mount", tree_options.mount, "mount point (default /run/rpcie)");
  app.add_option("--control", control_path, "control socket (default $RPCIE_CONTROL, else /run/rpcie.sock)");
  app.add_option("--psk-file", psk_file, "pre-shared key (default /etc/rpcie/psk)");
  app.add_option("--provider", provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  app.add_option("--timeout", timeout, "bound on every operation, in seconds (default 5; also 500ms)");
  app.add_option("--dma-window", window, "default DMA window size per attachment (default 16M)");
  app.add_option("--group", group, "group that may use the devices and the control socket");
  app.add_option("--mode", mode, "mode of device files, DMA windows and the control socket (default 0660)");
  app.add_option("--name", name, "client name the exporters know our key by (default: host name)");
  app.add_option("--dev-dir", tree_options.dev_dir, "where rpcieN links go (default /dev)");
  app.add_flag("--foreground", foreground, "stay in the foreground (default: background once mounted)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // The same resolution as the rpcie CLI's, so that both find one socket.
  control_path = control::socket_path_resolve(control_path);
  Hostd h;
  auto t = duration_parse(timeout);
  if (!t || *t < std::chrono::milliseconds(100))
    return error_exit("--timeout: expected seconds >= 0.1, got '" + timeout + "'", 2);
  h.context.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*t);
  tree_options.timeout = h.context.timeout;
  auto w = size_parse(window);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (!w || *w == 0 || *w % page != 0)
    return error_exit("--dma-window: expected a size in pages (e.g. 16M), got '" + window + "'", 2);
  h.window_default = *w;
  auto g = group_parse(group);
  if (!g) return error_exit("--group: no group '" + group + "'", 2);
  char* end = nullptr;
  const unsigned long m = std::strtoul(mode.c_str(), &end, 8);
  if (mode.empty() || *end != 0 || m > 0777)
    return error_exit("--mode: expected octal like 0660, got '" + mode + "'", 2);
  tree_options.group = h.context.group = *g;
  tree_options.mode = h.context.mode = static_cast<mode_t>(m);
  if (!provider.empty()) {
    std::string why;
    auto p = providers::provider_parse(provider, &why);
    if (!p) return error_exit("--provider: " + why, 2);
    h.context.client.provider = *p;
  }
  auto key = auth::key_load(psk_file);
  if (!key) return error_exit(key.error().describe());
  h.context.client.key = std::make_shared<const auth::Key>(std::move(*key));
  h.context.client.name = name.empty() ? host_name() : name;
  // Drivers wait for interrupts in poll() on events files, outside the client API: its
  // background receiver must be back on duty soon after their last register access.
  // Measured (docs/performance.md): interrupt to poll() wake-up ~2 ms with the API default
  // of 2 ms, 0.2-0.3 ms with 250 us; a 4-byte register pread +5 vs +7 us over the API.
  h.context.client.receiver_quiet = std::chrono::microseconds(250);

  const int ready_fd = foreground ? -1 : background_start();
  auto tree = hostd::Tree::mount(tree_options);
  if (!tree) return error_exit(tree.error().describe());
  h.tree = tree->get();
  windows_stale_remove(h.context.shm_dir);
  auto control = hostd::ControlServer::start(control_path, *g, static_cast<mode_t>(m),
                                             [&h](const json& r) { return h.handle(r); });
  if (!control) return error_exit(control.error().describe());
  std::fprintf(stderr, "rpcie-hostd: mounted %s, control %s\n", tree_options.mount.c_str(), control_path.c_str());
  background_ready(ready_fd);
  const int rc = (*tree)->run();
  RPCIE_LOG_INFO("hostd", "stopping: detaching every device");
  control->reset();  // no new requests
  tree->reset();     // detach all, unmount, remove links
  return rc == 0 ? 0 : 1;
}
