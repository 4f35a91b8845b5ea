// rpcie client API — what the compute side (rpcie-hostd, the rpcie CLI, tests, benchmarks)
// uses to reach devices that an rpcie-exportd exports.
//
// Connection: every call below opens a bootstrap TCP connection to the exporter and
// authenticates on it first (mutual challenge-response over the pre-shared key, then a MAC
// on every frame; docs/auth.md). An Attachment keeps its connection for its whole life: it
// carries heartbeats (the exporter frees the device when they stop for a lease) and the
// detach. Device traffic goes over the fabric (a Session per attachment).
//
// Ordering (ARCHITECTURE.md section 1): one attachment is one ordered queue.
//  1. mmio_write() is posted: it returns once the write is on its way, and writes reach the
//     device in issue order. Many can be in flight (no round trip each).
//  2. mmio_read(), config_*() and flush() do not pass earlier writes: their reply proves
//     that every earlier write was performed.
//  3. Memory the caller wrote into the DMA window before an mmio_write() is what the device
//     reads when that write starts DMA (the exporter pulls the window first in mirror mode).
//     With streaming DMA (ClientOptions::window_push) it is what the caller pushed.
//  4. When interrupt_wait() reports an interrupt, or mmio_read() returns a value, the bytes
//     the device wrote into the window before raising it / answering are already there.
// A lost link is resumed (docs/reliability.md, "Resumption"): when a send, a receive or a
// heartbeat fails, the attachment connects to the exporter again and goes on with the same
// device (its state, the windows and mirrors kept): what the exporter had not performed is
// sent again, once and in order, and answers the link lost arrive again. Callers see a delay
// within their deadlines, not an error; stats().resumes counts it. Only when that is not
// possible within the lease (the exporter restarted, or holds the attachment no longer) does
// the attachment fail: posted writes that returned may then be lost, and the next operation
// fails (EIO / ENOTCONN), never a silent success. An error the device side reports for a
// posted write (e.g. a read-only BAR) is returned by the next operation too, unless
// ClientOptions::posted_errors says to count it instead.
//
// Threading: an Attachment may be used from several threads at once; a thread waiting for
// a reply receives for everyone (no hand-off on the latency path) and a background thread
// progresses the fabric and counts interrupts while nobody waits. The heartbeats of all of
// a process's attachments go from one thread ("rpcie-lease"), which runs while any does.
//
// Errors: Result<> with errno values at this level: EACCES (key refused, not allowed),
// EBUSY (attached by someone else; the message names who), ENOENT (no such export),
// EINVAL (bad width, offset, BAR), EPERM (the device refused, e.g. read-only), ETIMEDOUT
// (deadline), EIO / ENOTCONN (the link or the attachment is gone). Every call takes a
// deadline; none blocks past it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rpcie/auth.hpp"
#include "rpcie/channel_stats.hpp"
#include "rpcie/data_path.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/latency_histogram.hpp"
#include "rpcie/pci.hpp"
#include "rpcie/providers/choice.hpp"
#include "rpcie/result.hpp"

namespace rpcie::client {

struct BarDesc {
  std::uint8_t bar = 0;
  pci::BarKind kind = pci::BarKind::registers;
  std::uint64_t size = 0;
  bool is_64bit = false;
  bool readonly = false;
  bool direct = false;  // plain memory: bulk transfers are one-sided RMA to the BAR
};

// One export as the exporter describes it (list, attach).
struct ExportDesc {
  std::string name;
  std::string backend;
  std::string holder;  // client(s) attached, "" when free
  std::uint16_t vendor = 0;
  std::uint16_t device = 0;
  std::uint32_t class_code = 0;
  std::uint16_t subsystem_vendor = 0;
  std::uint16_t subsystem_device = 0;
  std::uint8_t revision = 0;
  bool attached = false;
  bool shared = false;
  bool mirror = false;
  std::uint16_t vectors = 0;
  std::vector<BarDesc> bars;
  // The export's data-path policy (docs/security.md 5): sealed or open only, or automatic
  // (the client's choice, else its provider's default).
  DataPathChoice data_path_policy = DataPathChoice::automatic;
  // exports_list(): the mode an attach by this client (its ClientOptions) would run
  // (export_data_path() over the provider it would use toward the exporter); empty when
  // no provider is usable. Attachment::device(): the mode the attachment runs.
  std::optional<DataPath> data_path;

