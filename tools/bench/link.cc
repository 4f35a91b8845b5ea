#include "link.hpp"

#include <cerrno>
#include <chrono>
#include <span>
#include <utility>

#include "aead.hpp"
#include "support.hpp"

namespace rpcie::bench {

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kWindow = 64;

// The buffer each end offers for RMA, and the region that describes it.
Result<LocalRegion> memory_open(Link& link) {
  RPCIE_TRY_ASSIGN(auto memory, buffer_written(kMaxSize));
  link.memory.emplace(std::move(memory));
  return LocalRegion{0, link.memory->data(), link.memory->size()};
}

// The raw loop, on the raw socket, with the provider the rpcie handshake settled on.
Result<void> raw_open(Link& link, bool server) {
  raw::RawConfig config;
  config.prov_name = link.provider();
  // shm must get no node: a node both ends share is a shared region name.
  if (config.prov_name != "shm") config.node = link.raw_socket.local_address();
  std::string why;
  link.raw = raw::RawPeer::open(config, link.raw_socket.fd(), server, &why);
  if (!link.raw) return fail(EIO, "raw loop: " + why);
  // The same completion rule as the rpcie channel's writes (delivery-complete without SAW).
  link.raw->write_delivery_complete_set(link.rma->channel().delivery_complete());
  // Sealed rows: the chunks rpcie's sealed data path sends on this provider.
  if (!link.raw->sealer_set(raw_sealer_make(!server), link.rma->channel().sealed_chunk(), &why))
    return fail(EINVAL, "raw loop: " + why);
  return {};
}

}  // namespace

SessionOptions session_options(const LinkOptions& options) {
  SessionOptions session;
  session.provider = options.provider;
  session.channel.window = kWindow;
  session.channel.delivery_complete_force = options.delivery_complete;
  return session;
}

Result<std::unique_ptr<Link>> Link::connect(const std::string& host, std::uint16_t port, const LinkOptions& options) {
  auto link = std::make_unique<Link>();
  auto control = Socket::connect(host, port, Deadline::after(10s));
  if (!control) return error_in(control.error(), "control connection");
  link->control = std::move(*control);
  RPCIE_TRY_ASSIGN(const LocalRegion region, memory_open(*link));
  auto rma = Session::connect(host, port, session_options(options), std::span(&region, 1), Deadline::after(30s));
  if (!rma) return error_in(rma.error(), "rpcie handshake");
  link->rma = std::move(*rma);
  auto round_trip = Session::connect(host, port, session_options(options), {}, Deadline::after(30s));
  if (!round_trip) return error_in(round_trip.error(), "rpcie handshake");
  link->round_trip = std::move(*round_trip);
  auto raw_socket = Socket::connect(host, port, Deadline::after(10s));
  if (!raw_socket) return error_in(raw_socket.error(), "raw connection");
  link->raw_socket = std::move(*raw_socket);
  RPCIE_TRY(raw_open(*link, false));
  return link;
}

Result<std::unique_ptr<Link>> Link::accept(Listener& listener, const LinkOptions& options) {
  auto link = std::make_unique<Link>();
  auto control = listener.accept(Deadline::after(30s));
  if (!control) return error_in(control.error(), "control connection");
  link->control = std::move(*control);
  RPCIE_TRY_ASSIGN(const LocalRegion region, memory_open(*link));
  auto bootstrap = listener.accept(Deadline::after(30s));
  if (!bootstrap) return error_in(bootstrap.error(), "bootstrap connection");
  // For RMA rounds the target is only an RMA target. By default it busy-polls its CQ, as
  // the raw target does, and its CQ has no wait fd (the raw one has none). With
  // target_progress_thread it is driven by a ProgressThread as a device-side attachment
  // would be, sleeping on the CQ wait fd when idle (unless target_no_wait_fd). Round trips
  // are request/response, latency-bound, and use a session of their own without a wait fd
  // (FabricOptions::cq_wait_fd explains the cost).
  SessionOptions rma_options = session_options(options);
  rma_options.cq_wait_fd = options.target_progress_thread && !options.target_no_wait_fd;
  auto rma = Session::accept(std::move(*bootstrap), rma_options, std::span(&region, 1), Deadline::after(30s));
  if (!rma) return error_in(rma.error(), "rpcie handshake");
  link->rma = std::move(*rma);
  auto bootstrap_round_trip = listener.accept(Deadline::after(30s));
  if (!bootstrap_round_trip) return error_in(bootstrap_round_trip.error(), "bootstrap connection");
  auto round_trip =
      Session::accept(std::move(*bootstrap_round_trip), session_options(options), {}, Deadline::after(30s));
  if (!round_trip) return error_in(round_trip.error(), "rpcie handshake");
  link->round_trip = std::move(*round_trip);
  auto raw_socket = listener.accept(Deadline::after(30s));
  if (!raw_socket) return error_in(raw_socket.error(), "raw connection");
  link->raw_socket = std::move(*raw_socket);
  RPCIE_TRY(raw_open(*link, true));
  return link;
}

Result<void> byte_send(Socket& control, char byte) {
  return control.bytes_send(std::span(reinterpret_cast<const std::uint8_t*>(&byte), 1), Deadline::after(60s));
}

Result<char> byte_recv(Socket& control) {
  char byte = 0;
  RPCIE_TRY(control.bytes_recv(std::span(reinterpret_cast<std::uint8_t*>(&byte), 1), Deadline::after(60s)));
  return byte;
}

Result<void> command_send(Socket& control, const Command& command) {
  return control.bytes_send(std::span(reinterpret_cast<const std::uint8_t*>(&command), sizeof command),
                            Deadline::after(30s));
}

Result<Command> command_recv(Socket& control) {
  Command command;
  RPCIE_TRY(
      control.bytes_recv(std::span(reinterpret_cast<std::uint8_t*>(&command), sizeof command), Deadline::after(120s)));
  return command;
}

void quit_send(Socket& control) {
  const Command quit;
  (void)control.bytes_send(std::span(reinterpret_cast<const std::uint8_t*>(&quit), sizeof quit), Deadline::after(5s));
}

}  // namespace rpcie::bench
