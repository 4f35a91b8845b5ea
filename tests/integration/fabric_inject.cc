// rpcie-test-fabric-inject: a keyless attacker on the fabric (docs/security.md 4.1, 4.2). It
// opens its own tcp;ofi_rxm endpoint and sends data-path messages, in clear, to a fabric
// address it has learnt by watching (an IP and a port): replies for request ids 1..N with a
// value of its choosing, errors for posted writes, and interrupts with counts up to 2^64-1.
// A client must take none of them for its exporter's.
//
//   rpcie-test-fabric-inject NODE TARGET_IP TARGET_PORT COUNT
//
// NODE is the local address to bind. Prints "sent N" once every message is posted and the
// endpoint has had a moment to push them out; exit 1 with a message on any failure.
//
// RMA mode (issue 12 point 7; docs/security.md 5.2): one-sided reads and writes with memory
// keys seen on the wire or guessed, from an endpoint that holds no key of its own.
//
//   rpcie-test-fabric-inject rma NODE TARGET_IP TARGET_PORT KEYFILE LENGTH
//
// KEYFILE has one candidate a line, "KEY ADDR" (C integer syntax: 0x... or decimal). For
// each, an 8-byte fi_read at ADDR (at 0 when ADDR + 8 > LENGTH, the largest region the test
// expects); where it succeeds, an fi_write of a marker, a read back, and a write of the
// bytes it read (the attacker leaves no trace). One line a result:
//   read-ok KEY ADDR VALUE | write-ok KEY ADDR | write-lost KEY ADDR | refused KEY ADDR ERR
// where ERR is the completion's error (errno, or ETIMEDOUT when nothing completed within
// 200 ms), then "summary tried N read-ok R write-ok W refused F". After any refusal the
// endpoint is opened anew (a target may drop the connection). Every wait has a deadline and
// the whole run stops after 40 s ("summary ... stopped"). Exit 0 whatever the target did; 1
// on a usage or local error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <rdma/fi_rma.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rpcie/deadline.hpp"
#include "rpcie/fabric.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/providers/provider.hpp"

namespace {

int usage_fail(const char* why) {
  std::fprintf(stderr, "rpcie-test-fabric-inject: %s\n", why);
  return 1;
}

// Posts `bytes` to `peer`, retrying on EAGAIN (progressing the CQ) until a deadline.
bool bytes_post(rpcie::Fabric& f, fi_addr_t peer, const std::vector<std::uint8_t>& bytes) {
  const auto deadline = rpcie::Deadline::after(std::chrono::seconds(5));
  fi_cq_data_entry entries[16];
  for (;;) {
    const ssize_t rc = fi_inject(f.ep(), bytes.data(), bytes.size(), peer);
    if (rc == 0) return true;
    if (rc != -FI_EAGAIN || deadline.expired()) {
      std::fprintf(stderr, "rpcie-test-fabric-inject: fi_inject: %s\n", fi_strerror(static_cast<int>(-rc)));
      return false;
    }
    (void)fi_cq_read(f.cq(), entries, 16);
  }
}

// --- RMA mode ---------------------------------------------------------------------------------

struct Candidate {
  std::uint64_t key;
  std::uint64_t addr;
};

// One keyless endpoint with an 8-byte local buffer (registered where the provider wants
// local descriptors) and the target in its AV.
struct Attacker {
  std::unique_ptr<rpcie::Fabric> fabric;
  fi_addr_t peer = FI_ADDR_UNSPEC;
  fid_mr* mr = nullptr;
  void* desc = nullptr;
  alignas(8) std::uint64_t buf = 0;

