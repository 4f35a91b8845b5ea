// Sealed RMA (channel.hpp, "Sealed RMA"): rma_write / rma_read / rma_flush carried as sealed
// messages between two real Channels over tcp;ofi_rxm, served by the target's channel from
// its region table: data intact at every size and offset, writes ordered before the message
// sent after them, delivered writes in place at flush, reads served while an application
// message waits unread, and the target's refusals failing the initiator.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>
#include <variant>

#include "channel_fixture.hpp"

using namespace channel_fixture;
using rpcie::Result;
using rpcie::SealedRegion;
using rpcie::WriteCompletion;

namespace {

// The key the server's region has in its table: not the key of its real registration, so
// a transfer that went through fi_write / fi_read would fail.
constexpr std::uint64_t kSealedKey = 5;

struct SealedGrant {
  bool read = true;
  bool write = true;
};

// Seals both channels' messages and RMA; the server's region is in its table as kSealedKey
// with `grant`, the client's as kSealedKey + 1 (readable and writable).
void rma_seal_both(Pair& p, std::size_t size, SealedGrant grant = {}) {
  seal_both(p);
  REQUIRE(p.sc().rma_seal({SealedRegion{kSealedKey, p.server_mem->data(), size, grant.read, grant.write}}));
  REQUIRE(p.cc().rma_seal({SealedRegion{kSealedKey + 1, p.client_mem->data(), size, true, true}}));
  p.server_region = RemoteRegion{0, size, kSealedKey};
  p.client_region = RemoteRegion{0, size, kSealedKey + 1};
}

}  // namespace

TEST_CASE("rma_seal on a channel whose messages are not sealed fails with EINVAL") {
  auto p = pair_open(4096);
  auto r = p->cc().rma_seal({});
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == EINVAL);
  CHECK_FALSE(p->cc().rma_sealed());
}

TEST_CASE("sealed rma writes and reads of every size and offset arrive intact, served by the target's channel") {
  constexpr std::size_t kSize = 2 << 20;
  auto p = pair_open(kSize);
  rma_seal_both(*p, kSize);
  ProgressThread server_progress(p->sc());  // the server is only a target here
  const rpcie::MemoryRegion& local = p->client->region(0);
  struct Case {
    std::size_t local_offset, remote_offset, length;
  };
  const std::size_t kChunk = p->cc().sealed_chunk();
  const Case cases[] = {{0, 0, 1},          {3, 7, 8},       {0, 0, 4095},           {100, 4096, kChunk},
                        {0, 1, kChunk + 1}, {0, 0, 1 << 20}, {12345, 54321, 777777}, {0, kSize - 1, 1}};
  std::uint32_t seed = 1;
  for (const Case& c : cases) {
    CAPTURE(c.length);
    CAPTURE(c.remote_offset);
    pattern_fill(p->client_mem->data() + c.local_offset, c.length, seed++);
    auto w = p->cc().rma_write(local, c.local_offset, p->server_region, c.remote_offset, c.length, Deadline::after(5s));
    REQUIRE_MESSAGE(w.has_value(), w.error().describe());
    REQUIRE(p->cc().rma_flush(Deadline::after(5s)).has_value());
    // Posted writes are complete when sent: read them back through the same stream.
    std::fill(p->client_mem->data(), p->client_mem->data() + kSize, std::uint8_t{0xee});
    auto r = p->cc().rma_read(local, c.local_offset, p->server_region, c.remote_offset, c.length, Deadline::after(5s));
    REQUIRE_MESSAGE(r.has_value(), r.error().describe());
    auto f = p->cc().rma_flush(Deadline::after(5s));
    REQUIRE_MESSAGE(f.has_value(), f.error().describe());
    std::vector<std::uint8_t> expected(c.length);
    pattern_fill(expected.data(), c.length, seed - 1);
    CHECK(checksum(p->client_mem->data() + c.local_offset, c.length) == checksum(expected.data(), c.length));
    CHECK(checksum(p->server_mem->data() + c.remote_offset, c.length) == checksum(expected.data(), c.length));
    if (c.local_offset > 0) CHECK(p->client_mem->data()[c.local_offset - 1] == 0xee);
    if (c.local_offset + c.length < kSize) CHECK(p->client_mem->data()[c.local_offset + c.length] == 0xee);
  }
  CHECK(p->cc().rma_in_flight() == 0);
  CHECK(kChunk == 16000);  // under rxm's default 16 KiB eager buffers: no rendezvous
  const auto served = p->sc().stats();
  CHECK(served.rma_refused == 0);
  CHECK(served.rma_served > 2 * std::size(cases));  // a put per chunk, a get per chunk
  CHECK(p->cc().stats().messages_forged == 0);
}

