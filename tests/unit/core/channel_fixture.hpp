// Two connected Sessions over tcp;ofi_rxm on 127.0.0.1 in one process, each offering one
// region, and the helpers the channel tests share (channel_test.cc, channel_rma_sealed_test.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/channel.hpp"
#include "rpcie/memory.hpp"
#include "rpcie/message_seal.hpp"
#include "rpcie/process.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/providers/provider.hpp"
#include "rpcie/session.hpp"

namespace channel_fixture {

using namespace std::chrono_literals;
namespace proto = rpcie::proto;
namespace providers = rpcie::providers;
using rpcie::Channel;
using rpcie::ChannelOptions;
using rpcie::Deadline;
using rpcie::HostBuffer;
using rpcie::Listener;
using rpcie::ProgressThread;
using rpcie::RemoteRegion;
using rpcie::Session;
using rpcie::SessionOptions;

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::uint8_t>;

inline constexpr std::uint32_t kServerRegion = 1;
inline constexpr std::uint32_t kClientRegion = 2;

inline std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// Two connected Sessions, each offering one region of `size` bytes. Sessions go before the
// memory they registered.
struct Pair {
  std::optional<HostBuffer> server_mem;
  std::optional<HostBuffer> client_mem;
  std::unique_ptr<Session> server;
  std::unique_ptr<Session> client;
  RemoteRegion server_region;  // the server's region as the client addresses it
  RemoteRegion client_region;  // the client's region as the server addresses it

  Channel& cc() { return client->channel(); }
  Channel& sc() { return server->channel(); }
};

inline std::unique_ptr<Pair> pair_open(std::size_t size, ChannelOptions client_channel = {},
                                       ChannelOptions server_channel = {}, bool server_cq_wait_fd = false,
                                       providers::ProviderKind provider = providers::ProviderKind::tcp) {
  rpcie::signals_init();
  auto p = std::make_unique<Pair>();
  auto sm = HostBuffer::create(size);
  auto cm = HostBuffer::create(size);
  REQUIRE(sm.has_value());
  REQUIRE(cm.has_value());
  p->server_mem.emplace(std::move(*sm));
  p->client_mem.emplace(std::move(*cm));

  auto listener = Listener::open("127.0.0.1", 0);
  REQUIRE_MESSAGE(listener.has_value(), listener.error().describe());
  SessionOptions server_options;
  server_options.provider = providers::ProviderChoice{false, provider};
  server_options.channel = server_channel;
  SessionOptions client_options = server_options;
  client_options.channel = client_channel;
  server_options.cq_wait_fd = server_cq_wait_fd;
  const rpcie::LocalRegion server_regions[] = {{kServerRegion, p->server_mem->data(), size}};
  const rpcie::LocalRegion client_regions[] = {{kClientRegion, p->client_mem->data(), size}};

  std::optional<rpcie::Result<std::unique_ptr<Session>>> accepted;
  std::thread server([&] {
    auto sock = listener->accept(Deadline::after(5s));
    if (!sock) {
      accepted.emplace(tl::unexpected(sock.error()));
      return;
    }
    accepted.emplace(Session::accept(std::move(*sock), server_options, server_regions, Deadline::after(5s)));
  });
  auto client = Session::connect("127.0.0.1", listener->port(), client_options, client_regions, Deadline::after(5s));
  server.join();
  REQUIRE_MESSAGE(client.has_value(), client.error().describe());
  REQUIRE(accepted.has_value());
  REQUIRE_MESSAGE(accepted->has_value(), accepted->error().describe());
  p->client = std::move(*client);
  p->server = std::move(**accepted);
  auto sr = p->client->peer_region(kServerRegion);
  auto cr = p->server->peer_region(kClientRegion);
  REQUIRE(sr.has_value());
  REQUIRE(cr.has_value());
  p->server_region = *sr;
  p->client_region = *cr;
  return p;
}

inline void pattern_fill(std::uint8_t* p, std::size_t n, std::uint32_t seed) {
  std::uint32_t x = seed * 2654435761U + 1;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1103515245U + 12345U;
    p[i] = static_cast<std::uint8_t>(x >> 16);
  }
}

inline std::uint64_t checksum(const std::uint8_t* p, std::size_t n) { return proto::checksum_fnv1a({p, n}); }

// Keeps `channel` progressing (so that what it has posted goes out) until `done` is set or
// the deadline passes.
inline void progress_until(Channel& channel, const std::atomic<bool>& done, Deadline deadline) {
  while (!done.load() && !deadline.expired()) {
    if (!channel.progress_idle(Deadline::after(5ms))) return;
  }
}

namespace auth = rpcie::auth;

// A session key as the handshake would derive it; `fill` picks a different one.
inline auth::SessionKey session_key_make(std::uint8_t fill) {
  const auto key = auth::Key::create(std::vector<std::uint8_t>(32, fill));
  REQUIRE(key);
  auth::Nonce cn{}, sn{};
  cn.fill(1);
  sn.fill(2);
  return auth::session_key_derive(*key, "channel-test", cn, sn);
}

inline std::unique_ptr<auth::MessageSeal> seal_make(const auth::SessionKey& key, auth::Role self) {
  return std::make_unique<auth::MessageSeal>(auth::Aead::aes256gcm, auth::data_keys_derive(key, self));
}

// Seals both channels of `p` with the keys of one session, as Session does after hello.
inline void seal_both(Pair& p, std::uint8_t fill = 7) {
  const auto key = session_key_make(fill);
  p.cc().seal_set(seal_make(key, auth::Role::client));
  p.sc().seal_set(seal_make(key, auth::Role::server));
}

}  // namespace channel_fixture