  const BarDesc* bar_find(std::uint8_t bar) const noexcept;
};

struct ClientOptions {
  std::string name;                      // client name the exporter knows the key by (default: host name)
  std::shared_ptr<const auth::Key> key;  // required
  providers::ProviderChoice provider;    // which libfabric provider (both peers must agree)
  // After an API call that received (a read, a flush, interrupt_wait), the background
  // receiver stands aside this long, leaving the fabric to the application's next call
  // (waking it between back-to-back calls costs a context switch each). Interrupts that
  // arrive meanwhile wait for it or for the next call. An application that mostly waits
  // for interrupts outside this API says so with Attachment::interrupt_watch().
  std::chrono::microseconds receiver_quiet{2000};
  // Streaming DMA (as Linux's dma_sync_single_for_device): the application calls
  // window_push() for what the device is to read from the window before the doorbell that
  // starts it. On a mirror-mode export the exporter then does not pull the whole window
  // before every doorbell: just those bytes travel, ahead of the doorbell (inside its message
  // up to 8 KiB, as a one-sided write beyond), instead of a round trip for the whole window
  // after it. What the application writes into the window without pushing it is not seen by
  // the device. No effect on an on-demand export (the device reads the window itself there).
  bool window_push = false;
  // What an error the device side reports for a posted MMIO write (a width or register it
  // refuses) does. next_operation: the caller's next operation returns it instead of its own
  // result (the caller learns of it, late). counted: it is counted
  // (AttachmentStats::posted_write_errors) and logged (the 1st, 2nd, 4th, 8th, ... one), and
  // the next operation is unaffected — what a PCIe root complex does with a posted write the
  // device refuses (rpcie-hostd: programs' loads and stores behave as on hardware). A lost
  // link fails the next operation either way.
  enum class PostedErrors { next_operation, counted };
  PostedErrors posted_errors = PostedErrors::next_operation;
  // The data path (rpcie/data_path.hpp) this client asks for: automatic asks for its
  // provider's default (sealed on tcp, open on shm, verbs and efa) and takes whatever the
  // export's policy says; sealed or open insist: an export whose policy is the other mode
  // refuses the attach (EPROTO, the message naming both modes and the export).
  DataPathChoice data_path = DataPathChoice::automatic;
  // The attachment's spinning waiters yield their CPU while other threads keep wanting it
  // (ChannelOptions::yield_when_contended): for a service like rpcie-hostd, whose waiters
  // wait on behalf of the programs it serves; off for an application's own threads.
  bool spin_yield = false;
};

// The mode an attach of `e` would run for a client over provider `kind` whose choice is
// `choice`: the export's policy if it has one (an insisting client of the other mode is
// refused), else the client's choice, else the provider's default (open on a bootstrap
// connection that is not authenticated: sealed needs its keys).
DataPath export_data_path(const ExportDesc& e, providers::ProviderKind kind, bool authenticated,
                          DataPathChoice choice = DataPathChoice::automatic) noexcept;

// What the exporter exports, and who holds each export. (client_protocol.hpp has the
// authenticated connection itself, for tools that speak the protocol.)
Result<std::vector<ExportDesc>> exports_list(const std::string& host, std::uint16_t port, const ClientOptions& options,
                                             Deadline deadline);

// The compute side's DMA window: memory the caller owns and keeps mapped for the life of the
// attachment (hostd: a shared-memory file). The attachment registers it with the fabric
// (remote read/write for the exporter only, unique random key) and deregisters on detach.
// Offset 0 is IOVA 0.
struct DmaWindow {
  void* base = nullptr;
  std::size_t size = 0;
};

struct AttachmentStats {
  std::uint64_t config_reads = 0, config_writes = 0;
  std::uint64_t mmio_reads = 0, mmio_writes = 0;
  std::uint64_t bar_bytes_read = 0, bar_bytes_written = 0;
  std::uint64_t window_bytes_pushed = 0;
  std::uint64_t posted_write_errors = 0;  // reported by the device side (PostedErrors::counted)
  // Received and dropped: forged, replayed or reordered (sealed attachments), from another
  // address, replies to no outstanding request, out-of-range interrupt counts.
  std::uint64_t messages_refused = 0;
  std::uint64_t messages_replayed = 0;  // of those: authentic but replayed or reordered (the seal)
  std::uint64_t interrupts = 0;
  std::uint64_t heartbeats = 0;
  // Times the link to the exporter was lost and the attachment resumed over a new one
  // (device state kept, unanswered requests sent again once).
  std::uint64_t resumes = 0;
  // Timed calls (those AttachmentLatency times) that returned an error, invalid arguments
  // included.
  std::uint64_t operations_failed = 0;
};

// How long this attachment's calls took, from the call to its return on the calling thread,
// successful calls only (a failed one is counted in AttachmentStats::operations_failed).
// Each is a snapshot of a LatencyHistogram (1 us .. 10 s buckets); timing costs the two
// clock reads and one record per call (rpcie/latency_histogram.hpp), nothing on the wire.
//  - mmio_read, config_read, config_write: the round trip to the device, including settling
//    the posted writes queued before (rule 2).
//  - flush: flush() calls.
//  - bar_read, bar_write: one call of bar_read/bar_read_visit/bar_read_into_window or
//    bar_write/bar_write_fill/bar_write_from_window, whatever its size (a direct BAR's write
//    returns once the provider took the data: that is what is timed).
// Not here, because no call of this side spans them:
//  - mmio_write() and window_push(): posted, they return once queued, so their time says
//    nothing about the device. The device's DMA itself is a one-sided transfer the exporter
//    performs against the window, unseen here (zero copy): rpcie-exportd times each one,
//    request to completion, and tells it (device_telemetry(), DeviceTelemetry; also its
//    --metrics, rpcie_export_latency_seconds{op="dma_read"|"dma_write"|"window_pull"}).
//  - an interrupt's way from the device: no interval across the two hosts is timed, since
//    their clocks are not synchronised. Each side times its own part on its own clock:
//    rpcie-exportd from the device's raise to the message handed to the fabric (op
//    "interrupt"), and a user of this API from interrupt_arrived() to whatever it does with
//    the interrupt (rpcie-hostd: to its events files' waiters woken, "interrupt_delivery").
//    The fabric's one-way trip in between is not measured (it is not observable on one
//    clock); AttachmentStats::interrupts counts the interrupts.
struct AttachmentLatency {
  LatencyHistogram::Snapshot mmio_read, config_read, config_write, flush, bar_read, bar_write;
};

// What the exporter measured of this attachment's device since the attachment began (on a
// resumed one: since its first link), each interval on the exporter's clock alone, successful
// operations only (Attachment::device_telemetry, protocol message telemetry_reply):
//  - dma_read, dma_write: one device transfer from its request to its completion. On-demand
//    exports: the one-sided RMA read or write of this side's window, completed. Mirror
//    exports: the copy to or from the exporter's mirror (their fabric cost is in
//    window_pull and interrupt). dma_read_bytes / dma_written_bytes: what they moved.
//  - window_pull: a mirror export's pull of the whole window before a doorbell (none where
//    this side pushes, ClientOptions::window_push, and none on-demand).
//  - interrupt: from the device raising one to its message handed to the fabric, behind the
//    DMA writes before it.
struct DeviceTelemetry {
  std::uint64_t dma_read_bytes = 0, dma_written_bytes = 0;
  LatencyHistogram::Snapshot dma_read, dma_write, window_pull, interrupt;
};

class Attachment {
 public:
  static Result<std::unique_ptr<Attachment>> open(const std::string& host, std::uint16_t port,
                                                  const std::string& export_name, const ClientOptions& options,
                                                  DmaWindow window, Deadline deadline);
  // Detaches if still attached (bounded: at most about a second).
  ~Attachment();
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;

