// rpcie-devcheck: bad requests and hostile peers, and the attach itself (refused, busy,
// held, again at once, listed).
#include <thread>
#include <vector>

#include "devcheck_support.hpp"
#include "rpcie/client_protocol.hpp"
#include "rpcie/edu_registers.hpp"

namespace rpcie::devcheck {

using namespace std::chrono_literals;
using namespace edu;  // the register map

int errors_check(const Common& c, const std::string& name) {
  Window w(c.window);
  auto missing = Attachment::open(c.host, c.port, "no-such-export", c.options, w.view(), soon());
  CHECK_THAT(!missing && missing.error().code == ENOENT, "unknown export: %s",
             missing ? "attached?!" : missing.error().describe().c_str());
  auto a = attach_or_die(c, name, w);
  struct Bad {
    std::uint8_t bar;
    std::uint64_t offset;
    unsigned width;
  };
  for (Bad b : {Bad{0, 1, 4}, Bad{0, 0, 3}, Bad{0, 0, 16}, Bad{0, 1u << 20, 4}, Bad{0, (1u << 20) - 2, 4}, Bad{1, 0, 4},
                Bad{6, 0, 4}, Bad{0, ~0ULL - 3, 4}}) {
    auto r = a->mmio_read(b.bar, b.offset, b.width, soon());
    CHECK_THAT(!r && r.error().code == EINVAL, "mmio_read bar %u off %#llx width %u: %s", b.bar,
               static_cast<unsigned long long>(b.offset), b.width, r ? "succeeded" : r.error().describe().c_str());
    auto wv = a->mmio_write(b.bar, b.offset, b.width, 0, soon());
    CHECK_THAT(!wv && wv.error().code == EINVAL, "mmio_write bar %u off %#llx width %u", b.bar,
               static_cast<unsigned long long>(b.offset), b.width);
  }
  auto big = a->mmio_write(0, kRegLiveness, 4, 0x100000000ULL, soon());
  CHECK_THAT(!big && big.error().code == EINVAL, "value wider than the access");
  for (auto [off, width] : {std::pair{4095, 2}, std::pair{4096, 1}, std::pair{1, 2}, std::pair{0, 8}}) {
    auto r = a->config_read(static_cast<std::uint16_t>(off), static_cast<unsigned>(width), soon());
    CHECK_THAT(!r && r.error().code == EINVAL, "config_read %d/%d", off, width);
  }
  // The device decides for legal widths: edu reads all-ones at an undefined offset and on a
  // width its spec does not define.
  CHECK_THAT(rd(*a, 0x10) == 0xffffffffu, "undefined edu offset reads all-ones");
  CHECK_THAT(rd(*a, kRegLiveness, 2) == 0xffff, "2-byte edu register read is all-ones");
  CHECK_THAT(rd(*a, kRegId) == 0x010000ed, "still alive");
  ok("bad widths, offsets and BARs are EINVAL; the device decides for legal ones");
  return check_failures ? 1 : 0;
}

int hostile_check(const Common& c, const std::string& name) {
  // Speaks the protocol below the client API: attach by hand, then send requests the API
  // would never send.
  Window w(c.window);
  auto sock = rpcie::client::exporter_connect(c.host, c.port, c.options, soon());
  CHECK_THAT(sock.has_value(), "connect: %s", sock ? "" : sock.error().describe().c_str());
  if (!sock) return 1;
  auto s = sock->message_send(rpcie::proto::AttachRequest{name, w.size}, 1, soon());
  auto reply = s ? sock->message_recv(soon()) : tl::unexpected(s.error());
  CHECK_THAT(reply && std::holds_alternative<rpcie::proto::AttachReply>(reply->decoded.message), "attach reply");
  if (!reply) return 1;
  std::vector<rpcie::LocalRegion> regions{{0, w.base, w.size}};
  auto session = rpcie::Session::connect_over(std::move(*sock), session_options(c), regions, soon());
  CHECK_THAT(session.has_value(), "session: %s", session ? "" : session.error().describe().c_str());
  if (!session) return 1;
  auto& ch = (*session)->channel();
  // The exporter's warm-up ping, then its verdict on the bootstrap connection.
  auto ping = ch.message_recv(soon());
  CHECK_THAT(ping && std::holds_alternative<rpcie::proto::Ping>((*ping)->message), "warm-up ping");
  (void)ch.message_send(rpcie::proto::Pong{}, 0, soon());
  auto verdict = (*session)->bootstrap().message_recv(soon());
  CHECK_THAT(verdict && std::holds_alternative<rpcie::proto::WriteAck>(verdict->decoded.message), "attach verdict");
  auto ask = [&](const rpcie::proto::Message& m, std::uint64_t rid) -> rpcie::Result<rpcie::proto::Decoded> {
    auto sent = ch.message_send(m, rid, soon());
    if (!sent) return tl::unexpected(sent.error());
    auto got = ch.message_recv(soon());
    if (!got) return tl::unexpected(got.error());
    return **got;
  };
  auto status_of = [](const rpcie::proto::Decoded& d) -> int {
    if (auto* r = std::get_if<rpcie::proto::ReadReply>(&d.message)) return r->status;
    if (auto* a = std::get_if<rpcie::proto::WriteAck>(&d.message)) return a->status;
    if (auto* e = std::get_if<rpcie::proto::ErrorMsg>(&d.message)) return e->code;
    return -1;
  };
  // Out of range for the device (the codec allows them): the exporter answers EINVAL.
  auto r1 = ask(rpcie::proto::MmioRead{0, 4, 1u << 20}, 10);
  CHECK_THAT(r1 && r1->header.request_id == 10 && status_of(*r1) == EINVAL, "mmio_read past the BAR -> EINVAL");
  auto r2 = ask(rpcie::proto::MmioRead{3, 4, 0}, 11);
  CHECK_THAT(r2 && status_of(*r2) == EINVAL, "mmio_read of a BAR that does not exist -> EINVAL");
  // A posted write that fails is answered with an error carrying its request id.
  auto r3 = ask(rpcie::proto::MmioWrite{0, 4, 1u << 20, 0}, 12 | (1ULL << 63));
  CHECK_THAT(r3 && r3->header.request_id == (12 | (1ULL << 63)) && status_of(*r3) == EINVAL,
             "failed posted write -> error with its id");
  // A message that has no business on the data path.
  auto r4 = ask(rpcie::proto::ListRequest{}, 13);
  CHECK_THAT(r4 && std::holds_alternative<rpcie::proto::ErrorMsg>(r4->message) && status_of(*r4) == EPROTO,
             "list_request on the data path -> EPROTO error");
  // Window bytes the exporter cannot take (on-demand: no mirror; mirror: past the window's
  // end; the attach did not ask to push either way): refused with EINVAL under the id, and
  // the posted write after them is still performed, as posted writes are.
  const std::uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto r6 = ask(rpcie::proto::WindowPush{w.size - 4, bytes, {{0, 4, kRegLiveness, 0x5a5a5a5a}}}, 15 | (1ULL << 63));
  CHECK_THAT(r6 && r6->header.request_id == (15 | (1ULL << 63)) && status_of(*r6) == EINVAL,
             "window_push the exporter cannot take -> EINVAL with its id (%d)", r6 ? status_of(*r6) : -1);
  auto r7 = ask(rpcie::proto::MmioRead{0, 4, kRegLiveness}, 16);
  CHECK_THAT(r7 && std::get_if<rpcie::proto::ReadReply>(&r7->message) &&
                 std::get<rpcie::proto::ReadReply>(r7->message).value == 0xa5a5a5a5,
             "the write after refused window bytes was performed");
  // Garbage bytes: dropped by the exporter, which keeps serving.
  std::vector<std::uint8_t> garbage(100, 0xab);
  auto g = ch.bytes_send(garbage, soon());
  CHECK_THAT(g.has_value(), "garbage sent");
  auto r5 = ask(rpcie::proto::MmioRead{0, 4, kRegId}, 14);
  CHECK_THAT(r5 && r5->header.request_id == 14 && std::get_if<rpcie::proto::ReadReply>(&r5->message) &&
                 std::get<rpcie::proto::ReadReply>(r5->message).value == 0x010000ed,
             "the exporter still answers after garbage");
  ok("hostile data-path input answered with errors; exporter keeps serving");
  return check_failures ? 1 : 0;
}

// An attach that must fail with `code` and a message containing `text`.
int attachfail_check(const Common& c, const std::string& name, int code, const std::string& text) {
  Window w(c.window);
  auto a = Attachment::open(c.host, c.port, name, c.options, w.view(), soon());
  CHECK_THAT(!a && a.error().code == code && a.error().message.find(text) != std::string::npos,
             "attach %s: expected errno %d with '%s', got %s", name.c_str(), code, text.c_str(),
             a ? "success" : a.error().describe().c_str());
  if (!a && !check_failures) std::printf("ok: refused: %s\n", a.error().describe().c_str());
  return check_failures ? 1 : 0;
}

int busy_check(const Common& c, const std::string& name) {
  Window w(c.window);
  auto a = Attachment::open(c.host, c.port, name, c.options, w.view(), soon());
  CHECK_THAT(!a && a.error().code == EBUSY && a.error().message.find("attached by") != std::string::npos,
             "second attach: %s", a ? "attached?!" : a.error().describe().c_str());
  if (!a) std::printf("ok: refused: %s\n", a.error().message.c_str());
  return check_failures ? 1 : 0;
}

int hold(const Common& c, const std::string& name, int seconds) {
  Window w(c.window);
  auto a = attach_or_die(c, name, w);
  std::printf("attached %s\n", name.c_str());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  return 0;
}

int reattach_check(const Common& c, const std::string& name) {
  Window w(c.window);
  for (int i = 0; i < 3; ++i) {
    auto a = attach_or_die(c, name, w);
    CHECK_THAT(a->config_read(0, 2, soon()).has_value(), "config read on attach %d", i);
    auto d = a->detach(soon());
    CHECK_THAT(d.has_value(), "detach %d: %s", i, d ? "" : d.error().describe().c_str());
  }
  ok("detach then re-attach at once, three times");
  return check_failures ? 1 : 0;
}

int badmac_check(const Common& c) {
  auto sock = rpcie::client::exporter_connect(c.host, c.port, c.options, soon());
  CHECK_THAT(sock.has_value(), "connect: %s", sock ? "" : sock.error().describe().c_str());
  if (!sock) return 1;
  // A list request with the MAC flag and a MAC of zeros.
  auto body = rpcie::proto::message_encode(rpcie::proto::ListRequest{}, 5);
  body->at(6) |= static_cast<std::uint8_t>(rpcie::proto::kFlagMac);
  body->resize(body->size() + rpcie::proto::kMacTrailer, 0);
  auto s = sock->frame_send_raw(*body, soon());
  CHECK_THAT(s.has_value(), "forged frame sent");
  // Then a genuine one: the answer must be to it (id 6), the forged one dropped.
  s = sock->message_send(rpcie::proto::ListRequest{}, 6, soon());
  auto reply = s ? sock->message_recv(soon()) : tl::unexpected(s.error());
  CHECK_THAT(reply && reply->decoded.header.request_id == 6 &&
                 std::holds_alternative<rpcie::proto::ListReply>(reply->decoded.message),
             "only the genuine request is answered: %s",
             reply ? rpcie::proto::msg_type_name(reply->decoded.header.type) : reply.error().describe().c_str());
  ok("a frame with a bad MAC is dropped, the connection goes on");
  return check_failures ? 1 : 0;
}

int list_print(const Common& c) {
  auto l = rpcie::client::exports_list(c.host, c.port, c.options, soon());
  if (!l) {
    std::printf("FAIL: list: %s\n", l.error().describe().c_str());
    return 1;
  }
  for (const auto& e : *l)
    std::printf("%s %s %s\n", e.name.c_str(), e.attached ? "attached" : "free",
                e.holder.empty() ? "-" : e.holder.c_str());
  return 0;
}

}  // namespace rpcie::devcheck
