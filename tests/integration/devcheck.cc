// rpcie-devcheck: drives an rpcie-exportd through the client API and checks behaviour
// (data by checksum, errors by errno, ordering). Used by the integration scripts; each
// subcommand prints "ok: ..." lines and exits 0, or prints "FAIL: ..." and exits 1.
//
//   rpcie-devcheck [common] edu EXPORT          liveness, factorial+irq, DMA both ways, rules 1-4
//   rpcie-devcheck [common] posted EXPORT       1000 posted writes then a read (edu), 5 bursts;
//                 [--gap-ms N] [--limit R] [--outliers K]   N ms before each (0); all but
//                                             K (0) of them <= R round trips (100), each
//                                             carried by <= 300 messages (batched)
//   rpcie-devcheck [common] push EXPORT         streaming DMA (window_push) on edu: mirror export
//                                               -> the device reads what was pushed; on-demand
//                                               export -> no effect, the device reads the window
//   rpcie-devcheck [common] membar EXPORT SIZE  bulk write/read with checksums (copy and zero-copy)
//   rpcie-devcheck [common] errors EXPORT       bad widths/offsets/BARs -> EINVAL, unknown export -> ENOENT
//   rpcie-devcheck [common] hostile EXPORT      raw protocol: bad requests answered with errors, garbage dropped
//   rpcie-devcheck [common] busy EXPORT         expects the attach to fail with EBUSY "attached by"
//   rpcie-devcheck [common] hold EXPORT SECONDS attach, print "attached", hold (for kill tests)
//   rpcie-devcheck [common] reattach EXPORT     attach, detach, attach again at once
//   rpcie-devcheck [common] badmac              a frame with a bad MAC is dropped, the connection lives on
//   rpcie-devcheck [common] list                prints exports as "NAME STATE HOLDER"
//   rpcie-devcheck [common] attachfail EXPORT ERRNO TEXT   the attach must fail so
//   rpcie-devcheck [common] postedfail EXPORT   read-only device: refused posted write reported next
//   rpcie-devcheck [common] linkloss EXPORT     prints "attached", then expects the link to die
//   rpcie-devcheck [common] resume EXPORT SECONDS  prints "attached", then works for SECONDS
//                                             while the link is cut: expects it resumed
//   rpcie-devcheck [common] dmaresume EXPORT    prints "started" with a device-to-host DMA due
//                                             (a delayed edu): the link is cut meanwhile; the
//                                             bytes must be in the window at its interrupt
//   rpcie-devcheck [common] barresume EXPORT GO  prints "attached", writes the memory BAR once
//                                             the file GO exists (the link down), expects the
//                                             bytes there after the resumption
// common: -r HOST[:PORT] --psk-file FILE [--name NAME] [--provider P] [--window SIZE]
//
// One file per group of checks (devcheck_support.hpp lists them); this one reads the command line.
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "devcheck_support.hpp"
#include "rpcie/process.hpp"
#include "rpcie/units.hpp"

using namespace rpcie::devcheck;

