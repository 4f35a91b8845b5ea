// A fake PCI function's sysfs directory for the pci-sysfs tests, in a temporary directory:
//
//   $TMPDIR/rpcie-pci-sysfs-XXXXXX/
//     devices/BDF/                   the function (sysfs-root=.../devices)
//       vendor device class subsystem_vendor subsystem_device revision   "0x....\n"
//       config                       the bytes of FakeSpec::config
//       resource                     FakeSpec::resource
//       resourceN                    regular files of FakeSpec::bars (mmap works on them)
//       reset                        an empty regular file, with FakeSpec::reset_file
//       driver -> ../../drivers/fakedrv   with FakeSpec::bound
//
// Nothing here touches the real sysfs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <doctest/doctest.h>

namespace rpcie::test {

namespace fs = std::filesystem;

inline std::string file_read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void file_write(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  REQUIRE(out.good());
}

inline std::uint64_t le_get(const std::string& bytes, std::size_t offset, unsigned width) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) v |= std::uint64_t{static_cast<std::uint8_t>(bytes[offset + i])} << (8 * i);
  return v;
}

inline void le_put(std::string& bytes, std::size_t offset, unsigned width, std::uint64_t value) {
  for (unsigned i = 0; i < width; ++i) bytes[offset + i] = static_cast<char>(value >> (8 * i));
}

// A byte pattern that differs at every offset of a BAR, so reads at each width are checked.
inline std::string pattern(std::size_t size, unsigned seed) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 7 + seed + (i >> 8)) & 0xff);
  return bytes;
}

struct FakeSpec {
  std::string bdf = "0000:3a:00.1";
  std::uint32_t class_code = 0x020000;   // also written into config at 0x09 by the caller
  std::string config;                    // the config file's bytes
  std::string resource;                  // the resource file's text
  std::map<unsigned, std::string> bars;  // resourceN contents
  bool bound = false;
  bool reset_file = false;
};

class FakeFunction {
 public:
  explicit FakeFunction(const FakeSpec& spec) : bdf(spec.bdf), config(spec.config) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/rpcie-pci-sysfs-XXXXXX";
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    root = templ;
    dir = root / "devices" / spec.bdf;
    fs::create_directories(dir);
    fs::create_directories(root / "drivers" / "fakedrv");
    file_write(dir / "vendor", "0xabcd\n");
    file_write(dir / "device", "0x1234\n");
    char class_text[16];
    std::snprintf(class_text, sizeof class_text, "0x%06x\n", spec.class_code);
    file_write(dir / "class", class_text);
    file_write(dir / "subsystem_vendor", "0xabcd\n");
    file_write(dir / "subsystem_device", "0x0001\n");
    file_write(dir / "revision", "0x02\n");
    file_write(dir / "config", spec.config);
    file_write(dir / "resource", spec.resource);
    for (const auto& [bar, bytes] : spec.bars) file_write(dir / ("resource" + std::to_string(bar)), bytes);
    if (spec.reset_file) file_write(dir / "reset", "");
    if (spec.bound) fs::create_directory_symlink("../../drivers/fakedrv", dir / "driver");
  }
  ~FakeFunction() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  FakeFunction(const FakeFunction&) = delete;
  FakeFunction& operator=(const FakeFunction&) = delete;

  std::map<std::string, std::string> params(std::map<std::string, std::string> extra = {}) const {
    extra.emplace("bdf", bdf);
    extra.emplace("sysfs-root", (root / "devices").string());
    return extra;
  }

  // Every regular file of the function and its content, to prove that nothing changed.
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file() && !entry.is_symlink()) files[entry.path().filename()] = file_read(entry.path());
    return files;
  }

  std::string config_now() const { return file_read(dir / "config"); }

  std::string bdf;
  fs::path root;
  fs::path dir;
  std::string config;  // as created
};

// The access modes (O_RDONLY, O_RDWR, ...) of this process's open descriptors of `path`.
inline std::vector<int> open_modes(const fs::path& path) {
  std::vector<int> modes;
  const fs::path target = fs::canonical(path);
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const fs::path link = fs::read_symlink(entry.path(), ec);
    if (ec || link != target) continue;
    std::ifstream info("/proc/self/fdinfo/" + entry.path().filename().string());
    std::string key;
    while (info >> key) {
      if (key == "flags:") {
        std::string octal;
        info >> octal;
        modes.push_back(static_cast<int>(std::strtol(octal.c_str(), nullptr, 8)) & O_ACCMODE);
        break;
      }
    }
  }
  return modes;
}

}  // namespace rpcie::test