TEST_CASE("a sealed rma write is in place at the peer when the message sent after it arrives") {
  constexpr std::size_t kSize = 1 << 20;
  auto p = pair_open(kSize);
  rma_seal_both(*p, kSize);
  CHECK_FALSE(p->cc().delivery_complete());  // writes and messages are one ordered stream
  const std::size_t lengths[] = {8, 4096, 70000, kSize};
  std::vector<std::string> problems;
  std::thread server([&] {
    for (std::size_t i = 0; i < std::size(lengths); ++i) {
      auto m = p->sc().message_recv(Deadline::after(5s));
      const auto* n = m ? std::get_if<proto::RmaNotify>(&(*m)->message) : nullptr;
      if (n == nullptr) {
        problems.push_back("no notify");
        return;
      }
      const bool in_place = checksum(p->server_mem->data() + n->offset, n->length) == n->checksum;
      if (!in_place) problems.push_back("round " + std::to_string(i) + ": data not in place when the notify came");
      (void)p->sc().message_send(proto::WriteAck{in_place ? 0 : EIO}, (*m)->header.request_id, Deadline::after(5s));
    }
  });
  std::size_t acks = 0;
  for (std::size_t i = 0; i < std::size(lengths); ++i) {
    pattern_fill(p->client_mem->data(), lengths[i], static_cast<std::uint32_t>(i + 40));
    if (!p->cc().rma_write(p->client->region(0), 0, p->server_region, 0, lengths[i], Deadline::after(5s))) break;
    proto::RmaNotify notify{kServerRegion, 0, lengths[i], checksum(p->client_mem->data(), lengths[i])};
    if (!p->cc().message_send_after_writes(notify, 700 + i, Deadline::after(5s))) break;
    auto ack = p->cc().message_recv(Deadline::after(5s));
    const auto* a = ack ? std::get_if<proto::WriteAck>(&(*ack)->message) : nullptr;
    if (a != nullptr && a->status == 0 && (*ack)->header.request_id == 700 + i) ++acks;
  }
  server.join();
  for (const auto& problem : problems) FAIL_CHECK(problem);
  CHECK(acks == std::size(lengths));
}

TEST_CASE("a delivered sealed rma write is in the peer's memory when rma_flush returns") {
  constexpr std::size_t kSize = 512 * 1024;
  auto p = pair_open(kSize);
  rma_seal_both(*p, kSize);
  ProgressThread server_progress(p->sc());
  pattern_fill(p->client_mem->data(), kSize, 99);
  const rpcie::ChannelStats before = p->sc().stats();
  auto w = p->cc().rma_write(p->client->region(0), 0, p->server_region, 0, kSize, Deadline::after(5s),
                             WriteCompletion::delivered);
  REQUIRE(w.has_value());
  auto f = p->cc().rma_flush(Deadline::after(5s));
  REQUIRE_MESSAGE(f.has_value(), f.error().describe());
  CHECK(checksum(p->server_mem->data(), kSize) == checksum(p->client_mem->data(), kSize));
  // One acknowledgement for the whole write: its last put's (the peer performs puts in order).
  const rpcie::ChannelStats after = p->sc().stats();
  CHECK(after.rma_served - before.rma_served == (kSize + p->cc().sealed_chunk() - 1) / p->cc().sealed_chunk());
  CHECK(after.rma_served - before.rma_served > 1);
  CHECK(after.messages_sent - before.messages_sent == 1);
}

TEST_CASE("the peer serves sealed rma reads while an application message waits unread at its head") {
  constexpr std::size_t kSize = 1 << 20;
  auto p = pair_open(kSize);
  rma_seal_both(*p, kSize);
  pattern_fill(p->server_mem->data(), kSize, 3);
  const std::vector<std::uint8_t> payload(3000, 0x5a);
  // The server polls (a ProgressThread) but nobody receives the ping before the read is done.
  std::optional<ProgressThread> server_progress(std::in_place, p->sc());
  auto sent = p->cc().message_send(proto::Ping{payload}, 42, Deadline::after(5s));
  REQUIRE_MESSAGE(sent.has_value(), sent.error().describe());
  auto r = p->cc().rma_read(p->client->region(0), 0, p->server_region, 0, kSize, Deadline::after(5s));
  REQUIRE(r.has_value());
  auto f = p->cc().rma_flush(Deadline::after(5s));
  REQUIRE_MESSAGE(f.has_value(), f.error().describe());
  CHECK(checksum(p->client_mem->data(), kSize) == checksum(p->server_mem->data(), kSize));
  server_progress.reset();
  auto m = p->sc().message_recv(Deadline::after(5s));
  REQUIRE_MESSAGE(m.has_value(), m.error().describe());
  const auto* ping = std::get_if<proto::Ping>(&(*m)->message);
  REQUIRE(ping != nullptr);
  CHECK((*m)->header.request_id == 42);
  CHECK(std::equal(ping->data.begin(), ping->data.end(), payload.begin(), payload.end()));
}

