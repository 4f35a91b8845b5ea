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

int main(int argc, char** argv) {
  rpcie::signals_init();
  CLI::App app{"rpcie-devcheck"};
  app.require_subcommand(1);
  std::string remote, psk = "/etc/rpcie/psk", provider = "auto", window = "1M";
  Common c;
  app.add_option("-r,--remote", remote)->required();
  app.add_option("--psk-file", psk);
  app.add_option("--name", c.options.name);
  app.add_option("--provider", provider);
  app.add_option("--window", window);
  std::string data_path = "auto";
  app.add_option("--data-path", data_path, "sealed, open or auto (the client's choice)");
  std::string name;
  std::string size = "64M";
  int seconds = 30;
  std::map<std::string, CLI::App*> cmds;
  for (const char* cmd : {"edu", "push", "posted", "membar", "errors", "hostile", "busy", "hold", "reattach",
                          "postedfail", "linkloss", "attachfail", "resume", "dmaresume", "barresume"}) {
    cmds[cmd] = app.add_subcommand(cmd);
    cmds[cmd]->add_option("export", name)->required();
  }
  cmds["membar"]->add_option("size", size);
  int gap_ms = 0;
  double limit = 100;
  int outliers = 0;
  cmds["posted"]->add_option("--gap-ms", gap_ms, "pause before each burst")->check(CLI::Range(0, 1000));
  cmds["posted"]->add_option("--limit", limit, "round trips a burst may take")->check(CLI::Range(1.0, 10000.0));
  cmds["posted"]
      ->add_option("--outliers", outliers, "bursts of the five that may take longer")
      ->check(CLI::Range(0, 4));
  int peer_pid = 0;
  cmds["posted"]->add_option("--exporter-pid", peer_pid, "the exporter's process, whose threads a slow burst reports");
  cmds["hold"]->add_option("seconds", seconds);
  cmds["resume"]->add_option("seconds", seconds);
  std::string go;
  cmds["barresume"]->add_option("go", go, "created by the script once the link is down")->required();
  int expect_code = 0;
  std::string expect_text;
  cmds["attachfail"]->add_option("errno", expect_code)->required();
  cmds["attachfail"]->add_option("text", expect_text)->required();
  cmds["badmac"] = app.add_subcommand("badmac");
  cmds["list"] = app.add_subcommand("list");
  CLI11_PARSE(app, argc, argv);

  auto address = rpcie::address_parse(remote, rpcie::kDefaultPort);
  auto key = rpcie::auth::key_load(psk);
  std::string why;
  auto choice = rpcie::providers::provider_parse(provider, &why);
  auto window_bytes = rpcie::size_parse(window);
  auto data_path_choice = rpcie::data_path_choice_parse(data_path);
  if (!data_path_choice) {
    std::printf("FAIL: bad arguments: %s\n", data_path_choice.error().message.c_str());
    return 2;
  }
  c.options.data_path = *data_path_choice;
  auto size_bytes = rpcie::size_parse(size);
  if (!address || !key || !choice || !window_bytes || !size_bytes) {
    std::printf("FAIL: bad arguments: %s\n", !address ? address.error().message.c_str()
                                             : !key   ? key.error().describe().c_str()
                                                      : why.c_str());
    return 2;
  }
  c.host = address->first;
  c.port = address->second;
  c.options.key = std::make_shared<const rpcie::auth::Key>(std::move(*key));
  c.options.provider = *choice;
  c.window = *window_bytes;

  if (*cmds["edu"]) return edu_check(c, name);
  if (*cmds["posted"]) return posted_check(c, name, std::chrono::milliseconds(gap_ms), limit, outliers, peer_pid);
  if (*cmds["push"]) return push_check(c, name);
  if (*cmds["membar"]) return membar_check(c, name, *size_bytes);
  if (*cmds["errors"]) return errors_check(c, name);
  if (*cmds["hostile"]) return hostile_check(c, name);
  if (*cmds["busy"]) return busy_check(c, name);
  if (*cmds["hold"]) return hold(c, name, seconds);
  if (*cmds["reattach"]) return reattach_check(c, name);
  if (*cmds["postedfail"]) return postedfail_check(c, name);
  if (*cmds["linkloss"]) return linkloss_check(c, name);
  if (*cmds["resume"]) return resume_check(c, name, seconds);
  if (*cmds["dmaresume"]) return dma_resume_check(c, name);
  if (*cmds["barresume"]) return bar_resume_check(c, name, go);
  if (*cmds["attachfail"]) return attachfail_check(c, name, expect_code, expect_text);
  if (*cmds["badmac"]) return badmac_check(c);
  return list_print(c);
}
