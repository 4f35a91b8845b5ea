// One remote device as rpcie-hostd holds it: the attachment to the exporter, kept alive
// across link losses (reconnect with back-off, same DMA window, new generation), and the
// interrupt counts the `events` files show.
//
// Threads: a supervisor thread per device watches the attachment and reconnects. Every
// public member is thread-safe. The change listener runs on fabric or supervisor threads,
// never with this object's lock held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dma_window.hpp"
#include "interrupt_counts.hpp"
#include "rpcie/client.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/latency_histogram.hpp"
#include "rpcie/pci.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

struct AttachParams {
  std::string host;
  std::uint16_t port = 0;
  std::string export_name;
  std::size_t window_size = 0;
  // The data path this attach asks for; unset: hostd's (AttachContext::client.data_path).
  std::optional<DataPathChoice> data_path;
};

// What every attachment of this hostd shares.
struct AttachContext {
  client::ClientOptions client;
  std::chrono::milliseconds timeout{5000};  // bounds every operation on a device
  // Bounds one attach (connect, authenticate, set up the fabric and register the window),
  // first or reconnect: slower than an operation, and not the operator's I/O budget.
  std::chrono::milliseconds attach_timeout{10000};
  std::string shm_dir = "/dev/shm";
  gid_t group = 0;
  mode_t mode = 0660;
};

// connected: the attachment serves; resuming: its link was lost and the client API is
// resuming it (same device, same generation); reconnecting / failed: a new attachment is
// being made (a new generation: the device was reset).
enum class LinkState { connected, resuming, reconnecting, failed };
const char* link_state_name(LinkState s) noexcept;

enum class DeviceChange {
  interrupt,    // an interrupt count rose
  lost,         // the attachment failed; the device reconnects in the background
  reconnected,  // a new attachment (new generation): cached BAR contents are stale
};

class RemoteDevice {
 public:
  // Attaches (bounded by `deadline`), reads what the tree needs (config size, BAR
  // addresses) and starts the supervisor. `index` is N of rpcieN.
  static Result<std::shared_ptr<RemoteDevice>> attach(const AttachParams& params, const AttachContext& context,
                                                      unsigned index, Deadline deadline);
  ~RemoteDevice();  // detaches if still attached (bounded)
  RemoteDevice(const RemoteDevice&) = delete;
  RemoteDevice& operator=(const RemoteDevice&) = delete;

  // Set once, right after attach, before anything can change. For an interrupt the listener
  // is hostd's delivery of it (the events files answer their parked reads and wake their
  // pollers): it is timed (Status::interrupt_delivery).
  void listen(std::function<void(DeviceChange)> listener);

  unsigned index() const noexcept { return index_; }
  const AttachParams& params() const noexcept { return params_; }
  // Identity and BARs as the exporter described them at the first attach.
  const client::ExportDesc& desc() const noexcept { return desc_; }
  // pci::kConfigSpaceLegacySize, or pci::kConfigSpaceSize for PCI Express.
  std::uint32_t config_size() const noexcept { return config_size_; }
  std::uint64_t bar_address(std::uint8_t bar) const noexcept { return bar < pci::kBarCount ? bar_address_[bar] : 0; }
  const std::string& window_path() const noexcept { return window_.path(); }
  std::uint16_t vectors() const noexcept { return desc_.vectors; }

  // The attachment to use now: EIO while reconnecting (with the reason), ENOTCONN after detach.
  Result<std::shared_ptr<client::Attachment>> link() const;
  // The same for what was opened or mapped at `generation`: EIO for good once the device
  // came back as a new attachment (the exporter reset it: what was written before is gone,
  // and an open file must not go on as if it were not). Reopening gives the current one.
  Result<std::shared_ptr<client::Attachment>> link(std::uint64_t generation) const;
  // 1 at attach, +1 per reconnect (each a reset device).
  std::uint64_t generation() const;

  struct Status {
    LinkState state = LinkState::connected;
    std::uint64_t generation = 1;  // 1 at attach, +1 per reconnect
    std::uint64_t losses = 0;      // link losses so far
    std::string provider;
    DataPath data_path = DataPath::open;  // of the latest attachment (the current one unless reconnecting)
    std::string last_error;               // why the last loss / reconnect attempt failed
    client::AttachmentStats stats;        // of the current attachment
    client::AttachmentLatency latency;    // of the current attachment
    // hostd's own part of an interrupt's way, of the current attachment: from its arrival in
    // the client library (client::Attachment::interrupt_arrived, this host's steady clock) to
    // the return of the listener told of it (the events files have answered their parked
    // reads and woken their pollers). One record per interrupt that raised a visible count
    // (not on a masked vector; what unmasking delivers is not timed: it waited for the mask).
    // The waiters' own wake-up is theirs, not recorded.
    LatencyHistogram::Snapshot interrupt_delivery;
  };
  Status status() const;
  std::uint64_t losses() const;

  // Interrupts on `vector` since attach (across reconnects), as the mask lets them through:
  // while masked the count holds; unmasking delivers what arrived meanwhile (like MSI's
  // pending bit).
  std::uint64_t interrupts(std::uint16_t vector) const;
  void mask_set(std::uint16_t vector, bool masked);
  // Someone waits for this device's interrupts (an events file's parked read or armed
  // poll): the attachment, and each one after a reconnect, receives them at once
  // (client::Attachment::interrupt_watch). Counted; every true needs its false.
  void interrupt_watch(bool watching);

  // Orderly end: stops reconnecting, detaches (the exporter resets the device).
  Result<void> detach(Deadline deadline);
  // The first half of detach(), without waiting: no new reconnect attempt starts, the DMA
  // window's file is unlinked. For shutting many devices down at once (a reconnect attempt
  // in progress still runs to its deadline; detach() waits for it).
  void stop_request();

 private:
  RemoteDevice(const AttachParams& params, const AttachContext& context, unsigned index, DmaWindowFile window);
  Result<std::shared_ptr<client::Attachment>> open_once(Deadline deadline);
  void install(std::shared_ptr<client::Attachment> a);  // takes the lock
  bool counts_refresh_locked();
  // Takes the lock; tells the listener if a count rose, and then, given the interrupt's
  // `arrived` time, records its delivery.
  void counts_refresh(std::optional<Deadline::Clock::time_point> arrived = std::nullopt);
  void supervise();
  void notify(DeviceChange change);

  const AttachParams params_;
  const AttachContext context_;
  const unsigned index_;
  DmaWindowFile window_;
  client::ExportDesc desc_;
  std::uint32_t config_size_ = pci::kConfigSpaceLegacySize;
  std::uint64_t bar_address_[pci::kBarCount] = {};

  mutable std::mutex lock_;
  std::condition_variable wake_;
  std::shared_ptr<client::Attachment> current_;  // null while reconnecting
  DataPath data_path_ = DataPath::open;          // current_'s, or the last one's
  LinkState state_ = LinkState::connected;
  std::uint64_t generation_ = 1;
  std::uint64_t losses_ = 0;
  std::string last_error_;
  bool stop_ = false;
  bool detached_ = false;
  unsigned watchers_ = 0;  // interrupt_watch(true) calls not yet undone
  InterruptCounts counts_;
  // Lock-free (recorded outside lock_): every delivery since attach; Status shows what was
  // recorded since delivery_base_, the snapshot taken when the current attachment came.
  LatencyHistogram interrupt_delivery_;
  LatencyHistogram::Snapshot delivery_base_;

  std::mutex listener_lock_;
  std::function<void(DeviceChange)> listener_;
  std::thread supervisor_;
};

}  // namespace rpcie::hostd
