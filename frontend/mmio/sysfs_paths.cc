#include "sysfs_paths.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rpcie::mmio {

namespace {

bool hex_digit(char c) noexcept { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// `count` hexadecimal digits at `s`.
bool hex_run(const char* s, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    if (!hex_digit(s[i])) return false;
  return true;
}

}  // namespace

bool bdf_is_rpcie(const char* name, std::size_t length) noexcept {
  // DOMAIN ":" BB ":" DD "." F with DOMAIN 5-8 hex digits, >= 0x10000.
  const char* colon = static_cast<const char*>(std::memchr(name, ':', length));
  if (colon == nullptr) return false;
  const std::size_t domain_digits = static_cast<std::size_t>(colon - name);
  if (domain_digits < 5 || domain_digits > 8 || !hex_run(name, domain_digits)) return false;
  const std::size_t rest = length - domain_digits;
  if (rest != 8) return false;  // ":BB:DD.F"
  const char* r = colon;
  if (r[0] != ':' || !hex_run(r + 1, 2) || r[3] != ':' || !hex_run(r + 4, 2) || r[6] != '.' || r[7] < '0' || r[7] > '7')
    return false;
  unsigned long domain = 0;
  for (std::size_t i = 0; i < domain_digits; ++i) {
    const char c = name[i];
    domain = domain * 16 + static_cast<unsigned long>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return domain >= 0x10000;
}

bool sysfs_path_rewrite(const char* path, const char* devices, char* out, std::size_t size) noexcept {
  if (path == nullptr) return false;
  const std::size_t prefix = std::strlen(kSysfsPciDevices);
  if (std::strncmp(path, kSysfsPciDevices, prefix) != 0 || path[prefix] != '/') return false;
  const char* name = path + prefix;
  while (*name == '/') ++name;
  const char* end = std::strchr(name, '/');
  const std::size_t length = end == nullptr ? std::strlen(name) : static_cast<std::size_t>(end - name);
  if (!bdf_is_rpcie(name, length)) return false;
  const int n = std::snprintf(out, size, "%s/%s", devices, name);
  return n > 0 && static_cast<std::size_t>(n) < size;
}

bool sysfs_relative_candidate(const char* path) noexcept {
  if (path == nullptr || path[0] == '/' || std::strchr(path, ':') == nullptr) return false;
  for (const char* name = path; *name != '\0';) {
    const char* end = std::strchr(name, '/');
    const std::size_t length = end == nullptr ? std::strlen(name) : static_cast<std::size_t>(end - name);
    if (bdf_is_rpcie(name, length)) return true;
    if (end == nullptr) break;
    name = end + 1;
  }
  return false;
}

bool sysfs_path_rewrite_at(const char* dir, const char* path, const char* devices, char* out,
                           std::size_t size) noexcept {
  if (dir == nullptr || dir[0] != '/' || path == nullptr || path[0] == '/') return false;
  while (path[0] == '.' && path[1] == '/') path += 2;
  char joined[4096];
  const std::size_t dir_length = std::strlen(dir);
  const char* separator = dir_length > 0 && dir[dir_length - 1] == '/' ? "" : "/";
  const int n = std::snprintf(joined, sizeof joined, "%s%s%s", dir, separator, path);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof joined) return false;
  return sysfs_path_rewrite(joined, devices, out, size);
}

bool sysfs_path_is_devices_dir(const char* path) noexcept {
  if (path == nullptr) return false;
  const std::size_t prefix = std::strlen(kSysfsPciDevices);
  if (std::strncmp(path, kSysfsPciDevices, prefix) != 0) return false;
  for (const char* p = path + prefix; *p != '\0'; ++p)
    if (*p != '/') return false;
  return true;
}

const char* rpcie_devices_dir() noexcept {
  struct Dir {
    char path[4096] = {};
  };
  static const Dir dir = [] {  // a function-local static: initialized once, thread-safe
    Dir d;
    const char* mount = std::getenv("RPCIE_MOUNT");
    std::snprintf(d.path, sizeof d.path, "%s/pci/devices", mount != nullptr && *mount != '\0' ? mount : "/run/rpcie");
    return d;
  }();
  return dir.path;
}

}  // namespace rpcie::mmio
