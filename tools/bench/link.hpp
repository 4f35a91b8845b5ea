// The two ends of the transport benchmark (the initiator and the target, two processes) and
// the control protocol between them.
//
// Connections, all made by the initiator and accepted by the target in this order:
//   control     commands, one per round, and the round's barrier bytes
//   rma         an rpcie Session for RMA rounds; each end offers its kMaxSize buffer
//   round_trip  an rpcie Session for ping/pong rounds
//   raw         the raw loop's own socket (raw_loop.cc uses no rpcie code)
//
// A round, on the control socket: the initiator sends a Command; the target answers
// kReadyByte, serves the round, and answers kRoundOk or kRoundFailed. An rpcie RMA round also
// ends with kEndByte from the initiator (the target only drives progress until then); the
// raw loop's rounds end inside raw_loop.cc's own protocol. Command::action quit ends the target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "raw_loop.hpp"
#include "rpcie/bootstrap.hpp"
#include "rpcie/host_buffer.hpp"
#include "rpcie/providers/provider.hpp"
#include "rpcie/result.hpp"
#include "rpcie/session.hpp"

namespace rpcie::bench {

// The largest transfer: the size of the buffer each end offers for RMA.
inline constexpr std::size_t kMaxSize = 4u << 20;

struct LinkOptions {
  providers::ProviderChoice provider;
  bool delivery_complete = false;  // rpcie writes complete only once delivered at the target
  bool target_no_wait_fd = false;  // the target's RMA CQ gets no wait fd (it sleeps to back off)
  // The rpcie RMA target is a ProgressThread (spins while data moves, then sleeps), as in a
  // device server; otherwise it busy-polls like the raw target.
  bool target_progress_thread = false;
};

// What the initiator asks of the target for one round (or quit).
enum class Action : std::uint8_t { raw = 0, rpcie = 1, quit = 2 };

// One command on the control socket, initiator -> target (both ends are this program).
struct Command {
  Action action = Action::quit;
  std::uint8_t workload = 0;  // raw::Workload
  std::uint16_t window = 0;   // raw RMA: operations in flight (0: the raw loop's default)
  std::uint8_t pad[4] = {};
  std::uint64_t size = 0;
  std::uint64_t iterations = 0;
};

inline constexpr char kReadyByte = 'R';
inline constexpr char kEndByte = 'E';
inline constexpr char kRoundOk = 'K';
inline constexpr char kRoundFailed = 'F';

// One end: the connections and what stands on them. Members are destroyed in reverse order:
// the sessions (and their registrations) before the buffer they register.
struct Link {
  Socket control;
  Socket raw_socket;
  std::unique_ptr<raw::RawPeer> raw;
  std::optional<HostBuffer> memory;  // kMaxSize, offered on the rma session
  std::unique_ptr<Session> rma;
  std::unique_ptr<Session> round_trip;

  // The initiator's end: connects to a target listening on host:port.
  static Result<std::unique_ptr<Link>> connect(const std::string& host, std::uint16_t port, const LinkOptions& options);
  // The target's end: accepts one initiator.
  static Result<std::unique_ptr<Link>> accept(Listener& listener, const LinkOptions& options);

  // The provider both ends use (fi_info prov_name).
  const std::string& provider() const noexcept { return rma->peer().provider; }
};

// rpcie session options for the benchmark: a window of 64 operations in flight.
SessionOptions session_options(const LinkOptions& options);

// Control socket I/O (bytes: 60 s deadlines; a command is sent within 30 s).
Result<void> byte_send(Socket& control, char byte);
Result<char> byte_recv(Socket& control);
Result<void> command_send(Socket& control, const Command& command);
// The next command; waits up to 120 s.
Result<Command> command_recv(Socket& control);
// Ends the target; errors are ignored (the target is then stopped by its parent).
void quit_send(Socket& control);

}  // namespace rpcie::bench
