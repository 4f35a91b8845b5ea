#include "dev_links.hpp"

#include <algorithm>
#include <cerrno>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include "mount.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"

namespace rpcie::hostd {

namespace {

bool name_char_ok(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

Result<void> refuse(const char* what, std::string_view name, const char* rule) {
  return fail(EINVAL, std::string(what) + " '" + log_escape(name.substr(0, 300)) + "'" +
                          (name.size() > 300 ? "..." : "") + ": " + rule);
}

bool label_ok(std::string_view label) {
  if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
  return std::all_of(label.begin(), label.end(), [](char c) { return c != '.' && name_char_ok(c); });
}

bool ip_literal(std::string_view host) {
  const std::string text(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) return true;
  const auto zone = text.find('%');
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.substr(0, zone).c_str(), &v6) != 1) return false;
  if (zone == std::string::npos) return true;
  const std::string_view z = host.substr(zone + 1);
  return !z.empty() && z.size() <= 15 && z != "." && z != ".." && std::all_of(z.begin(), z.end(), name_char_ok);
}

}  // namespace

Result<void> export_name_check(std::string_view name) {
  if (name.empty() || name.size() > kExportNameMax || name == "." || name == ".." ||
      !std::all_of(name.begin(), name.end(), name_char_ok))
    return refuse("export name", name, "use 1-64 of A-Z a-z 0-9 _ . - (not \".\" or \"..\")");
  return {};
}

Result<void> host_name_check(std::string_view host) {
  constexpr const char* rule = "expected an IPv4 or IPv6 address or a host name (labels of A-Z a-z 0-9 _ -)";
  if (host.empty() || host.size() > kHostNameMax) return refuse("host", host, rule);
  if (ip_literal(host)) return {};
  for (std::size_t at = 0;;) {
    const auto dot = host.find('.', at);
    if (!label_ok(host.substr(at, dot == std::string_view::npos ? std::string_view::npos : dot - at)))
      return refuse("host", host, rule);
    if (dot == std::string_view::npos) return {};
    at = dot + 1;
  }
}

std::string dev_link_path(const std::string& dev_dir, const std::string& name) { return dev_dir + "/" + name; }

Result<std::vector<std::string>> dev_links_create(const std::string& dev_dir, const std::string& name,
                                                  const AttachParams& p, const std::string& target) {
  // The request was checked already; this is the last line before root makes the paths.
  RPCIE_TRY(host_name_check(p.host));
  RPCIE_TRY(export_name_check(p.export_name));
  const std::string host_dir =
      dev_dir + "/" + kByExportDir + "/" + p.host + (p.port == kDefaultPort ? "" : ":" + std::to_string(p.port));
  RPCIE_TRY(dirs_make(host_dir, 0755));
  std::vector<std::string> made;
  for (const auto& link : {dev_link_path(dev_dir, name), host_dir + "/" + p.export_name}) {
    ::unlink(link.c_str());
    if (::symlink(target.c_str(), link.c_str()) != 0) {
      const int e = errno;
      for (const auto& m : made) ::unlink(m.c_str());
      return fail(e, "symlink " + link);
    }
    made.push_back(link);
  }
  return made;
}

void dev_links_remove(const std::vector<std::string>& links, const std::string& target) {
  for (const auto& link : links) {
    std::string text(target.size() + 2, '\0');
    const ssize_t n = ::readlink(link.c_str(), text.data(), text.size());
    if (n >= 0 && static_cast<std::size_t>(n) == target.size() && text.compare(0, target.size(), target) == 0)
      ::unlink(link.c_str());
  }
  const std::string host_dir = links.size() > 1 ? links[1].substr(0, links[1].rfind('/')) : "";
  if (!host_dir.empty()) ::rmdir(host_dir.c_str());  // only when empty
}

}  // namespace rpcie::hostd