  Attacker() = default;
  Attacker(const Attacker&) = delete;
  Attacker& operator=(const Attacker&) = delete;
  ~Attacker() { close(); }
  void close() {
    if (mr) (void)fi_close(&mr->fid);
    mr = nullptr;
    desc = nullptr;
    fabric.reset();
  }
};

// False (with a message) on a local failure.
bool local_fail(const char* why) {
  std::fprintf(stderr, "rpcie-test-fabric-inject: %s\n", why);
  return false;
}

bool attacker_open(Attacker& a, const std::string& node, const sockaddr_in& target) {
  a.close();
  rpcie::FabricOptions options;
  options.adapter = &rpcie::providers::provider_get(rpcie::providers::ProviderKind::tcp);
  options.node = node;
  options.rma = true;
  auto fabric = rpcie::Fabric::open(options);
  if (!fabric) return local_fail(fabric.error().describe().c_str());
  a.fabric = std::move(*fabric);
  if (!a.fabric->rma_enabled()) return local_fail("the provider granted no FI_RMA");
  if (a.fabric->mr_policy().local_desc) {
    const int rc = fi_mr_reg(a.fabric->domain(), &a.buf, sizeof a.buf, FI_READ | FI_WRITE, 0, 0, 0, &a.mr, nullptr);
    if (rc) return local_fail(fi_strerror(-rc));
    a.desc = fi_mr_desc(a.mr);
  }
  const auto* raw = reinterpret_cast<const std::uint8_t*>(&target);
  auto peer = a.fabric->peer_insert(std::span(raw, sizeof target));
  if (!peer) return local_fail(peer.error().describe().c_str());
  a.peer = *peer;
  return true;
}

// Posts one 8-byte read (or write of a.buf) and waits for its completion: 0 on success, the
// completion's error otherwise, ETIMEDOUT past 200 ms.
int attacker_rma(Attacker& a, bool write, const Candidate& c) {
  const auto deadline = rpcie::Deadline::after(std::chrono::milliseconds(200));
  static int context;
  fid_ep* ep = a.fabric->ep();
  fid_cq* cq = a.fabric->cq();
  fi_cq_data_entry entries[4];
  for (;;) {
    const ssize_t rc = write ? fi_write(ep, &a.buf, sizeof a.buf, a.desc, a.peer, c.addr, c.key, &context)
                             : fi_read(ep, &a.buf, sizeof a.buf, a.desc, a.peer, c.addr, c.key, &context);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN) return static_cast<int>(-rc);
    if (deadline.expired()) return ETIMEDOUT;
    (void)fi_cq_read(cq, entries, 4);
  }
  while (!deadline.expired()) {
    const ssize_t n = fi_cq_read(cq, entries, 4);
    if (n > 0) return 0;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq, &err, 0) < 0) return EIO;
      return err.err ? err.err : EIO;
    }
    if (n != -FI_EAGAIN) return static_cast<int>(-n);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return ETIMEDOUT;
}

