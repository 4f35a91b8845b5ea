#include "mount.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <pthread.h>
#include <sys/stat.h>

namespace rpcie::hostd {

namespace {

// The kernel reads a FUSE file ahead in at most read_ahead_kb of the mount's bdi (128 KiB
// by default): with a round trip to the exporter per request, a 1 MiB pread of a memory
// BAR would be eight. Raised to the 1 MiB a request can carry. The bdi is named after the
// mount's device number, found in mountinfo (a stat of the mount would wait for ourselves).
void readahead_raise(const std::string& mount) {
  const auto dev = mountinfo_find(mount).dev;
  if (dev.empty()) return;
  const std::string path = "/sys/class/bdi/" + dev + "/read_ahead_kb";
  if (FILE* ra = std::fopen(path.c_str(), "w")) {
    std::fputs("1024", ra);
    std::fclose(ra);
  }
}

}  // namespace

MountInfo mountinfo_find(const std::string& path, const std::string& table) {
  MountInfo found;
  FILE* f = std::fopen(table.c_str(), "r");
  if (!f) return found;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    char id[64], where[3072], fstype[64];
    const char* sep = std::strstr(line, " - ");
    if (sep && std::sscanf(line, "%*d %*d %63s %*s %3071s", id, where) == 2 && path == where &&
        std::sscanf(sep + 3, "%63s", fstype) == 1)
      found = {id, fstype};  // later lines are mounted on top of earlier ones
  }
  std::fclose(f);
  return found;
}

Result<void> dirs_make(const std::string& path, mode_t mode) {
  std::string at;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    at = path.substr(0, pos);
    if (at.empty()) continue;
    if (::mkdir(at.c_str(), mode) != 0 && errno != EEXIST) return fail(errno, "mkdir " + at);
  }
  return {};
}

Result<std::unique_ptr<FuseMount>> FuseMount::open(const std::string& path, const fuse_lowlevel_ops& ops,
                                                   void* userdata) {
  std::unique_ptr<FuseMount> m(new FuseMount());
  RPCIE_TRY(dirs_make(path, 0755));
  const std::string fs_opts = "-oallow_other,default_permissions,fsname=rpcie,subtype=rpcie";
  const char* argv[] = {"rpcie-hostd", fs_opts.c_str(), nullptr};
  fuse_args args = FUSE_ARGS_INIT(2, const_cast<char**>(argv));
  m->se_ = fuse_session_new(&args, &ops, sizeof ops, userdata);
  fuse_opt_free_args(&args);  // the session copied what it needs (and may have added to args)
  if (!m->se_) return fail(EIO, "FUSE session could not be created (see the message above)");
  if (fuse_session_mount(m->se_, path.c_str()) != 0)
    return fail(EIO, "mount FUSE at " + path + " (is /dev/fuse there, are we root?)");
  m->mounted_ = true;
  readahead_raise(path);
  return m;
}

int FuseMount::run() {
  // A library loaded with libfabric installs handlers that exit at once (measured: exit
  // status 1, mount left behind); libfuse installs its own only over the default.
  for (int sig : {SIGINT, SIGTERM}) ::signal(sig, SIG_DFL);
  if (fuse_set_signal_handlers(se_) != 0) return -EIO;
  // Only this thread and the FUSE workers (created by the loop, inheriting this mask) take
  // the stop signals: libfuse's handler ends the loop only if the signal interrupts one of
  // them. Delivered to any other thread of ours, the loop would go on until the next request.
  // SIGHUP stays blocked: it is the daemon's reload signal (ServiceLoop), never a stop.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(cfg, 64);
  fuse_loop_cfg_set_idle_threads(cfg, 8);
  const int rc = fuse_session_loop_mt(se_, cfg);
  fuse_loop_cfg_destroy(cfg);
  fuse_remove_signal_handlers(se_);
  return rc < 0 ? rc : 0;
}

FuseMount::~FuseMount() {
  if (!se_) return;
  if (mounted_) fuse_session_unmount(se_);
  fuse_session_destroy(se_);
}

}  // namespace rpcie::hostd