namespace {

// What the command line says, before it is checked.
struct Args {
  std::string remote, psk = "/etc/rpcie/psk", provider = "auto", window = "1M", data_path = "auto";
  std::string name, size = "64M", go, expect_text;
  int seconds = 30, gap_ms = 0, outliers = 0, peer_pid = 0, expect_code = 0;
  double limit = 100;
};

// The common options and the subcommands with theirs; the subcommands by name.
std::map<std::string, CLI::App*> cli_build(CLI::App& app, Args& a, Common& c) {
  app.require_subcommand(1);
  app.add_option("-r,--remote", a.remote)->required();
  app.add_option("--psk-file", a.psk);
  app.add_option("--name", c.options.name);
  app.add_option("--provider", a.provider);
  app.add_option("--window", a.window);
  app.add_option("--data-path", a.data_path, "sealed, open or auto (the client's choice)");
  std::map<std::string, CLI::App*> cmds;
  for (const char* cmd : {"edu", "push", "posted", "membar", "errors", "hostile", "busy", "hold", "reattach",
                          "postedfail", "linkloss", "attachfail", "resume", "dmaresume", "barresume"}) {
    cmds[cmd] = app.add_subcommand(cmd);
    cmds[cmd]->add_option("export", a.name)->required();
  }
  cmds["membar"]->add_option("size", a.size);
  cmds["posted"]->add_option("--gap-ms", a.gap_ms, "pause before each burst")->check(CLI::Range(0, 1000));
  cmds["posted"]->add_option("--limit", a.limit, "round trips a burst may take")->check(CLI::Range(1.0, 10000.0));
  cmds["posted"]
      ->add_option("--outliers", a.outliers, "bursts of the five that may take longer")
      ->check(CLI::Range(0, 4));
  cmds["posted"]->add_option("--exporter-pid", a.peer_pid,
                             "the exporter's process, whose threads a slow burst reports");
  cmds["hold"]->add_option("seconds", a.seconds);
  cmds["resume"]->add_option("seconds", a.seconds);
  cmds["barresume"]->add_option("go", a.go, "created by the script once the link is down")->required();
  cmds["attachfail"]->add_option("errno", a.expect_code)->required();
  cmds["attachfail"]->add_option("text", a.expect_text)->required();
  cmds["badmac"] = app.add_subcommand("badmac");
  cmds["list"] = app.add_subcommand("list");
  return cmds;
}

// The checked arguments into `c`, and membar's size; what is wrong with them otherwise.
rpcie::Result<std::uint64_t> common_fill(const Args& a, Common& c) {
  auto address = rpcie::address_parse(a.remote, rpcie::kDefaultPort);
  if (!address) return tl::unexpected(address.error());
  auto key = rpcie::auth::key_load(a.psk);
  if (!key) return tl::unexpected(key.error());
  std::string why;
  auto choice = rpcie::providers::provider_parse(a.provider, &why);
  if (!choice) return rpcie::fail(EINVAL, why);
  auto data_path = rpcie::data_path_choice_parse(a.data_path);
  if (!data_path) return tl::unexpected(data_path.error());
  auto window = rpcie::size_parse(a.window);
  if (!window) return rpcie::fail(EINVAL, "--window: not a size: " + a.window);
  auto size = rpcie::size_parse(a.size);
  if (!size) return rpcie::fail(EINVAL, "membar size: not a size: " + a.size);
  c.host = address->first;
  c.port = address->second;
  c.options.key = std::make_shared<const rpcie::auth::Key>(std::move(*key));
  c.options.provider = *choice;
  c.options.data_path = *data_path;
  c.window = *window;
  return *size;
}

int subcommand_run(std::map<std::string, CLI::App*>& cmds, const Args& a, const Common& c, std::uint64_t size) {
  const auto& name = a.name;
  if (*cmds["edu"]) return edu_check(c, name);
  if (*cmds["posted"])
    return posted_check(c, name, std::chrono::milliseconds(a.gap_ms), a.limit, a.outliers, a.peer_pid);
  if (*cmds["push"]) return push_check(c, name);
  if (*cmds["membar"]) return membar_check(c, name, size);
  if (*cmds["errors"]) return errors_check(c, name);
  if (*cmds["hostile"]) return hostile_check(c, name);
  if (*cmds["busy"]) return busy_check(c, name);
  if (*cmds["hold"]) return hold(c, name, a.seconds);
  if (*cmds["reattach"]) return reattach_check(c, name);
  if (*cmds["postedfail"]) return postedfail_check(c, name);
  if (*cmds["linkloss"]) return linkloss_check(c, name);
  if (*cmds["resume"]) return resume_check(c, name, a.seconds);
  if (*cmds["dmaresume"]) return dma_resume_check(c, name);
  if (*cmds["barresume"]) return bar_resume_check(c, name, a.go);
  if (*cmds["attachfail"]) return attachfail_check(c, name, a.expect_code, a.expect_text);
  if (*cmds["badmac"]) return badmac_check(c);
  return list_print(c);
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  CLI::App app{"rpcie-devcheck"};
  Args a;
  Common c;
  auto cmds = cli_build(app, a, c);
  CLI11_PARSE(app, argc, argv);
  auto size = common_fill(a, c);
  if (!size) {
    std::printf("FAIL: bad arguments: %s\n", size.error().describe().c_str());
    return 2;
  }
  return subcommand_run(cmds, a, c, *size);
}