  const ExportDesc& device() const noexcept;
  std::uint64_t id() const noexcept;
  const std::string& provider() const noexcept;
  // The data-path mode the exporter decided for this attachment (device().data_path).
  DataPath data_path() const noexcept;
  std::chrono::milliseconds lease() const noexcept;

  Result<std::uint32_t> config_read(std::uint16_t offset, unsigned width, Deadline deadline);
  Result<void> config_write(std::uint16_t offset, unsigned width, std::uint32_t value, Deadline deadline);

  Result<std::uint64_t> mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width, Deadline deadline);
  // Posted: returns once queued (see ordering above); the batch it joins is sent within
  // 20 us or by the next operation (the first few writes of a burst are sent at once, by
  // this call). The 20 us are the background dispatcher's, which never preempts the caller:
  // with the caller computing on the only CPU the process may use, the batch leaves when the
  // caller's time slice ends (a few ms) unless it calls first. If the batch cannot be sent
  // within the deadline of the call that sends it (a dead link), those writes are lost and
  // the attachment fails (EIO).
  Result<void> mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value,
                          Deadline deadline);
  struct PostedWrite {
    std::uint8_t bar = 0;
    unsigned width = 0;
    std::uint64_t offset = 0;
    std::uint64_t value = 0;
  };
  // A burst of posted writes that are all known now (rpcie-hostd's MMIO ring drainer): as
  // mmio_write() of each in order, but they leave together, in as few messages as the batch
  // size allows, before this call returns. Every write is checked first: EINVAL and none is
  // queued if one is not a valid register access.
  Result<void> mmio_write_burst(std::span<const PostedWrite> writes, Deadline deadline);
  // Returns once every earlier posted write has been performed by the device.
  Result<void> flush(Deadline deadline);

  // Streaming DMA (ClientOptions::window_push): the device will read [window_offset,
  // +length) of the window as it is now. Posted, like mmio_write(): it returns once the
  // bytes are taken (up to 8 KiB copied into the pending posted-write batch, kept until the
  // exporter performed it, as every posted write is; larger ranges written one-sided into the
  // exporter's mirror once every earlier posted write is performed — a round trip when one is
  // unconfirmed — and returned once they are proven there, as bar_write's are); every later
  // operation is ordered behind
  // it (a doorbell written next finds them), earlier posted writes are performed before it,
  // and a link lost meanwhile is resumed with nothing lost. Copied bytes leave with
  // the next posted write (in the same message) or operation, else within about 20 ms.
  // Does nothing where the exporter reads the window itself (on-demand exports, or
  // window_push not set). EINVAL outside the window or without one.
  Result<void> window_push(std::uint64_t window_offset, std::uint64_t length, Deadline deadline);

  // Bulk access to a memory BAR (any size and offset inside it). Direct BARs: one-sided RMA
  // to the BAR through a registered staging buffer of the attachment; others: through the
  // exporter's bounce buffer. Both first settle earlier posted MMIO writes (rule 2). A write
  // returns once its bytes are proven in the BAR over the link that carried them (not posted
  // as a PCIe memory write is: a resumed link performs every later request, so a write lost
  // with the old link would be lost silently): sealed, the exporter's acknowledgement; open,
  // the reply to a request sent after it (or the write's own delivery-complete completion
  // where the provider has no FI_ORDER_SAW). A link lost meanwhile is resumed and the write
  // sent again whole.
  Result<void> bar_write(std::uint8_t bar, std::uint64_t offset, std::span<const std::uint8_t> bytes,
                         Deadline deadline);
  // bar_write from a source the caller copies itself: `fill(at, piece)` writes the bytes of
  // [offset + at, + piece.size()) into `piece` of the attachment's registered staging buffer
  // (in order, `at` counted from `offset`, at most 4 MiB each). Each byte is asked for exactly
  // once, also when a resumed link sends a piece again, so the source may be a stream (a
  // pipe). An error from `fill` ends the write there (earlier pieces may have been written)
  // and is returned. It runs on the calling thread with the staging buffer held: it must not
  // call this attachment's bulk operations.
  Result<void> bar_write_fill(std::uint8_t bar, std::uint64_t offset, std::uint64_t length,
                              const std::function<Result<void>(std::uint64_t at, std::span<std::uint8_t> piece)>& fill,
                              Deadline deadline);
  Result<void> bar_read(std::uint8_t bar, std::uint64_t offset, std::span<std::uint8_t> bytes, Deadline deadline);
  // bar_read without the copy into a caller's buffer: `take(at, piece)` sees each piece of
  // [offset, +length) where it arrived, in the attachment's registered staging buffer (in
  // order, `at` counted from `offset`, at most 4 MiB each), and must not keep the span. It
  // runs on the calling thread, with the attachment's staging buffer held: it must not call
  // this attachment's bulk operations.
  Result<void> bar_read_visit(std::uint8_t bar, std::uint64_t offset, std::uint64_t length,
                              const std::function<void(std::uint64_t at, std::span<const std::uint8_t> piece)>& take,
                              Deadline deadline);
  // Zero-copy variants for data already in the DMA window (registered): [window_offset,
  // +length) to or from the BAR. Direct BARs only (EOPNOTSUPP otherwise).
  Result<void> bar_write_from_window(std::uint8_t bar, std::uint64_t offset, std::uint64_t window_offset,
                                     std::uint64_t length, Deadline deadline);
  Result<void> bar_read_into_window(std::uint8_t bar, std::uint64_t offset, std::uint64_t window_offset,
                                    std::uint64_t length, Deadline deadline);

  // Interrupts raised on `vector` since attach (never decreases).
  std::uint64_t interrupt_count(std::uint16_t vector) const;
  // When the latest interrupt (any vector) that raised a count arrived: this host's steady
  // clock read as the message was received, before the count rose and the listener was
  // called; the clock's epoch before the first. From inside a listener it is the arrival of
  // the interrupt it hears of (or of a later one). For timing what this side does with an
  // interrupt (rpcie-hostd's delivery to its events files), on this side's clock alone.
  Deadline::Clock::time_point interrupt_arrived() const;
  // Waits until the count on `vector` exceeds `seen`; returns the new count. ETIMEDOUT at
  // the deadline; EIO when the attachment fails meanwhile.
  Result<std::uint64_t> interrupt_wait(std::uint16_t vector, std::uint64_t seen, Deadline deadline);

  // `listener` is called whenever an interrupt count rises or the attachment fails, by the
  // thread that received the news (an API caller or the background thread): it must be
  // quick and must not call this attachment's blocking operations (interrupt_count() and
  // failure() are fine). Calls are serialised; once listen() returns, the previous listener
  // is not running and will not be called again. An empty function removes it.
  void listen(std::function<void()> listener);
  // Someone waits for this attachment's interrupts outside this API (rpcie-hostd: a read
  // parked on an events file, a poll() armed on one), through listen(). While any such
  // watch is on, the background receiver does not stand aside for `receiver_quiet` after a
  // call: it receives as soon as calls end, so an interrupt reaches the listener within a
  // wake-up instead of after the quiet spell. The price: a wake-up of the receiver at the
  // start and end of each call meanwhile. Counted: every interrupt_watch(true) needs its
  // interrupt_watch(false). Thread-safe.
  void interrupt_watch(bool watching);

  // Orderly end: the exporter resets the device and closes the memory keys. Afterwards every
  // call fails with ENOTCONN.
  Result<void> detach(Deadline deadline);

  // The sticky error once the attachment has failed (link lost and not resumed, lease
  // refused, ...).
  std::optional<Error> failure() const;
  // While the link is lost and being resumed: the loss (nullopt otherwise). Thread-safe.
  std::optional<Error> link_loss() const;
  AttachmentStats stats() const;
  // Thread-safe, lock-free snapshot (each histogram read once; see AttachmentLatency).
  AttachmentLatency latency() const;
  // Asks the exporter for DeviceTelemetry: one request and its answer on the data path,
  // behind the posted writes sent before it. Not an operation of the device: a posted write's
  // error is neither reported nor consumed (the next operation reports it), nothing is timed
  // or counted, and it does not wait for a lost link: EAGAIN while one is being resumed,
  // ECONNRESET if it is lost meanwhile. Other errors: the attachment's failure, ETIMEDOUT at
  // `deadline`, EPROTO from an exporter that does not know the request.
  // Thread-safe.
  Result<DeviceTelemetry> device_telemetry(Deadline deadline);
  ChannelStats channel_stats() const;

  // Opaque here; defined by the implementation (core/src/client/attachment_state.hpp).
  struct State;

 private:
  explicit Attachment(std::unique_ptr<State> state);
  Result<void> window_transfer(bool write, std::uint8_t bar, std::uint64_t offset, std::uint64_t window_offset,
                               std::uint64_t length, Deadline deadline);
  std::unique_ptr<State> s_;
};

}  // namespace rpcie::client
