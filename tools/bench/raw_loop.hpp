// Raw-libfabric baseline for rpcie-bench.
//
// A deliberately minimal libfabric loop that uses no rpcie code, modelled on
// fabtests' fi_rma_bw / fi_pingpong (RDM endpoint, one-time registration,
// busy-polled CQ, fixed window), so rpcie's numbers can be expressed as a
// ratio of what the fabric itself delivers on the same machine.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace rpcie::bench::raw {

// round_trip: a message of `size` bytes and an equal reply. send_reply: a message of `size`
// bytes and an 8 B reply (a pushed DMA: data and doorbell in one message, the interrupt back).
// read_reply: an 8 B message; the target reads `size` bytes of the initiator's buffer (one
// fi_read, waited for) and then sends an 8 B reply (an on-demand DMA: doorbell, the device's
// read of the window, the interrupt).
// write_reply: an 8 B message; the target writes `size` bytes into the initiator's buffer (one
// fi_write), proves them there by reading their last byte back (fi_read of 1 byte, performed
// after the write: FI_ORDER_RAW), and then sends an 8 B reply (a device-to-host DMA into an
// on-demand window on the open data path: doorbell, the device's write proven in the window,
// the interrupt).
// sealed_write: `size` bytes of the initiator's buffer go as sealed messages of at most the
// sealer's chunk each (sealed straight from the buffer into the send slot), `window` in
// flight; the target opens each in its receive buffer, copies it into its own buffer, and
// acknowledges the transfer with 8 B once its last chunk is in place (rpcie's sealed data
// path writing a BAR: a delivered write, whose last put is acknowledged).
// sealed_read: an 8 B request; the target seals `size` bytes of its buffer the same way
// (all its send contexts in flight); done when the initiator has opened and copied them all.
// plain_write, plain_read: the same messages (as long, the seal's overhead included) copied
// instead of sealed and not opened: the transport's share of the sealed workloads alone.
enum class Workload {
  rma_write,
  rma_read,
  round_trip,
  send_reply,
  read_reply,
  sealed_write,
  sealed_read,
  plain_write,
  plain_read,
  write_reply  // last: the control socket carries a workload as its number
};

// The sealed workloads' cipher, handed in by the caller (rpcie-bench passes the data path's
// own AEAD, with keys both of its processes derive alike) so this loop stays free of rpcie
// code. Used only by the thread that calls run()/serve(); messages open in the order sealed.
class Sealer {
 public:
  virtual ~Sealer() = default;
  // Sealed size minus plain size.
  virtual std::size_t overhead() const = 0;
  // Seals `len` bytes at `plain` as the next message into `out` (len + overhead() bytes).
  virtual void seal(const void* plain, std::size_t len, void* out) = 0;
  // Opens the `len` sealed bytes at `sealed` in place; false if they are not authentic.
  virtual bool open(void* sealed, std::size_t len, const void** plain, std::size_t* plain_len) = 0;
};

struct RawConfig {
  std::string prov_name;            // fi_info prov_name, e.g. "tcp;ofi_rxm" or "shm"
  std::string node;                 // local IPv4 address to bind (FI_SOURCE) or empty (shm)
                                    // (shm must get empty: a shared node is a shared region name)
  std::size_t max_size = 4u << 20;  // largest transfer; buffers sized from it
  std::size_t window = 64;          // operations in flight (fi_rma_bw default)
  // Upper bound on open()'s address exchange and on each run()/serve() call, so a
  // wedged provider or a vanished peer turns into an error instead of a hang.
  double timeout_sec = 30.0;
};

// One side of a two-process benchmark. Not thread-safe (the domain is opened
// with FI_THREAD_DOMAIN so providers can skip locking, as in a tight bench loop).
//
// Control-socket protocol: open() exchanges a small address blob and a one-byte
// barrier; an RMA round ends with one 'E' byte client->server; either side may
// send a one-byte 'A' (abort) when a round fails so the peer errors out quickly.
// While run()/serve() are active, the caller must not send anything else on ctrl_fd.
class RawPeer {
 public:
  // Both sides call open() with the same config over an already-connected TCP
  // socket `ctrl_fd` (blocking, owned by the caller). nullptr + *err on failure.
  static std::unique_ptr<RawPeer> open(const RawConfig& cfg, int ctrl_fd, bool server, std::string* err);
  ~RawPeer();
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  // Initiator (client) side. RMA: `iterations` fi_write/fi_read of `size` bytes
  // with `window` in flight (the config's window when 0; 1 measures one operation's
  // round trip). round_trip, send_reply, read_reply, write_reply: `iterations` exchanges (above), one
  // at a time; size 0 means 8. sealed_* and plain_*: `iterations` transfers of `size` bytes
  // one after another, `window` chunks in flight (the writes; 0: the config's).
  // Returns seconds from first post to last completion, or < 0 with *err set. With
  // `operation_seconds` (message and sealed workloads, and RMA with window 1), the seconds
  // of each operation are appended to it (one clock read per operation).
  double run(Workload w, std::size_t size, std::size_t iterations, std::string* err, std::size_t window = 0,
             std::vector<double>* operation_seconds = nullptr);

  // Target (server) side of the same round. RMA: busy-poll the CQ (manual data
  // progress) until the client's end-of-round byte arrives. Message and sealed workloads:
  // receive and answer `iterations` messages or transfers, busy-polling; `window`: the sealed
  // and plain reads' chunks in flight (0: the config's). false + *err on error.
  bool serve(Workload w, std::size_t size, std::size_t iterations, std::string* err, std::size_t window = 0);

  // RMA writes complete only once delivered at the target (FI_DELIVERY_COMPLETE, through
  // fi_writemsg), as the rpcie channel's do where the provider lacks send-after-write
  // ordering; default off (fi_write, the provider's default completion).
  void write_delivery_complete_set(bool delivery_complete);

  // The sealed workloads' cipher and their largest plain message (`chunk`); without one they
  // fail. False + *err when the window's chunks do not fit the send buffer.
  bool sealer_set(std::unique_ptr<Sealer> sealer, std::size_t chunk, std::string* err);

  // One-line summary of what the provider handed back (for bench logs).
  std::string describe() const;

 private:
  struct Impl;
  explicit RawPeer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rpcie::bench::raw
