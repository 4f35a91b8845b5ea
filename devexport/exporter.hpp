// rpcie-exportd's engine: serves the configured exports to authenticated clients.
//
// Per connection (bootstrap TCP): mutual authentication first (docs/auth.md), then list
// requests, or one attach per connection; the connection then carries heartbeats, and
// when they stop for a lease, or the connection closes, or the client says goodbye, the
// attachment ends: device detached and reset where supported, memory keys closed, export
// free again.
//
// Per attach: the data-path mode (rpcie/data_path.hpp) is data_path_decide's for the export's
// policy and what the client asks: the policy wins, a client that insists on the other mode
// is refused (EPROTO, the text naming both); the mode goes into the attach_reply and the
// attachment's Session.
//
// Per attachment: a ServedAttachment (served_attachment.hpp) is the data path: the
// client's requests in order, the device's DMA and interrupts. The exports and their holders
// are an ExportTable (export_table.hpp); the handshake is rpcie/handshake.hpp's server half.
//
// Connections, in two pools that never take from each other:
//  - pre-authentication: from accept until the handshake ends. At most
//    config.preauth_per_address from one source (preauth_source: an IPv4 address or an
//    IPv6 /64) and config.preauth_max in all; a
//    connection over either cap is accepted and closed at once (an EBUSY error frame, then
//    close: never left in the listen backlog), whatever its address, even one that has
//    authenticated clients. Each must authenticate within config.preauth_timeout (1 s) of
//    its accept, or it is closed.
//  - authenticated: at most kMaxConnections; a further one is refused (EBUSY, "too many
//    connections") right after its handshake.
// So idle or slow connections, however many, cannot keep an authenticated client out;
// only a peer with more than preauth_max / preauth_per_address sources can fill the
// pre-authentication pool, and only for as long as it keeps reopening connections.
//
// Unknown client names are answered with one decoy key made in create() (auth::ServerKeys).
// Failed handshakes and refused connections are logged at a bounded rate (LogLimiter), with
// the count of lines left out, and counted in stats().
//
// Reload (reload()): the exports only, by ExportTable's rules (export_table.hpp): new ones
// appear, removed ones go when free, a changed one is replaced when free and otherwise kept
// as it runs (named in the outcome's `refused`). Every other setting (listen, provider,
// keys and clients, lease, access log, pre-authentication caps) is read at start only; so
// an allow list may name only clients whose own key was loaded at start.
//
// Threading: run() accepts on the calling thread and never blocks on a peer (a refusal is
// one non-blocking send); each admitted connection has a thread. stop (the atomic passed to
// run) ends everything within about a second. stats(), counts() and reload() may be called
// from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "config.hpp"
#include "export_table.hpp"
#include "rpcie/result.hpp"

namespace rpcie::dev {

class Exporter {
 public:
  static constexpr std::size_t kMaxConnections = 64;

  // Reads the keys, creates the backends and opens the listening socket.
  static Result<std::unique_ptr<Exporter>> create(const ExporterConfig& config);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  std::uint16_t port() const noexcept;
  // Serves until `stop` is true; then ends every attachment and returns. Logs the stats
  // at info as it stops. `tick`, when set, is called on the accept thread between two
  // accepts, at least every 200 ms: its calls show that the accept loop goes round (the
  // daemon's watchdog pings from it) and it may call reload().
  void run(const std::atomic<bool>& stop, const std::function<void()>& tick = {});

  // Applies the exports of `config` (see above). The whole of it is checked first
  // (config_check, every new or changed export's backend created): an error, its message
  // starting with the offending entry's origin ("FILE:LINE: "), leaves the exports as they
  // were.
  Result<ExportTable::ReloadOutcome> reload(const ExporterConfig& config);
  // The exports now, and how many are attached.
  ExportTable::Counts counts() const;

  // Counters since create(); each read is a snapshot.
  struct Stats {
    std::uint64_t accepted = 0;          // connections accepted (refused ones included)
    std::uint64_t refused_preauth = 0;   // over a pre-authentication cap: closed at once
    std::uint64_t refused_busy = 0;      // authenticated, but kMaxConnections were already
    std::uint64_t auth_failed = 0;       // handshakes that failed or timed out
    std::uint64_t frames_dropped = 0;    // bootstrap frames dropped for a bad MAC (ended connections)
    std::uint64_t frames_malformed = 0;  // authenticated connections closed for a malformed frame
    std::uint64_t messages_refused = 0;  // data-path messages dropped: foreign, forged, replayed (ended attachments)
  };
  Stats stats() const noexcept;
  // The Prometheus text of stats() and of every export's counters (export_metrics.hpp), for
  // --metrics. Any thread.
  std::string metrics_text() const;

  struct Impl;

 private:
  explicit Exporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rpcie::dev
