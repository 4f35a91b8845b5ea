#include "transport.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "commit.hpp"
#include "rpcie/channel.hpp"
#include "rpcie/log.hpp"
#include "rpcie/protocol.hpp"
#include "support.hpp"

namespace rpcie::bench {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char* workload_name(raw::Workload workload) {
  switch (workload) {
    case raw::Workload::rma_write:
      return "rma_write";
    case raw::Workload::rma_read:
      return "rma_read";
    case raw::Workload::round_trip:
      return "round_trip";
    case raw::Workload::send_reply:
      return "send_reply";
    case raw::Workload::read_reply:
      return "read_reply";
    case raw::Workload::sealed_write:
      return "sealed_write";
    case raw::Workload::sealed_read:
      return "sealed_read";
    case raw::Workload::plain_write:
      return "plain_write";
    case raw::Workload::plain_read:
      return "plain_read";
    case raw::Workload::write_reply:
      return "write_reply";
  }
  return "?";
}

// --- the initiator's side of a round ---

Result<double> raw_round_run(Link& link, raw::Workload workload, std::size_t size, std::size_t iterations,
                             std::uint16_t window, std::vector<double>* samples) {
  std::string why;
  const double seconds = link.raw->run(workload, size, iterations, &why, window, samples);
  if (seconds < 0) return fail(EIO, "raw loop: " + why);
  return seconds;
}

// `iterations` pings, each answered by a pong before the next; the seconds of each are
// appended to `samples` (when given).
Result<void> pings_exchange(Channel& channel, std::size_t iterations, Deadline deadline, std::vector<double>* samples) {
  std::uint64_t payload = 0x5250434945424e43ULL;  // "RPCIEBNC"
  const auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(&payload), sizeof payload);
  auto last = Clock::now();
  for (std::size_t i = 0; i < iterations; ++i) {
    RPCIE_TRY(channel.message_send(proto::Ping{bytes}, i, deadline));
    RPCIE_TRY_ASSIGN(const proto::Decoded* reply, channel.message_recv(deadline));
    if (!std::holds_alternative<proto::Pong>(reply->message)) return fail(EPROTO, "expected pong");
    if (samples) {
      const auto now = Clock::now();
      samples->push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    }
  }
  return {};
}

// `iterations` one-sided transfers of `size` bytes, then a flush: all of them completed.
Result<void> rma_transfer(Session& session, const RemoteRegion& remote, bool write, std::size_t size,
                          std::size_t iterations, Deadline deadline) {
  Channel& channel = session.channel();
  const MemoryRegion& local = session.region(0);
  for (std::size_t i = 0; i < iterations; ++i)
    RPCIE_TRY(write ? channel.rma_write(local, 0, remote, 0, size, deadline)
                    : channel.rma_read(local, 0, remote, 0, size, deadline));
  return channel.rma_flush(deadline);
}

Result<double> rpcie_round_run(Link& link, raw::Workload workload, std::size_t size, std::size_t iterations,
                               std::vector<double>* samples) {
  const auto deadline = Deadline::after(60s);
  if (workload == raw::Workload::round_trip) {
    const auto start = Clock::now();
    RPCIE_TRY(pings_exchange(link.round_trip->channel(), iterations, deadline, samples));
    return seconds_since(start);
  }
  if (workload != raw::Workload::rma_write && workload != raw::Workload::rma_read)
    return fail(EINVAL, "no rpcie side for this workload");
  RPCIE_TRY_ASSIGN(const RemoteRegion remote, link.rma->peer_region(0));
  const auto start = Clock::now();
  const Result<void> transferred =
      rma_transfer(*link.rma, remote, workload == raw::Workload::rma_write, size, iterations, deadline);
  const double seconds = seconds_since(start);
  // The target's progress thread serves the round until this byte, also after a failure.
  RPCIE_TRY(byte_send(link.control, kEndByte));
  RPCIE_TRY(transferred);
  return seconds;
}

// --- the target's side of a round ---

// `iterations` pongs, each answering a ping.
Result<void> pongs_send(Channel& channel, std::uint64_t iterations) {
  for (std::uint64_t i = 0; i < iterations; ++i) {
    RPCIE_TRY_ASSIGN(const proto::Decoded* request, channel.message_recv(Deadline::after(30s)));
    const auto* ping = std::get_if<proto::Ping>(&request->message);
    if (!ping) return fail(EPROTO, "bad message");
    RPCIE_TRY(channel.message_send(proto::Pong{{ping->data}}, request->header.request_id, Deadline::after(30s)));
  }
  return {};
}

// The rpcie RMA target busy-polls its CQ until the initiator's end byte, as the raw target
// does (raw_loop.cc: the control socket looked at every 1024 polls).
Result<void> rma_target_busy_poll(Link& link) {
  Channel& channel = link.rma->channel();
  const auto deadline = Deadline::after(120s);
  for (std::uint64_t polls = 1;; ++polls) {
    RPCIE_TRY(channel.progress());
    if (polls % 1024 != 0) continue;
    char byte = 0;
    const ssize_t got = ::recv(link.control.fd(), &byte, 1, MSG_DONTWAIT);
    if (got == 1) {
      if (byte != kEndByte) return fail(EPROTO, "round did not end cleanly");
      return {};
    }
    if (got == 0) return fail(EPIPE, "control: the initiator hung up");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return fail(errno, "control recv");
    if (deadline.expired()) return fail(ETIMEDOUT, "round did not end");
  }
}

