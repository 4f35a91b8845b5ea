// rpcie — the command-line tool (nvme-cli / usbip shape). This part: `list` (talks to an
// exporter directly) and `keygen`. Errors go to stderr as "rpcie: error: ..."; exit 0 on
// success, 1 on failure (a refused key included), 2 on usage errors.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/client.hpp"
#include "rpcie/log.hpp"
#include "fabric.hpp"

namespace {

using rpcie::client::ExportDesc;

int error_exit(const std::string& text, int code = 1) {
  std::fprintf(stderr, "rpcie: error: %s\n", text.c_str());
  return code;
}

std::string hex(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, value);
  return buf;
}

std::string size_text(std::uint64_t bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + units[u];
}

const char* kind_text(rpcie::proto::BarKind k) {
  switch (k) {
    case rpcie::proto::BarKind::registers: return "registers";
    case rpcie::proto::BarKind::memory: return "memory";
    case rpcie::proto::BarKind::io: return "io";
  }
  return "unknown";
}

nlohmann::json export_json(const ExportDesc& e) {
  nlohmann::json bars = nlohmann::json::array();
  for (const auto& b : e.bars)
    bars.push_back({{"bar", b.bar}, {"size", b.size}, {"type", kind_text(b.kind)}, {"64bit", b.is_64bit},
                    {"readonly", b.readonly}, {"direct", b.direct}});
  return {{"name", e.name},
          {"backend", e.backend},
          {"vendor", hex(e.vendor, 4)},
          {"device", hex(e.device, 4)},
          {"class", hex(e.class_code, 6)},
          {"subsystem_vendor", hex(e.subsystem_vendor, 4)},
          {"subsystem_device", hex(e.subsystem_device, 4)},
          {"revision", hex(e.revision, 2)},
          {"bars", bars},
          {"vectors", e.vectors},
          {"shared", e.shared},
          {"dma", e.mirror ? "mirror" : "on-demand"},
          {"state", e.attached ? "attached" : "free"},
          {"holder", e.holder}};
}

void list_print_text(const std::vector<ExportDesc>& exports) {
  std::printf("%-16s %-10s %-10s %-9s %-28s %s\n", "NAME", "BACKEND", "ID", "CLASS", "BARS", "STATE");
  for (const auto& e : exports) {
    std::string bars;
    for (const auto& b : e.bars) {
      if (!bars.empty()) bars += " ";
      bars += std::to_string(b.bar) + ":" + size_text(b.size) + "(" +
              (b.kind == rpcie::proto::BarKind::memory ? "mem" : b.kind == rpcie::proto::BarKind::io ? "io" : "reg") +
              (b.readonly ? ",ro" : "") + ")";
    }
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", e.vendor, e.device);
    std::string state = e.attached ? "attached by " + e.holder : "free";
    std::printf("%-16s %-10s %-10s %-9s %-28s %s\n", e.name.c_str(), e.backend.c_str(), id,
                hex(e.class_code, 6).c_str(), bars.c_str(), state.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  CLI::App app{"rpcie: use PCIe devices of another server over libfabric"};
  app.require_subcommand(1);
  std::string output = "text";
  app.add_option("-o,--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));

  auto* list = app.add_subcommand("list", "list the exports of a device server");
  std::string remote, psk_file = rpcie::auth::kDefaultKeyPath, name;
  int timeout_s = 5;
  list->add_option("-r,--remote", remote, "HOST[:PORT] of the exporter (port 7385 by default)")->required();
  list->add_option("--psk-file", psk_file, "pre-shared key file (default /etc/rpcie/psk)");
  list->add_option("--name", name, "client name (default: this host's name)");
  list->add_option("--timeout", timeout_s, "seconds (default 5)")->check(CLI::Range(1, 3600));
  list->add_option("-o,--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));

  auto* keygen = app.add_subcommand("keygen", "create a pre-shared key file (mode 0600)");
  std::string key_file = rpcie::auth::kDefaultKeyPath;
  bool force = false;
  keygen->add_option("file", key_file, "where to write it (default /etc/rpcie/psk)");
  keygen->add_flag("-f,--force", force, "replace an existing file");
  keygen->add_option("-o,--output", output, "text or json")->check(CLI::IsMember({"text", "json"}));

  auto& fabric = rpcie::cli::fabric_add(app, output);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      app.exit(e);
      return 0;
    }
    return error_exit(e.what(), 2);
  }
  const bool json = output == "json";
  if (*fabric.app) return rpcie::cli::fabric_run(fabric, json);

  if (*keygen) {
    auto r = rpcie::auth::key_generate_file(key_file, force);
    if (!r) return error_exit(r.error().describe());
    if (json) std::printf("%s\n", nlohmann::json{{"key_file", key_file}}.dump().c_str());
    else std::printf("wrote a new key to %s (mode 0600); copy it to the other server over a secure channel\n",
                     key_file.c_str());
    return 0;
  }

  auto address = rpcie::address_parse(remote, rpcie::kDefaultPort);
  if (!address) return error_exit(address.error().message, 2);
  auto key = rpcie::auth::key_load(psk_file);
  if (!key) return error_exit(key.error().describe());
  rpcie::client::ClientOptions options;
  options.name = name;
  options.key = std::make_shared<const rpcie::auth::Key>(std::move(*key));
  auto exports = rpcie::client::exports_list(address->first, address->second, options,
                                             rpcie::Deadline::after(std::chrono::seconds(timeout_s)));
  if (!exports) return error_exit(remote + ": " + exports.error().describe());
  if (json) {
    nlohmann::json out = {{"exports", nlohmann::json::array()}};
    for (const auto& e : *exports) out["exports"].push_back(export_json(e));
    std::printf("%s\n", out.dump().c_str());
  } else {
    list_print_text(*exports);
  }
  return 0;
}