namespace {

// A transfer the target must refuse: the initiator's channel fails with `code`, the target
// counts one refusal, and its memory is unchanged.
void refused(SealedGrant grant, bool write, RemoteRegion lie, int code) {
  constexpr std::size_t kSize = 64 * 1024;
  auto p = pair_open(kSize);
  rma_seal_both(*p, kSize, grant);
  pattern_fill(p->server_mem->data(), kSize, 11);
  const auto before = checksum(p->server_mem->data(), kSize);
  ProgressThread server_progress(p->sc());
  pattern_fill(p->client_mem->data(), kSize, 12);
  const auto& local = p->client->region(0);
  auto posted = write ? p->cc().rma_write(local, 0, lie, lie.length - 4096, 4096, Deadline::after(5s))
                      : p->cc().rma_read(local, 0, lie, lie.length - 4096, 4096, Deadline::after(5s));
  REQUIRE(posted.has_value());
  auto f = p->cc().rma_flush(Deadline::after(5s));
  if (write && f) {
    // A posted write is complete once sent; the refusal fails the channel when it comes back.
    auto m = p->cc().message_recv(Deadline::after(2s));
    REQUIRE_FALSE(m.has_value());
    f = tl::unexpected(m.error());
  }
  REQUIRE_FALSE(f.has_value());
  CHECK(f.error().code == code);
  CHECK(p->cc().failure().has_value());
  CHECK(p->sc().stats().rma_refused == 1);
  CHECK(checksum(p->server_mem->data(), kSize) == before);
}

}  // namespace

TEST_CASE("the target refuses a sealed rma write to a region it does not let the peer write (EACCES)") {
  refused({true, false}, true, RemoteRegion{0, 64 * 1024, kSealedKey}, EACCES);
}

TEST_CASE("the target refuses a sealed rma read of a region it does not let the peer read (EACCES)") {
  refused({false, true}, false, RemoteRegion{0, 64 * 1024, kSealedKey}, EACCES);
}

TEST_CASE("the target refuses sealed rma to a region it does not have (EACCES)") {
  refused({}, true, RemoteRegion{0, 64 * 1024, kSealedKey + 40}, EACCES);
}

TEST_CASE("the target refuses sealed rma beyond its region, whatever length the initiator believes (EFAULT)") {
  refused({}, true, RemoteRegion{0, 128 * 1024, kSealedKey}, EFAULT);
  refused({}, false, RemoteRegion{0, 128 * 1024, kSealedKey}, EFAULT);
}

TEST_CASE("sealed rma to a peer that never makes progress ends at its deadline (ETIMEDOUT), not later") {
  // The peer's socket fills and the provider refuses further sends while send slots are free:
  // a refusal must be retried only until the deadline (an exporter's DMA to a stopped host
  // once retried for over 40 s).
  constexpr std::size_t kSize = 64 << 20;
  constexpr auto kDeadline = 1s;
  auto p = pair_open(kSize);
  rma_seal_both(*p, kSize);
  const rpcie::MemoryRegion& local = p->client->region(0);
  for (const bool write : {true, false}) {
    CAPTURE(write);
    Result<void> r;
    std::chrono::steady_clock::duration took{};
    // Each call moves up to kSize; the first may fit in the socket buffers.
    for (int i = 0; i < 8 && r; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      r = write ? p->cc().rma_write(local, 0, p->server_region, 0, kSize, Deadline::after(kDeadline))
                : p->cc().rma_read(local, 0, p->server_region, 0, kSize, Deadline::after(kDeadline));
      took = std::chrono::steady_clock::now() - t0;
    }
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ETIMEDOUT);
    CHECK(took < kDeadline + 500ms);
  }
}