Result<void> round_serve(Link& link, const Command& command, bool progress_thread) {
  const auto workload = static_cast<raw::Workload>(command.workload);
  if (command.action == Action::raw) {
    std::string why;
    if (!link.raw->serve(workload, command.size, command.iterations, &why, command.window)) return fail(EIO, why);
    return {};
  }
  if (workload == raw::Workload::round_trip) return pongs_send(link.round_trip->channel(), command.iterations);
  if (!progress_thread) return rma_target_busy_poll(link);
  // Only the target of one-sided RMA: a progress thread drives the CQ, as in a device
  // server, while this thread waits for the end of the round.
  ProgressThread progress(link.rma->channel());
  auto end = byte_recv(link.control);
  if (!end || *end != kEndByte) return fail(EPROTO, "round did not end cleanly");
  return {};
}

// --- the rows ---

// A first guess for the warm-up; the driver sizes the slices from the raw warm-up's speed.
std::size_t warmup_operations(raw::Workload workload, std::size_t size) {
  if (workload == raw::Workload::round_trip) return 2000;
  return std::clamp<std::size_t>((32u << 20) / size, 16, 4000);
}

Workload transport_workload(Link& link, raw::Workload kind, std::size_t size) {
  Workload workload;
  workload.name = workload_name(kind);
  workload.size = size;
  workload.unit = kind == raw::Workload::round_trip ? Unit::microseconds : Unit::megabytes_per_second;
  workload.warmup_operations = warmup_operations(kind, size);
  // Round trips are timed one by one on both sides (percentiles of each operation).
  const bool sampled = kind == raw::Workload::round_trip;
  for (const Action action : {Action::raw, Action::rpcie})
    (action == Action::raw ? workload.baseline : workload.subject) =
        slice_run_sampled([&link, action, kind, size, sampled](std::size_t operations, std::vector<double>& samples) {
          return round_run(link, action, kind, size, operations, 0, sampled ? &samples : nullptr);
        });
  return workload;
}

}  // namespace

Result<double> round_run(Link& link, Action action, raw::Workload workload, std::size_t size, std::size_t iterations,
                         std::uint16_t window, std::vector<double>* samples) {
  Command command;
  command.action = action;
  command.workload = static_cast<std::uint8_t>(workload);
  command.window = window;
  command.size = size;
  command.iterations = iterations;
  RPCIE_TRY(command_send(link.control, command));
  auto ready = byte_recv(link.control);
  if (!ready || *ready != kReadyByte) return fail(EPROTO, "target not ready");
  RPCIE_TRY_ASSIGN(const double seconds, action == Action::raw
                                             ? raw_round_run(link, workload, size, iterations, window, samples)
                                             : rpcie_round_run(link, workload, size, iterations, samples));
  auto done = byte_recv(link.control);
  if (!done || *done != kRoundOk) return fail(EIO, "target reported a failed round");
  return seconds;
}

int target_run(Listener& listener, const LinkOptions& options) {
  auto link = Link::accept(listener, options);
  if (!link) return die(link.error().describe());
  Socket& control = (*link)->control;
  for (;;) {
    auto command = command_recv(control);
    if (!command) return die("control: " + command.error().describe());
    if (command->action == Action::quit) return 0;
    if (!byte_send(control, kReadyByte)) return die("control send");
    auto served = round_serve(**link, *command, options.target_progress_thread);
    if (!served) RPCIE_LOG_ERROR("bench", "target round failed: {}", served.error().describe());
    if (!byte_send(control, served ? kRoundOk : kRoundFailed)) return die("control send");
  }
}

Columns transport_columns() { return Columns{.baseline = "raw", .subject = "rpcie", .name_width = 10}; }

int transport_bench(Link& link, const Options& options) {
  std::vector<Workload> workloads;
  for (auto kind : {raw::Workload::rma_write, raw::Workload::rma_read})
    for (std::size_t size : options.sizes) workloads.push_back(transport_workload(link, kind, size));
  workloads.push_back(transport_workload(link, raw::Workload::round_trip, 8));
  // A round is 8 slices of each side, about 0.2 s of raw work per side (shorter rounds on a
  // noisy 2-core VM are mostly noise): at least 16 operations, at most 2,000,000 per side.
  const DriverOptions driver{.rounds = options.rounds,
                             .first = Side::baseline,
                             .sizing = {.slice_seconds = 0.025, .min_operations = 2, .max_operations = 250000},
                             .columns = transport_columns(),
                             .text = !options.json(),
                             .verbose = options.verbose,
                             .progress_fd = options.progress_fd,
                             .only = options.only};
  auto rows = workloads_run(workloads, driver);
  if (!rows) return die(rows.error().describe());
  if (options.json()) {
    auto document = results_document(link.provider(), options.rounds, *rows, driver.columns);
    document["rpcie_target"] = options.target_progress_thread ? "progress-thread" : "busy-poll";
    document_print(std::move(document), kBenchCommit);
  }
  return 0;
}

}  // namespace rpcie::bench
