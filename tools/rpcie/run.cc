#include "run.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fabric.hpp"

#ifndef RPCIE_MMIO_BINDIR_TO_LIBDIR
#error "RPCIE_MMIO_BINDIR_TO_LIBDIR: the relative path from bindir to libdir (meson defines it)"
#endif
#ifndef RPCIE_MMIO_BUILD_DIR
#error "RPCIE_MMIO_BUILD_DIR: the build directory of librpcie-mmio.so (meson defines it)"
#endif

namespace rpcie::cli {

namespace {

struct sigaction pipe_at_start {};
bool pipe_saved = false;

std::string self_exe() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

std::string absolute(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) != nullptr ? std::string(cwd) + "/" + path : path;
}

}  // namespace

RunCommand& run_add(CLI::App& parent) {
  static RunCommand command;
  command.app = parent.add_subcommand("run", "run PROGRAM with librpcie-mmio.so preloaded (register BARs mappable)");
  command.app->add_flag("--sysfs-env", command.sysfs_env,
                        "set SYSFS_PCI_DEVICES (DPDK) to the rpcie devices directory ($RPCIE_MOUNT/pci/devices)");
  command.app->add_option("PROGRAM", "PROGRAM [ARGS...]: what to run (after --sysfs-env and an optional --)");
  return command;
}

int run_position(int argc, char** argv) {
  int at = 1;
  if (at < argc && (std::strcmp(argv[at], "-o") == 0 || std::strcmp(argv[at], "--output") == 0))
    at += 2;
  else if (at < argc && std::strncmp(argv[at], "--output=", 9) == 0)
    at += 1;
  return at < argc && std::strcmp(argv[at], "run") == 0 ? at : 0;
}

int run_main(const std::vector<std::string>& args, const std::string& help) {
  RunCommand command;
  std::size_t at = 0;
  for (; at < args.size() && !args[at].empty() && args[at][0] == '-'; ++at) {
    if (args[at] == "--") {
      ++at;
      break;
    }
    if (args[at] == "--sysfs-env") {
      command.sysfs_env = true;
    } else if (args[at] == "-h" || args[at] == "--help") {
      std::fputs(help.c_str(), stdout);
      return 0;
    } else {
      return error_exit("run: unknown option " + args[at] + " (rpcie run [--sysfs-env] [--] PROGRAM [ARGS...])", 2);
    }
  }
  return run_exec(command, std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(at), args.end()));
}

void run_signals_save() noexcept { pipe_saved = ::sigaction(SIGPIPE, nullptr, &pipe_at_start) == 0; }

std::string mmio_library_installed(std::string_view exe_path, std::string_view bindir_to_libdir) {
  const auto slash = exe_path.rfind('/');
  std::string dir(slash == std::string_view::npos ? std::string_view(".") : exe_path.substr(0, slash));
  if (dir.empty()) dir = "/";  // an executable in /
  std::string path = dir;
  if (!bindir_to_libdir.empty()) {
    if (path.back() != '/') path += '/';
    path += bindir_to_libdir;
  }
  if (path.back() != '/') path += '/';
  return path + std::string(kMmioLibraryName);
}

std::string mmio_library_resolve(std::string_view exe_path, std::string_view bindir_to_libdir,
                                 std::string_view build_dir, std::string_view override_path,
                                 const std::function<bool(const std::string&)>& exists,
                                 std::vector<std::string>& tried) {
  if (!override_path.empty()) {
    tried.emplace_back(override_path);
    return exists(tried.back()) ? tried.back() : std::string();
  }
  if (!exe_path.empty()) {
    tried.push_back(mmio_library_installed(exe_path, bindir_to_libdir));
    if (exists(tried.back())) return tried.back();
  }
  if (!build_dir.empty()) {
    tried.push_back(std::string(build_dir) + "/" + std::string(kMmioLibraryName));
    if (exists(tried.back())) return tried.back();
  }
  return {};
}

std::string preload_prepend(std::string_view library, const char* current) {
  std::string value(library);
  if (current != nullptr && *current != '\0') value += std::string(":") + current;
  return value;
}

int run_exec(const RunCommand& command, const std::vector<std::string>& argv) {
  if (argv.empty()) return error_exit("run: no PROGRAM given (rpcie run [--] PROGRAM [ARGS...])", 2);
  const char* override_env = std::getenv("RPCIE_MMIO_LIBRARY");
  std::vector<std::string> tried;
  const std::string library = absolute(mmio_library_resolve(
      self_exe(), RPCIE_MMIO_BINDIR_TO_LIBDIR, RPCIE_MMIO_BUILD_DIR, override_env != nullptr ? override_env : "",
      [](const std::string& p) { return ::access(p.c_str(), R_OK) == 0; }, tried));
  if (library.empty()) {
    std::string where;
    for (const auto& t : tried) where += (where.empty() ? "" : ", ") + t;
    return error_exit("cannot find " + std::string(kMmioLibraryName) + " (looked at " + where +
                      "); set RPCIE_MMIO_LIBRARY to its path");
  }
  if (library.find_first_of(": ") != std::string::npos)
    return error_exit(library + ": LD_PRELOAD cannot hold a path with ':' or ' '; set RPCIE_MMIO_LIBRARY to another");
  const std::string preload = preload_prepend(library, std::getenv("LD_PRELOAD"));
  if (::setenv("LD_PRELOAD", preload.c_str(), 1) != 0)
    return error_exit(std::string("setenv: ") + std::strerror(errno));
  if (command.sysfs_env) {
    // DPDK reads its PCI directory from SYSFS_PCI_DEVICES: there, only rpcie's functions.
    const char* mount = std::getenv("RPCIE_MOUNT");
    const std::string devices = std::string(mount != nullptr && *mount != '\0' ? mount : "/run/rpcie") + "/pci/devices";
    if (::setenv("SYSFS_PCI_DEVICES", devices.c_str(), 1) != 0)
      return error_exit(std::string("setenv: ") + std::strerror(errno));
  }
  if (pipe_saved) ::sigaction(SIGPIPE, &pipe_at_start, nullptr);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  const int e = errno;
  if (pipe_saved) ::signal(SIGPIPE, SIG_IGN);
  return error_exit(argv[0] + ": " + std::strerror(e), e == ENOENT || e == ENOTDIR ? 127 : 126);
}

}  // namespace rpcie::cli
