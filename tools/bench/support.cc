#include "support.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "../common.hpp"

namespace rpcie::bench {

int die(const std::string& what) {
  std::fprintf(stderr, "rpcie-bench: error: %s\n", what.c_str());
  return 1;
}

tl::unexpected<Error> error_in(Error error, const std::string& where) {
  error.message = error.message.empty() ? where : where + ": " + error.message;
  return tl::unexpected<Error>(std::move(error));
}

std::string program_find(const std::string& given, const char* name, const char* build_dir) {
  if (!given.empty()) return given;
  char self[4096] = {};
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = length > 0 ? std::string(self, static_cast<std::size_t>(length)) : std::string();
  dir = dir.substr(0, dir.rfind('/'));
  for (std::string candidate : {dir + "/" + name, dir + "/../../" + build_dir + "/" + name})
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  return name;
}

std::string sysctl_read(const char* name) {
  std::FILE* file = std::fopen((std::string("/proc/sys/") + name).c_str(), "re");
  if (!file) return {};
  char line[256] = {};
  const bool read = std::fgets(line, sizeof line, file) != nullptr;
  std::fclose(file);
  if (!read) return {};
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\t')) text.pop_back();
  return text;
}

Result<HostBuffer> buffer_written(std::size_t size) {
  RPCIE_TRY_ASSIGN(auto buffer, HostBuffer::create(size));
  std::memset(buffer.data(), kBufferFill, buffer.size());
  return buffer;
}

Child::~Child() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(20000);
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
}

Result<void> Child::start(std::vector<std::string> argv, int cpu, int* err_fd) {
  int err_pipe[2] = {-1, -1};
  if (err_fd && pipe(err_pipe) != 0) return fail(errno, "pipe");
  pid_ = fork();
  if (pid_ < 0) return fail(errno, "fork");
  if (pid_ == 0) {
    if (cpu >= 0) rpcie::tools::cpu_pin(cpu);
    if (err_fd) {
      dup2(err_pipe[1], 2);
      close(err_pipe[0]);
      close(err_pipe[1]);
    }
    std::vector<char*> args;
    for (auto& argument : argv) args.push_back(argument.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s failed: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  if (err_fd) {
    close(err_pipe[1]);
    *err_fd = err_pipe[0];
  }
  return {};
}

Result<TempDir> TempDir::make(const std::string& prefix) {
  std::string path = prefix + "XXXXXX";
  if (!mkdtemp(path.data())) return fail(errno, "mkdtemp " + path);
  TempDir dir;
  dir.path_ = path;
  return dir;
}

TempDir::TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}

TempDir::~TempDir() {
  if (!path_.empty()) (void)std::system(("rm -rf '" + path_ + "'").c_str());
}

Result<std::uint16_t> exportd_start(Child& child, const std::string& program, const std::string& provider,
                                    const std::string& psk, const std::vector<std::string>& exports) {
  std::vector<std::string> argv{program, "--listen", "127.0.0.1:0", "--provider", provider, "--psk-file", psk};
  for (const auto& export_arg : exports) {
    argv.push_back("--export");
    argv.push_back(export_arg);
  }
  int err = -1;
  RPCIE_TRY(child.start(argv, 1, &err));
  // It says "listening on HOST:PORT" on stderr; everything it says is passed on.
  FILE* stream = fdopen(err, "r");
  std::uint16_t port = 0;
  char line[512];
  while (stream && fgets(line, sizeof line, stream)) {
    if (const char* at = std::strstr(line, "listening on ")) {
      port = static_cast<std::uint16_t>(std::atoi(std::strrchr(at, ':') + 1));
      break;
    }
    std::fputs(line, stderr);
  }
  if (port == 0) {
    if (stream) fclose(stream);
    return fail(EIO, "rpcie-exportd (" + program + ") did not start");
  }
  std::thread([stream] {  // keep draining: the exporter must never block on a full pipe
    char text[512];
    while (fgets(text, sizeof text, stream)) std::fputs(text, stderr);
    fclose(stream);
  })
      .detach();
  return port;
}

}  // namespace rpcie::bench
