// rpcie — the command-line tool (nvme-cli / usbip shape): `list` talks to an exporter
// directly; `attach`, `detach` and `status` ask rpcie-hostd over its control socket
// (--control, $RPCIE_CONTROL, /run/rpcie.sock), as does `top` (a live view of them); `fabric` shows the usable
// providers; `keygen` writes a key file; `run` execs a program with librpcie-mmio.so preloaded. `list` shows the data
// path (sealed / open) an attach from this host would run. Errors go to stderr as "rpcie: error: ..."; exit 0 on
// success, 1 on failure (a refused key included), 2 on usage errors.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "control_text.hpp"
#include "fabric.hpp"
#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/client.hpp"
#include "rpcie/control.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"
#include "rpcie/units.hpp"
#include "run.hpp"
#include "top.hpp"

namespace {

using rpcie::cli::error_exit;
using rpcie::client::ExportDesc;

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

const char* kind_text(rpcie::pci::BarKind k) {
  switch (k) {
    case rpcie::pci::BarKind::registers:
      return "registers";
    case rpcie::pci::BarKind::memory:
      return "memory";
    case rpcie::pci::BarKind::io:
      return "io";
  }
  return "unknown";
}

nlohmann::json export_json(const ExportDesc& e) {
  nlohmann::json bars = nlohmann::json::array();
  for (const auto& b : e.bars)
    bars.push_back({{"bar", b.bar},
                    {"size", b.size},
                    {"type", kind_text(b.kind)},
                    {"64bit", b.is_64bit},
                    {"readonly", b.readonly},
                    {"direct", b.direct}});
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
          {"holder", e.holder},
          {"data_path", e.data_path ? nlohmann::json(rpcie::data_path_name(*e.data_path)) : nlohmann::json(nullptr)},
          {"data_path_policy", rpcie::data_path_choice_name(e.data_path_policy)}};
}

void list_print_text(const std::vector<ExportDesc>& exports) {
  std::printf("%-16s %-10s %-10s %-9s %-28s %-9s %s\n", "NAME", "BACKEND", "ID", "CLASS", "BARS", "DATAPATH", "STATE");
  for (const auto& e : exports) {
    std::string bars;
    for (const auto& b : e.bars) {
      if (!bars.empty()) bars += " ";
      bars += std::to_string(b.bar) + ":" + size_text(b.size) + "(" +
              (b.kind == rpcie::pci::BarKind::memory ? "mem"
               : b.kind == rpcie::pci::BarKind::io   ? "io"
                                                     : "reg") +
              (b.readonly ? ",ro" : "") + ")";
    }
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", e.vendor, e.device);
    std::string state = e.attached ? "attached by " + e.holder : "free";
    std::printf("%-16s %-10s %-10s %-9s %-28s %-9s %s\n", e.name.c_str(), e.backend.c_str(), id,
                hex(e.class_code, 6).c_str(), bars.c_str(), e.data_path ? rpcie::data_path_name(*e.data_path) : "-",
                state.c_str());
  }
}

// One request to rpcie-hostd; prints its answer (control_text.hpp).
int control_run(const std::string& control_flag, const nlohmann::json& request, int timeout_s, bool json,
                rpcie::cli::ControlCommand command) {
  const auto path = rpcie::control::socket_path_resolve(control_flag);
  auto answer = rpcie::control::call(path, request, rpcie::Deadline::after(std::chrono::seconds(timeout_s)));
  if (!answer) return error_exit(answer.error().message);
  auto printed = rpcie::cli::control_answer_print(command, *answer, json, stdout, stderr);
  if (!printed) return error_exit(printed.error().message);
  return 0;
}

