// rpcie-bench — raw libfabric vs the rpcie core, side by side, in one run.
//
//   rpcie-bench [--provider P] [--rounds N] [-o json]             both ends, two pinned processes
//   rpcie-bench --serve [--listen ADDR[:PORT]] [--provider P]     the target end, for one client
//   rpcie-bench -r HOST[:PORT] [--provider P] [--rounds N]         the initiator end
//   rpcie-bench --device | --frontend ...                          see device.hpp, frontend.hpp
//
// The rows of each mode are described in transport.hpp, device.hpp and frontend.hpp, the
// method (warm-up, rounds of alternating slices, medians) in driver.hpp, the connections
// between the two ends in link.hpp. See docs/rpcie-bench.md.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "../common.hpp"
#include "commit.hpp"
#include "device.hpp"
#include "frontend.hpp"
#include "link.hpp"
#include "options.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/process.hpp"
#include "rpcie/units.hpp"
#include "support.hpp"
#include "transport.hpp"

namespace {

using namespace rpcie;
using namespace rpcie::bench;

// Fills `options` from the command line; an exit status when the program is to end here
// (--help, usage errors).
std::optional<int> options_parse(int argc, char** argv, Options& options) {
  CLI::App app{"rpcie-bench: raw libfabric vs rpcie, side by side"};
  std::string sizes;
  app.add_option("--provider", options.provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  app.add_option("--rounds", options.rounds, "rounds per workload and size (>= 1; ratios are medians)")
      ->check(CLI::Range(1u, 101u));
  app.add_option("-o,--output", options.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--serve", options.serve, "be the target end for one initiator");
  app.add_option("--listen", options.listen, "ADDR[:PORT] for --serve (default 127.0.0.1:0 prints the port)");
  app.add_option("-r,--remote", options.remote, "HOST[:PORT] of a --serve peer");
  app.add_option("--cpu", options.cpu, "pin this process to a CPU");
  app.add_flag("-v,--verbose", options.verbose, "print every round to stderr");
  app.add_option("--progress-fd", options.progress_fd,
                 "draw the progress line on this descriptor when it is a terminal (default 2, stderr)")
      ->check(CLI::Range(0, 1023));
  app.add_flag("--target-no-wait-fd", options.target_no_wait_fd,
               "the rpcie RMA target's CQ gets no wait fd (backs off with sleeps when idle)");
  app.add_flag("--target-progress-thread", options.target_progress_thread,
               "the rpcie RMA target is a ProgressThread that sleeps when idle, as in a device server "
               "(default: it busy-polls, as the raw target does)");
  app.add_flag("--delivery-complete", options.delivery_complete,
               "rpcie writes complete only when delivered at the target");
  app.add_option("--sizes", sizes, "comma-separated RMA sizes (K/M suffixes)");
  app.add_option("--only", options.only, "run only these rows, by name (comma-separated: e.g. irq,irq_loaded)")
      ->delimiter(',');
  app.add_flag("--device", options.device,
               "device workloads through the client API against an rpcie-exportd started here "
               "(mmio_read, bar_write, bar_read, edu_dma, edu_dma_push, edu_dma_to_ram)");
  app.add_option("--exportd", options.exportd, "rpcie-exportd to start for --device (default: next to this program)");
  app.add_option("--data-path", options.data_path,
                 "--device, --frontend: sealed, open or auto (what the clients ask for; default auto)")
      ->check(CLI::IsMember({"sealed", "open", "auto"}));
  app.add_option("--raw-cipher", options.raw_cipher,
                 "--device, sealed data path: the bar rows' raw side seals its messages (aead, default) or sends "
                 "the same messages unsealed (none: the transport's share alone)")
      ->check(CLI::IsMember({"aead", "none"}));
  app.add_flag("--frontend", options.frontend,
               "file front end (rpcie-hostd started here) vs the client API: reg_read, bar_write, bar_read, irq, "
               "and the mapped-BAR rows");
  app.add_option("--splice-writes", options.splice_writes,
                 "--frontend: on or off, hostd's --splice-writes (default on, as hostd's)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--hostd", options.hostd, "rpcie-hostd to start for --frontend (default: next to this program)");
  app.add_option("--psk-file", options.psk_file,
                 "--frontend -r HOST: the running exporter's key (it exports edu-a, edu-b, mem-a, mem-b)");
  try {
    app.parse(argc, argv);
    if (options.serve && !options.remote.empty()) throw CLI::ValidationError("--serve and --remote exclude each other");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (sizes.empty()) return std::nullopt;
  options.sizes.clear();
  for (std::size_t start = 0; start <= sizes.size();) {
    std::size_t end = sizes.find(',', start);
    if (end == std::string::npos) end = sizes.size();
    auto size = size_parse(std::string_view(sizes).substr(start, end - start));
    if (!size || *size > kMaxSize) {
      std::fprintf(stderr, "rpcie-bench: error: bad size list '%s' (each 1..4M)\n", sizes.c_str());
      return 2;
    }
    options.sizes.push_back(*size);
    start = end + 1;
  }
  return std::nullopt;
}

int frontend_run(const Options& options, const providers::ProviderChoice& choice) {
  FrontendOptions frontend;
  frontend.provider = !choice.automatic && choice.kind == providers::ProviderKind::shm ? "shm" : "tcp";
  frontend.rounds = options.rounds;
  frontend.json = options.json();
  frontend.verbose = options.verbose;
  frontend.progress_fd = options.progress_fd;
  frontend.exportd = options.exportd;
  frontend.hostd = options.hostd;
  frontend.data_path = options.data_path;
  frontend.splice_writes = options.splice_writes;
  frontend.only = options.only;
  if (!options.remote.empty()) {
    auto address = address_parse(options.remote, kDefaultPort);
    if (!address) return die(address.error().describe());
    frontend.remote_host = address->first;
    frontend.remote_port = address->second;
    frontend.psk_file = options.psk_file;
  }
  return frontend_bench(frontend);
}

// The initiator's end: the transport rows or, with --device, the device rows.
int initiator_run(const std::string& host, std::uint16_t port, const LinkOptions& link_options,
                  const Options& options) {
  auto link = Link::connect(host, port, link_options);
  if (!link) return die(link.error().describe());
  const int status = options.device ? device_bench(**link, options) : transport_bench(**link, options);
  quit_send((*link)->control);  // after an error too: the target ends quietly, not on a reset connection
  return status;
}

// Both ends here: the target in a child pinned to CPU 1, the initiator on CPU 0.
int both_ends_run(Listener& listener, const LinkOptions& link_options, const Options& options) {
  if (!options.json())
    std::printf("# commit: %s\n# tcp congestion control: %s\n%s", kBenchCommit, tcp_congestion_control().c_str(),
                table_header(options.device ? device_columns() : transport_columns()).c_str());
  std::fflush(stdout);
  pid_t child = fork();
  if (child < 0) return die("fork");
  if (child == 0) {
    tools::cpu_pin(1);
    _exit(target_run(listener, link_options));
  }
  tools::cpu_pin(0);
  int rc = initiator_run("127.0.0.1", listener.port(), link_options, options);
  // The target exits after "quit"; never wait for it forever.
  int status = 0;
  for (int i = 0; i < 100; ++i) {
    if (waitpid(child, &status, WNOHANG) == child) return rc ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
    usleep(50000);
  }
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  return rc ? rc : 1;
}

}  // namespace

int main(int argc, char** argv) {
  signals_init();
  Options options;
  if (auto status = options_parse(argc, argv, options)) return *status;
  std::string why;
  auto choice = providers::provider_choice_resolve(options.provider, &why);
  if (!choice) {
    std::fprintf(stderr, "rpcie-bench: error: %s\n", why.c_str());
    return 2;
  }
  if (options.frontend) return frontend_run(options, *choice);
  if (options.cpu >= 0) tools::cpu_pin(options.cpu);
  const LinkOptions link_options{*choice, options.delivery_complete, options.target_no_wait_fd,
                                 options.target_progress_thread};
  if (!options.remote.empty()) {
    auto address = address_parse(options.remote, kDefaultPort);
    if (!address) return die(address.error().describe());
    return initiator_run(address->first, address->second, link_options, options);
  }
  auto address = address_parse(options.listen, 0);
  if (!address) return die(address.error().describe());
  auto listener = Listener::open(address->first, address->second);
  if (!listener) return die(listener.error().describe());
  if (options.serve) {
    std::fprintf(stderr, "rpcie-bench: serving on port %u\n", listener->port());
    return target_run(*listener, link_options);
  }
  return both_ends_run(*listener, link_options, options);
}
