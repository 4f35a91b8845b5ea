// A temporary directory for one test, removed with everything in it at scope end.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <doctest/doctest.h>

namespace rpcie::test {

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "rpcie-test") {
    std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path + "/" + name; }
};

}  // namespace rpcie::test
