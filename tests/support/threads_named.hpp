// The threads of this process that carry a name (/proc/self/task/TID/comm, as ps -L and
// top -H show it), for tests of which threads a component starts. A thread takes its name
// once it runs: look with eventually().
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace rpcie::test {

inline std::vector<pid_t> threads_named(const std::string& name) {
  std::vector<pid_t> tids;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(t.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) tids.push_back(std::stoi(t.path().filename()));
  }
  return tids;
}

}  // namespace rpcie::test