// Every option of every subcommand (CLI11 writes the parsed values here).
struct Options {
  std::string output = "text";
  std::string remote, psk_file = rpcie::auth::kDefaultKeyPath, name;
  int timeout_s = 5;
  std::string key_file = rpcie::auth::kDefaultKeyPath;
  bool force = false;
  std::string control_path, export_name, window, device, data_path;
  int control_timeout_s = 15;
  bool all = false;
  rpcie::cli::TopOptions top;
  bool persist = false;
  bool json() const { return output == "json"; }
};

struct Commands {
  CLI::App* list;
  CLI::App* keygen;
  CLI::App* attach;
  CLI::App* detach;
  CLI::App* status;
  CLI::App* top;
};

Commands commands_add(CLI::App& app, Options& o) {
  auto output = [&](CLI::App* sub) {
    sub->add_option("-o,--output", o.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  };
  output(&app);
  auto* list = app.add_subcommand("list", "list the exports of a device server");
  list->add_option("-r,--remote", o.remote, "HOST[:PORT] of the exporter (port 7385 by default)")->required();
  list->add_option("--psk-file", o.psk_file, "pre-shared key file (default /etc/rpcie/psk)");
  list->add_option("--name", o.name, "client name (default: this host's name)");
  list->add_option("--timeout", o.timeout_s, "seconds (default 5)")->check(CLI::Range(1, 3600));
  output(list);

  auto* keygen = app.add_subcommand("keygen", "create a pre-shared key file (mode 0600)");
  keygen->add_option("file", o.key_file, "where to write it (default /etc/rpcie/psk)");
  keygen->add_flag("-f,--force", o.force, "replace an existing file");
  output(keygen);

  auto* attach = app.add_subcommand("attach", "attach a remote device (through rpcie-hostd)");
  attach->add_option("-r,--remote", o.remote, "HOST[:PORT] of the exporter (port 7385 by default)")->required();
  attach->add_option("-e,--export", o.export_name, "export name (see rpcie list)")->required();
  attach->add_option("--dma-window", o.window, "DMA window size (default: hostd's, 16M)");
  attach->add_option("--data-path", o.data_path, "sealed, open or auto (default: hostd's --data-path)")
      ->check(CLI::IsMember({"sealed", "open", "auto"}));
  attach->add_flag("--persist", o.persist, "also add it to hostd's configuration file (attached at every start)");
  auto* detach = app.add_subcommand("detach", "detach a device (its files are gone when this returns)");
  auto* detach_device = detach->add_option("-d,--device", o.device, "rpcieN (or /dev/rpcieN)");
  auto* detach_all = detach->add_flag("--all", o.all, "every attached device");
  detach_device->excludes(detach_all);
  detach->add_flag("--persist", o.persist, "also remove its entry from hostd's configuration file")
      ->excludes(detach_all);
  auto* status = app.add_subcommand("status", "attachments of rpcie-hostd: state, generation, counters");
  for (auto* sub : {attach, detach, status}) {
    sub->add_option("--control", o.control_path, "hostd's control socket (default $RPCIE_CONTROL or /run/rpcie.sock)");
    sub->add_option("--timeout", o.control_timeout_s, "seconds (default 15)")->check(CLI::Range(1, 3600));
    output(sub);
  }
  auto* top = app.add_subcommand("top", "live view of rpcie-hostd's devices: rates and read latency");
  top->add_option("--control", o.top.control_path,
                  "hostd's control socket (default $RPCIE_CONTROL or /run/rpcie.sock)");
  top->add_option("--interval", o.top.interval_s, "seconds between frames (default 1)")->check(CLI::Range(0.1, 3600.0));
  top->add_option("--count", o.top.count, "frames to print, then exit (default: until interrupted)")
      ->check(CLI::Range(1, 1000000));
  return {list, keygen, attach, detach, status, top};
}

int keygen_run(const Options& o) {
  auto r = rpcie::auth::key_generate_file(o.key_file, o.force);
  if (!r) return error_exit(r.error().describe());
  if (o.json())
    std::printf("%s\n", rpcie::control::json_line({{"key_file", o.key_file}}).c_str());
  else
    std::printf("wrote a new key to %s (mode 0600); copy it to the other server over a secure channel\n",
                o.key_file.c_str());
  return 0;
}

int attach_run(const Options& o) {
  auto address = rpcie::address_parse(o.remote, rpcie::kDefaultPort);
  if (!address) return error_exit(address.error().message, 2);
  nlohmann::json request{
      {"op", "attach"}, {"host", address->first}, {"port", address->second}, {"export", o.export_name}};
  if (!o.window.empty()) {
    auto bytes = rpcie::size_parse(o.window);
    if (!bytes || *bytes == 0)
      return error_exit("--dma-window: expected a size such as 16M, got '" + o.window + "'", 2);
    request["dma_window"] = *bytes;
  }
  if (!o.data_path.empty()) request["data_path"] = o.data_path;
  if (o.persist) request["persist"] = true;
  return control_run(o.control_path, request, o.control_timeout_s, o.json(), rpcie::cli::ControlCommand::attach);
}

int detach_run(const Options& o) {
  nlohmann::json request{{"op", "detach"}};
  if (o.all)
    request["all"] = true;
  else
    request["device"] = o.device.substr(o.device.rfind('/') + 1);  // /dev/rpcie0 -> rpcie0
  if (o.persist) request["persist"] = true;
  return control_run(o.control_path, request, o.control_timeout_s, o.json(), rpcie::cli::ControlCommand::detach);
}

int list_run(const Options& o) {
  auto address = rpcie::address_parse(o.remote, rpcie::kDefaultPort);
  if (!address) return error_exit(address.error().message, 2);
  auto key = rpcie::auth::key_load(o.psk_file);
  if (!key) return error_exit(key.error().describe());
  rpcie::client::ClientOptions options;
  options.name = o.name;
  options.key = std::make_shared<const rpcie::auth::Key>(std::move(*key));
  auto exports = rpcie::client::exports_list(address->first, address->second, options,
                                             rpcie::Deadline::after(std::chrono::seconds(o.timeout_s)));
  if (!exports) return error_exit(o.remote + ": " + exports.error().describe());
  if (o.json()) {
    nlohmann::json out = {{"exports", nlohmann::json::array()}};
    for (const auto& e : *exports) out["exports"].push_back(export_json(e));
    std::printf("%s\n", rpcie::control::json_line(out).c_str());  // names come from the exporter
  } else {
    list_print_text(*exports);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::cli::run_signals_save();  // before signals_init: `run` hands PROGRAM the original SIGPIPE
  rpcie::signals_init();
  CLI::App app{"rpcie: use PCIe devices of another server over libfabric"};
  app.require_subcommand(1);
  Options o;
  const Commands c = commands_add(app, o);
  auto& fabric = rpcie::cli::fabric_add(app, o.output);
  auto& run = rpcie::cli::run_add(app);
  if (const int at = rpcie::cli::run_position(argc, argv); at > 0)
    return rpcie::cli::run_main(std::vector<std::string>(argv + at + 1, argv + argc), run.app->help());
  try {
    app.parse(argc, argv);
    if (*c.detach && o.device.empty() && !o.all) throw CLI::RequiredError("detach needs -d rpcieN or --all");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      app.exit(e);
      return 0;
    }
    return error_exit(e.what(), 2);
  }
  if (*fabric.app) return rpcie::cli::fabric_run(fabric, o.json());
  if (*c.keygen) return keygen_run(o);
  if (*c.attach) return attach_run(o);
  if (*c.detach) return detach_run(o);
  if (*c.top) return rpcie::cli::top_run(o.top);
  if (*c.status)
    // The exporters' DMA figures cost a round trip per device: only the JSON shows them.
    return control_run(o.control_path, {{"op", "status"}, {"device_telemetry", o.json()}}, o.control_timeout_s,
                       o.json(), rpcie::cli::ControlCommand::status);
  return list_run(o);
}
