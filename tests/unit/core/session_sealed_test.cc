// The sealed data path at the Session level (data_path.hpp): over a real authenticated
// bootstrap connection, a sealed session registers nothing for remote access, opens its
// endpoint without FI_RMA, offers regions by table key, and moves RMA intact; a session
// that is not authenticated cannot be sealed; both sides must run the same mode.
#include <cerrno>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "rpcie/auth.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/handshake.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/process.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/session.hpp"

using namespace std::chrono_literals;
namespace auth = rpcie::auth;
namespace proto = rpcie::proto;
namespace providers = rpcie::providers;
using rpcie::DataPath;
using rpcie::Deadline;
using rpcie::Session;
using rpcie::SessionOptions;
using rpcie::Socket;

namespace {

constexpr std::size_t kSize = 1 << 20;
using SessionResult = rpcie::Result<std::unique_ptr<Session>>;

auth::Key key_of(std::uint8_t fill) {
  std::array<std::uint8_t, auth::kKeyMinBytes> bytes{};
  bytes.fill(fill);
  auto k = auth::Key::create(bytes);
  REQUIRE(k.has_value());
  return std::move(*k);
}

SessionOptions options_for(DataPath mode) {
  SessionOptions o;
  o.provider = providers::ProviderChoice{false, providers::ProviderKind::tcp};
  o.data_path = mode;
  return o;
}

// Two sessions over one loopback TCP connection, authenticated first when `authenticate`.
struct Sessions {
  std::optional<rpcie::HostBuffer> server_mem, client_mem;
  SessionResult server = rpcie::fail(EINVAL, "not run");
  SessionResult client = rpcie::fail(EINVAL, "not run");
};

void sessions_open(Sessions& s, DataPath client_mode, DataPath server_mode, bool authenticate = true) {
  rpcie::signals_init();
  auto sm = rpcie::HostBuffer::create(kSize);
  auto cm = rpcie::HostBuffer::create(kSize);
  REQUIRE((sm && cm));
  s.server_mem.emplace(std::move(*sm));
  s.client_mem.emplace(std::move(*cm));
  auto listener = rpcie::Listener::open("127.0.0.1", 0);
  REQUIRE(listener.has_value());
  auth::ServerKeys keys;
  keys.clients.emplace("alice", key_of(1));
  REQUIRE(keys.decoy_make().has_value());
  const rpcie::LocalRegion server_regions[] = {{7, s.server_mem->data(), kSize}};
  const rpcie::LocalRegion client_regions[] = {{9, s.client_mem->data(), kSize}};
  std::thread server([&] {
    auto sock = listener->accept(Deadline::after(5s));
    if (!sock) return;
    if (authenticate && !auth::handshake_server(*sock, keys, Deadline::after(5s))) return;
    s.server = Session::accept(std::move(*sock), options_for(server_mode), server_regions, Deadline::after(5s));
  });
  auto sock = Socket::connect("127.0.0.1", listener->port(), Deadline::after(5s));
  REQUIRE(sock.has_value());
  const auto alice = key_of(1);
  if (authenticate) REQUIRE(auth::handshake_client(*sock, alice, "alice", "exporter", Deadline::after(5s)));
  s.client = Session::connect_over(std::move(*sock), options_for(client_mode), client_regions, Deadline::after(5s));
  server.join();
}

}  // namespace

TEST_CASE("a sealed session registers nothing for remote access and moves RMA intact through its channel") {
  Sessions s;
  sessions_open(s, DataPath::sealed, DataPath::sealed);
  REQUIRE_MESSAGE(s.client.has_value(), s.client.error().describe());
  REQUIRE_MESSAGE(s.server.has_value(), s.server.error().describe());
  Session& c = **s.client;
  Session& srv = **s.server;
  CHECK(c.data_path() == DataPath::sealed);
  CHECK(srv.data_path() == DataPath::sealed);
  CHECK_FALSE(c.region(0).registered());
  CHECK_FALSE(srv.region(0).registered());
  CHECK_FALSE(c.channel().fabric().rma_enabled());
  CHECK_FALSE(srv.channel().fabric().rma_enabled());
  CHECK(c.channel().rma_sealed());
  auto remote = c.peer_region(7);
  REQUIRE(remote.has_value());
  CHECK(remote->address == 0);
  CHECK(remote->key == 1);  // the first entry of the server's table, not a memory key
  CHECK(remote->length == kSize);

  for (std::size_t i = 0; i < kSize; ++i) s.client_mem->data()[i] = static_cast<std::uint8_t>(i * 7 + 3);
  rpcie::ProgressThread progress(srv.channel());
  REQUIRE(c.channel().rma_write(c.region(0), 0, *remote, 0, kSize, Deadline::after(5s)));
  REQUIRE(c.channel().rma_flush(Deadline::after(5s)));
  std::fill(s.client_mem->data(), s.client_mem->data() + kSize, std::uint8_t{0});
  REQUIRE(c.channel().rma_read(c.region(0), 0, *remote, 0, kSize, Deadline::after(5s)));
  REQUIRE(c.channel().rma_flush(Deadline::after(5s)));
  CHECK(proto::checksum_fnv1a({s.server_mem->data(), kSize}) == proto::checksum_fnv1a({s.client_mem->data(), kSize}));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kSize; ++i) wrong += s.client_mem->data()[i] != static_cast<std::uint8_t>(i * 7 + 3);
  CHECK(wrong == 0);
}

TEST_CASE("an open session registers its regions and opens its endpoint for RMA") {
  Sessions s;
  sessions_open(s, DataPath::open, DataPath::open);
  REQUIRE_MESSAGE(s.client.has_value(), s.client.error().describe());
  REQUIRE(s.server.has_value());
  CHECK((*s.client)->region(0).registered());
  CHECK((*s.client)->channel().fabric().rma_enabled());
  CHECK_FALSE((*s.client)->channel().rma_sealed());
}

TEST_CASE("a session that is not authenticated cannot be sealed (EPROTO)") {
  Sessions s;
  sessions_open(s, DataPath::sealed, DataPath::sealed, false);
  REQUIRE_FALSE(s.client.has_value());
  CHECK(s.client.error().code == EPROTO);
  CHECK(s.client.error().message.find("authenticated") != std::string::npos);
}

TEST_CASE("sessions that run different data-path modes are refused with a message naming both") {
  Sessions s;
  sessions_open(s, DataPath::open, DataPath::sealed);
  REQUIRE_FALSE(s.client.has_value());
  REQUIRE_FALSE(s.server.has_value());
  for (const auto* e : {&s.client.error(), &s.server.error()}) {
    CAPTURE(e->message);
    CHECK(e->code == EPROTO);
    CHECK(e->message.find("sealed") != std::string::npos);
    CHECK(e->message.find("open") != std::string::npos);
  }
}
