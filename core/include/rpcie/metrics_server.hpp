// A minimal HTTP/1.x server for one thing: `GET /metrics`, answered with what a source
// function renders (the Prometheus text format, metrics_text.hpp). The daemons' --metrics.
//
// Contract:
//  - One thread serves every connection with poll(); nothing it does blocks on a peer.
//    Each connection has a deadline (Options::connection_timeout from its accept): a client
//    that sends its request slowly, or reads its answer slowly, is closed then.
//  - At most Options::connections_max connections at once. A further one replaces the
//    oldest connection still waiting for its request (a scraper sends its request at once,
//    an idle or hostile one does not); when none is waiting, the new one is closed at once.
//  - A request (request line and headers) over Options::request_max bytes is answered
//    431; a request line that is not `METHOD SP TARGET SP HTTP/1.x` 400; a method other
//    than GET 405 (with `Allow: GET`); a path other than /metrics (a query is ignored) 404.
//    Every answer carries Content-Length and `Connection: close`, and the connection is
//    closed after it. The 200 answer's Content-Type is `text/plain; version=0.0.4;
//    charset=utf-8`. A request body is not read.
//  - `source` is called on the server's thread, once per good request: it must be
//    thread-safe with respect to the rest of the program, and quick (it delays other
//    scrapes while it runs).
//  - The destructor stops the thread (a wake-up, not a poll timeout) and joins it; it
//    returns once the source call in progress, if any, has.
// Errors (start): EINVAL for an address that is not an IPv4 or IPv6 literal, EADDRINUSE
// (and other bind/listen errno) with the address in the message.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "rpcie/result.hpp"

namespace rpcie::metrics {

// "ADDR:PORT" (IPv4 literal) or "[ADDR]:PORT" (IPv6 literal): the port is required (0:
// any free one). EINVAL with a message saying what is wrong.
Result<std::pair<std::string, std::uint16_t>> listen_address_parse(std::string_view text);

class MetricsServer {
 public:
  using Source = std::function<std::string()>;
  struct Options {
    std::chrono::milliseconds connection_timeout{5000};
    std::size_t request_max = 8192;
    std::size_t connections_max = 8;
  };

  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address, std::uint16_t port, Source source,
                                                      Options options);
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address, std::uint16_t port, Source source) {
    return start(address, port, std::move(source), Options{});
  }
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The port bound (the one asked for, or the free one port 0 found).
  std::uint16_t port() const noexcept;

  // The answer to one complete request head (up to and including its empty line): the
  // whole HTTP response. No I/O; `source` is called for a good request only.
  static std::string answer(std::string_view head, const Source& source);

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rpcie::metrics
