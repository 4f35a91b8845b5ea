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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

}  // namespace

int main(int argc, char** argv) {
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
