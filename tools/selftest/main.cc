// rpcie-selftest — end-to-end check of the rpcie transport between two processes.
//
//   rpcie-selftest serve   [--listen ADDR[:PORT]] [--provider P] [--sessions N] [--port-file F]
//   rpcie-selftest connect -r HOST[:PORT] [--provider P] [--size N] [--max-transfer N] [-o json]
//
// The client checks, against the server's own view of its memory: messages of many sizes
// echoed byte for byte, a one-sided RMA write whose checksum the server computes after an
// ordered notification, and an RMA read back. Exit 0 when every check passed.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "../common.hpp"
#include "rpcie/log.hpp"
#include "rpcie/process.hpp"
#include "rpcie/session.hpp"
#include "rpcie/units.hpp"

namespace {

using namespace rpcie;
using namespace std::chrono_literals;

constexpr std::uint32_t kRegionId = 0;

struct ServeOptions {
  std::string listen = "0.0.0.0";
  std::string provider;
  std::size_t region_size = 16u << 20;
  unsigned sessions = 0;  // 0: until SIGTERM
  std::string port_file;
  double handshake_timeout = 5.0;
  double idle_timeout = 30.0;
};

// Serves one peer until goodbye, an error, or idle_timeout without a message.
bool session_serve(Socket socket, const ServeOptions& o, providers::ProviderChoice choice) {
  auto memory = HostBuffer::create(o.region_size);
  if (!memory) {
    RPCIE_LOG_ERROR("selftest", "{}", memory.error().describe());
    return false;
  }
  std::string who = socket.peer_address();
  LocalRegion region{kRegionId, memory->data(), memory->size()};
  SessionOptions so;
  so.provider = choice;
  so.cq_wait_fd = true;  // a server idles between requests: sleep in poll(2)
  auto session = Session::accept(std::move(socket), so, std::span(&region, 1),
                                 Deadline::after(std::chrono::duration_cast<Deadline::Clock::duration>(
                                     std::chrono::duration<double>(o.handshake_timeout))));
  if (!session) {
    RPCIE_LOG_WARN("selftest", "handshake with {} failed: {}", who, session.error().describe());
    return false;
  }
  Channel& ch = (*session)->channel();
  auto idle = std::chrono::duration_cast<Deadline::Clock::duration>(std::chrono::duration<double>(o.idle_timeout));
  for (;;) {
    auto m = ch.message_recv(Deadline::after(idle));
    if (!m) {
      if (m.error().code == EPROTO && !ch.failure()) continue;  // dropped a malformed message
      RPCIE_LOG_WARN("selftest", "session with {} ended: {}", who, m.error().describe());
      return false;
    }
    const auto& d = **m;
    auto reply_deadline = Deadline::after(5s);
    Result<void> sent;
    if (auto* ping = std::get_if<proto::Ping>(&d.message)) {
      sent = ch.message_send(proto::Pong{{ping->data}}, d.header.request_id, reply_deadline);
    } else if (auto* n = std::get_if<proto::RmaNotify>(&d.message)) {
      proto::ReadReply r;
      if (n->region != kRegionId || n->offset > o.region_size || n->length > o.region_size - n->offset) {
        r.status = EINVAL;
      } else {
        r.value = proto::checksum_fnv1a(std::span(memory->data() + n->offset, n->length));
      }
      sent = ch.message_send(r, d.header.request_id, reply_deadline);
    } else if (std::holds_alternative<proto::Goodbye>(d.message)) {
      RPCIE_LOG_INFO("selftest", "session with {} finished", who);
      return true;
    } else {
      sent = ch.message_send(proto::ErrorMsg{EOPNOTSUPP, "selftest server does not handle this message"},
                             d.header.request_id, reply_deadline);
    }
    if (!sent) {
      RPCIE_LOG_WARN("selftest", "reply to {} failed: {}", who, sent.error().describe());
      return false;
    }
  }
}

// The provider and the address named on the command line; a usage error is printed, and
// gives nullopt.
struct Peer {
  providers::ProviderChoice choice;
  std::pair<std::string, std::uint16_t> address;
};
std::optional<Peer> peer_resolve(const std::string& provider, const std::string& address, std::uint16_t default_port) {
  std::string why;
  auto choice = providers::provider_choice_resolve(provider, &why);
  if (!choice) {
    std::fprintf(stderr, "rpcie-selftest: error: %s\n", why.c_str());
    return std::nullopt;
  }
  auto parsed = address_parse(address, default_port);
  if (!parsed) {
    std::fprintf(stderr, "rpcie-selftest: error: %s\n", parsed.error().describe().c_str());
    return std::nullopt;
  }
  return Peer{*choice, std::move(*parsed)};
}

int serve(const ServeOptions& o) {
  const std::optional<Peer> peer = peer_resolve(o.provider, o.listen, 0);
  if (!peer) return 2;
  const auto& addr = peer->address;
  auto listener = Listener::open(addr.first == "0.0.0.0" ? "" : addr.first, addr.second);
  if (!listener) {
    std::fprintf(stderr, "rpcie-selftest: error: %s\n", listener.error().describe().c_str());
    return 1;
  }
  if (!o.port_file.empty()) {
    std::string tmp = o.port_file + ".tmp";
    std::ofstream(tmp) << listener->port() << "\n";
    std::rename(tmp.c_str(), o.port_file.c_str());  // appears whole, never half-written
  }
  std::fprintf(stderr, "rpcie-selftest: listening on port %u\n", listener->port());
  // One thread per peer: a slow or hostile handshake never blocks the others.
  std::vector<std::thread> peers;
  std::atomic<unsigned> ended{0}, ok{0};
  unsigned accepted = 0;
  while (!rpcie::stop_requested().load() && (o.sessions == 0 || accepted < o.sessions)) {
    auto s = listener->accept(Deadline::after(200ms));
    if (!s) {
      if (s.error().code == ETIMEDOUT) continue;
      RPCIE_LOG_WARN("selftest", "{}", s.error().describe());
      std::this_thread::sleep_for(100ms);  // e.g. EMFILE: do not spin
      continue;
    }
    ++accepted;
    peers.emplace_back([&, sock = std::move(*s)]() mutable {
      if (session_serve(std::move(sock), o, peer->choice)) ++ok;
      ++ended;
    });
  }
  for (auto& t : peers) t.join();
  std::fprintf(stderr, "rpcie-selftest: %u sessions, %u completed cleanly\n", ended.load(), ok.load());
  return 0;
}

struct ConnectOptions {
  std::string remote;
  std::string provider;
  std::size_t size = 8u << 20;
  std::size_t max_transfer = 0;
  bool no_saw = false;
  std::string output = "text";
};

struct Check {
  std::string name;
  bool ok;
  std::string detail;
};

// What the checks share: the channel, the registered memory and the peer's region.
struct Probe {
  Channel& ch;
  HostBuffer& memory;
  const MemoryRegion& mr;
  Result<RemoteRegion> remote;
  std::size_t span = 0;  // bytes of the region both sides have
  std::mt19937_64 rng{std::random_device{}()};