int rma_main(int argc, char** argv) {
  if (argc != 7) return usage_fail("usage: rma NODE TARGET_IP TARGET_PORT KEYFILE LENGTH");
  const std::string node = argv[2];
  const long port = std::strtol(argv[4], nullptr, 10);
  const std::uint64_t length = std::strtoull(argv[6], nullptr, 0);
  if (port <= 0 || port > 65535 || length < 8) return usage_fail("bad port or length");
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, argv[3], &target.sin_addr) != 1) return usage_fail("bad target IP");
  std::ifstream in(argv[5]);
  if (!in) return usage_fail("cannot read the key file");
  std::vector<Candidate> candidates;
  for (std::string line; std::getline(in, line) && candidates.size() < 1024;) {
    std::istringstream words(line);
    std::string k, ad;
    if (!(words >> k >> ad)) continue;
    Candidate c{std::strtoull(k.c_str(), nullptr, 0), std::strtoull(ad.c_str(), nullptr, 0)};
    if (c.addr > length - 8) c.addr = 0;
    candidates.push_back(c);
  }

  Attacker a;
  if (!attacker_open(a, node, target)) return 1;
  const auto total = rpcie::Deadline::after(std::chrono::seconds(40));
  long tried = 0, reads = 0, writes = 0, refusals = 0;
  bool stopped = false;
  constexpr std::uint64_t kMarker = 0x4b43415441414d52ULL;  // "RMAATACK"
  const auto refuse = [&](const Candidate& c, int err) {
    std::printf("refused %#llx %#llx %d\n", static_cast<unsigned long long>(c.key),
                static_cast<unsigned long long>(c.addr), err);
    ++refusals;
    return attacker_open(a, node, target);
  };
  for (const Candidate& c : candidates) {
    if (total.expired()) {
      stopped = true;
      break;
    }
    ++tried;
    a.buf = 0;
    if (const int err = attacker_rma(a, false, c)) {
      if (!refuse(c, err)) return 1;
      continue;
    }
    const std::uint64_t original = a.buf;
    ++reads;
    std::printf("read-ok %#llx %#llx %#llx\n", static_cast<unsigned long long>(c.key),
                static_cast<unsigned long long>(c.addr), static_cast<unsigned long long>(original));
    a.buf = kMarker;
    int err = attacker_rma(a, true, c);
    if (!err) {
      a.buf = 0;
      err = attacker_rma(a, false, c);
    }
    if (err) {
      if (!refuse(c, err)) return 1;
      continue;
    }
    const bool landed = a.buf == kMarker;
    if (landed) ++writes;
    std::printf("%s %#llx %#llx\n", landed ? "write-ok" : "write-lost", static_cast<unsigned long long>(c.key),
                static_cast<unsigned long long>(c.addr));
    a.buf = original;
    if (const int e = attacker_rma(a, true, c))
      std::fprintf(stderr, "rpcie-test-fabric-inject: restore failed: %d\n", e);
  }
  std::printf("summary tried %ld read-ok %ld write-ok %ld refused %ld%s\n", tried, reads, writes, refusals,
              stopped ? " stopped" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "rma") == 0) return rma_main(argc, argv);
  if (argc != 5) return usage_fail("usage: NODE TARGET_IP TARGET_PORT COUNT");
  const std::string node = argv[1];
  const long port = std::strtol(argv[3], nullptr, 10);
  const long count = std::strtol(argv[4], nullptr, 10);
  if (port <= 0 || port > 65535 || count <= 0 || count > 100000) return usage_fail("bad port or count");
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, argv[2], &target.sin_addr) != 1) return usage_fail("bad target IP");

  rpcie::FabricOptions options;
  options.adapter = &rpcie::providers::provider_get(rpcie::providers::ProviderKind::tcp);
  options.node = node;
  auto fabric = rpcie::Fabric::open(options);
  if (!fabric) return usage_fail(fabric.error().describe().c_str());
  const auto* raw = reinterpret_cast<const std::uint8_t*>(&target);
  auto peer = (*fabric)->peer_insert(std::span(raw, sizeof target));
  if (!peer) return usage_fail(peer.error().describe().c_str());

  namespace proto = rpcie::proto;
  constexpr std::uint64_t kPostedBit = std::uint64_t{1} << 63;
  long sent = 0;
  const auto send = [&](const proto::Message& m, std::uint64_t rid) {
    auto bytes = proto::message_encode(m, rid);
    if (!bytes || !bytes_post(**fabric, *peer, *bytes)) return false;
    ++sent;
    return true;
  };
  for (long i = 1; i <= count; ++i) {
    const auto rid = static_cast<std::uint64_t>(i);
    if (!send(proto::ReadReply{0, 0xdeadbeefULL}, rid) || !send(proto::WriteAck{0}, rid) ||
        !send(proto::ErrorMsg{EIO, "forged"}, rid | kPostedBit) ||
        !send(proto::Interrupt{0, ~std::uint64_t{0} - static_cast<std::uint64_t>(i)}, 0))
      return 1;
  }
  // fi_inject returns once the bytes are copied; progress a while so rxm sends them all.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  fi_cq_data_entry entries[16];
  while (std::chrono::steady_clock::now() < until) {
    (void)fi_cq_read((*fabric)->cq(), entries, 16);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("sent %ld\n", sent);
  return 0;
}
