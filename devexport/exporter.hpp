// rpcie-exportd's engine: serves the configured exports to authenticated clients.
//
// Per connection (bootstrap TCP): mutual authentication first (docs/auth.md), then list
// requests, or one attach per connection; the connection then carries heartbeats, and
// when they stop for a lease, or the connection closes, or the client says goodbye, the
// attachment ends: device detached and reset where supported, memory keys closed, export
// free again.
//
// Per attachment: a ServedAttachment (served_attachment.hpp) is the data path: the
// client's requests in order, the device's DMA and interrupts. The exports and their holders
// are an ExportTable (export_table.hpp); the handshake is rpcie/handshake.hpp's server half.
//
// Threading: run() accepts on the calling thread; each connection has a thread; at most
// kMaxConnections at once (further ones are refused with an error message). stop (the
// atomic passed to run) ends everything within about a second.
#pragma once

#include <atomic>
#include <memory>

#include "config.hpp"
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
  // Serves until `stop` is true; then ends every attachment and returns.
  void run(const std::atomic<bool>& stop);

  struct Impl;

 private:
  explicit Exporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rpcie::dev