  static Deadline deadline() { return Deadline::after(10s); }
  Result<const proto::Decoded*> reply(std::uint64_t id) {
    auto m = ch.message_recv(deadline());
    if (m && (*m)->header.request_id != id) return fail(EPROTO, "reply out of order");
    return m;
  }
};

// 1. Messages: sizes from tiny (inject) to the protocol's maximum, echoed exactly.
Check messages_check(Probe& p) {
  std::vector<std::uint8_t> payload(proto::kMaxPayload);
  std::uint64_t id = 1;
  for (std::size_t size : {std::size_t{0}, std::size_t{8}, std::size_t{40}, std::size_t{1000}, std::size_t{4096},
                           std::size_t{60000}, proto::kMaxPayload}) {
    for (auto& b : payload) b = static_cast<std::uint8_t>(p.rng());
    std::span<const std::uint8_t> data(payload.data(), size);
    auto s = p.ch.message_send(proto::Ping{data}, id, p.deadline());
    auto r = s ? p.reply(id) : tl::unexpected(s.error());
    const proto::Pong* pong = r ? std::get_if<proto::Pong>(&(*r)->message) : nullptr;
    if (!pong || proto::checksum_fnv1a(pong->data) != proto::checksum_fnv1a(data) || pong->data.size() != size)
      return {
          "messages", false,
          "echo of " + std::to_string(size) + " bytes: " + (r ? std::string("payload differs") : r.error().describe())};
    ++id;
  }
  return {"messages", true, "7 sizes up to 64 KiB echoed"};
}

// 2. A malformed message over the fabric is dropped by the server; the session goes on.
Check malformed_check(Probe& p) {
  std::vector<std::uint8_t> junk(proto::kHeaderSize + 16, 0xa5);
  auto s = p.ch.bytes_send(junk, p.deadline());
  std::uint8_t probe[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  if (s) s = p.ch.message_send(proto::Ping{probe}, 200, p.deadline());
  auto r = s ? p.reply(200) : tl::unexpected(s.error());
  bool ok = r && std::holds_alternative<proto::Pong>((*r)->message);
  return {"malformed", ok,
          ok ? "garbage dropped, next ping answered" : (r ? "unexpected reply" : r.error().describe())};
}

// 3. RMA write, then an ordered notification: the server's checksum of its memory must equal
//    ours — the write is visible before the message is handled. Returns the checksum.
Check rma_write_check(Probe& p, std::uint64_t& written) {
  for (std::size_t i = 0; i < p.span; i += 8) {
    std::uint64_t v = p.rng();
    std::memcpy(p.memory.data() + i, &v, std::min<std::size_t>(8, p.span - i));
  }
  written = proto::checksum_fnv1a(std::span(p.memory.data(), p.span));
  Result<void> r = p.remote ? Result<void>{} : tl::unexpected(p.remote.error());
  if (r) r = p.ch.rma_write(p.mr, 0, *p.remote, 0, p.span, p.deadline());
  if (r) r = p.ch.message_send_after_writes(proto::RmaNotify{kRegionId, 0, p.span, written}, 100, p.deadline());
  auto rep = r ? p.reply(100) : tl::unexpected(r.error());
  auto* rr = rep ? std::get_if<proto::ReadReply>(&(*rep)->message) : nullptr;
  bool ok = rr && rr->status == 0 && rr->value == written;
  return {"rma_write", ok,
          ok ? std::to_string(p.span) + " bytes, checksum " + fmt::format("{:016x}", written)
             : (rep ? fmt::format("server checksum {:016x}, ours {:016x}", rr ? rr->value : 0, written)
                    : rep.error().describe())};
}

// 4. RMA read back into cleared memory.
Check rma_read_check(Probe& p, std::uint64_t written) {
  std::memset(p.memory.data(), 0, p.span);
  Result<void> r =
      p.remote ? p.ch.rma_read(p.mr, 0, *p.remote, 0, p.span, p.deadline()) : tl::unexpected(p.remote.error());
  if (r) r = p.ch.rma_flush(p.deadline());
  std::uint64_t got = proto::checksum_fnv1a(std::span(p.memory.data(), p.span));
  bool ok = r && got == written;
  return {"rma_read", ok,
          ok ? std::to_string(p.span) + " bytes read back" : (r ? "data differs" : r.error().describe())};
}

// 5. Out-of-range RMA is refused locally with EINVAL, and the channel stays healthy.
Check rma_bounds_check(Probe& p) {
  auto r = p.remote ? p.ch.rma_write(p.mr, 0, *p.remote, p.remote->length - 4, 8, p.deadline())
                    : tl::unexpected(p.remote.error());
  bool ok = !r && r.error().code == EINVAL && !p.ch.failure();
  return {"rma_bounds", ok, ok ? "write past the peer region refused (EINVAL)" : "not refused"};
}

void report_print(const std::vector<Check>& checks, Session& session, const ChannelStats& stats, bool json) {
  bool all = true;
  for (const auto& c : checks) all = all && c.ok;
  Channel& ch = session.channel();
  if (json) {
    nlohmann::json j;
    j["provider"] = session.peer().provider;
    j["ok"] = all;
    j["rma_chunks"] = stats.rma_writes + stats.rma_reads;
    j["ordering"] = ch.delivery_complete() ? "delivery_complete" : "saw";
    for (const auto& c : checks) j["checks"].push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::string max = ch.max_transfer() >= (std::size_t{1} << 62) ? "unlimited" : std::to_string(ch.max_transfer());
  std::printf("provider %s, %llu rma chunks (max transfer %s), write-then-message ordering by %s\n",
              session.peer().provider.c_str(), static_cast<unsigned long long>(stats.rma_writes + stats.rma_reads),
              max.c_str(), ch.delivery_complete() ? "delivery-complete" : "FI_ORDER_SAW");
  for (const auto& c : checks) std::printf("%-4s %-10s %s\n", c.ok ? "ok" : "FAIL", c.name.c_str(), c.detail.c_str());
}

int connect(const ConnectOptions& o) {
  const std::optional<Peer> peer = peer_resolve(o.provider, o.remote, kDefaultPort);
  if (!peer) return 2;
  const auto& addr = peer->address;
  auto memory = HostBuffer::create(o.size);
  if (!memory) {
    std::fprintf(stderr, "rpcie-selftest: error: %s\n", memory.error().describe().c_str());
    return 1;
  }
  LocalRegion region{kRegionId, memory->data(), memory->size()};
  SessionOptions so;
  so.provider = peer->choice;
  so.channel.max_transfer = o.max_transfer;
  so.channel.delivery_complete_force = o.no_saw;
  auto session = Session::connect(addr.first, addr.second, so, std::span(&region, 1), Deadline::after(10s));
  if (!session) {
    std::fprintf(stderr, "rpcie-selftest: error: %s\n", session.error().describe().c_str());
    return 1;
  }
  Channel& ch = (*session)->channel();
  Probe p{ch, *memory, (*session)->region(0), (*session)->peer_region(kRegionId)};
  p.span = p.remote ? std::min<std::size_t>(o.size, p.remote->length) : 0;
  std::uint64_t written = 0;
  std::vector<Check> checks{messages_check(p), malformed_check(p)};
  checks.push_back(rma_write_check(p, written));
  checks.push_back(rma_read_check(p, written));
  checks.push_back(rma_bounds_check(p));
  auto stats = ch.stats();
  (void)ch.message_send(proto::Goodbye{}, 0, Probe::deadline());
  // Let the goodbye leave before the endpoint closes (rxm sends lazily).
  (void)ch.progress_idle(Deadline::after(50ms));
  report_print(checks, **session, stats, o.output == "json");
  bool all = true;
  for (const auto& c : checks) all = all && c.ok;
  return all ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  rpcie::signals_init();
  rpcie::stop_signals_install();
  CLI::App app{"rpcie transport self-check"};
  app.require_subcommand(1);
  ServeOptions so;
  auto* serve_cmd = app.add_subcommand("serve", "answer self-check clients");
  serve_cmd->add_option("--listen", so.listen, "ADDR[:PORT] to listen on (port 0: any)");
  serve_cmd->add_option("--provider", so.provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  serve_cmd->add_option("--sessions", so.sessions, "exit after this many sessions (0: run until SIGTERM)");
  serve_cmd->add_option("--port-file", so.port_file, "write the listening port here");
  serve_cmd->add_option("--handshake-timeout", so.handshake_timeout, "seconds a peer has to complete its hello")
      ->check(CLI::PositiveNumber);
  ConnectOptions co;
  std::string size_text, max_text;
  auto* connect_cmd = app.add_subcommand("connect", "run the checks against a server");
  connect_cmd->add_option("-r,--remote", co.remote, "HOST[:PORT]")->required();
  connect_cmd->add_option("--provider", co.provider, "auto, tcp, shm, verbs, efa, tcp;ofi_rxm, verbs;ofi_rxm");
  connect_cmd->add_option("--size", size_text, "bytes moved by RMA (K/M/G suffixes; default 8M)");
  connect_cmd->add_option("--max-transfer", max_text, "split RMA into chunks of at most this size");
  connect_cmd->add_flag("--no-saw", co.no_saw, "order write-then-notify by delivery-complete writes, not FI_ORDER_SAW");
  connect_cmd->add_option("-o,--output", co.output, "text or json")->check(CLI::IsMember({"text", "json"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto sized = [](const std::string& text, std::size_t& out) {
    if (text.empty()) return true;
    auto v = rpcie::size_parse(text);
    if (!v) {
      std::fprintf(stderr, "rpcie-selftest: error: bad size '%s'\n", text.c_str());
      return false;
    }
    out = *v;
    return true;
  };
  if (!sized(size_text, co.size) || !sized(max_text, co.max_transfer)) return 2;
  return serve_cmd->parsed() ? serve(so) : connect(co);
}
