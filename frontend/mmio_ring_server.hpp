// The hostd end of one MMIO ring (frontend/mmio/ring): a program run under `rpcie run` that
// maps a register BAR of a device asks for the device's ring over the control socket
// ({"op":"mmio_ring"}, one ring per device and program, for all its register BARs); hostd
// creates it in a memfd, passes the memfd with the answer, and keeps the connection. A
// drainer thread then serves the ring in order into the device's attachment: stores as
// posted MMIO writes, loads as MMIO reads (which do not pass earlier posted writes).
//
// Lifetime: the server ends when the program closes the connection (exit, crash, munmap of
// its last register-BAR mapping of the device), when the device is detached (its link answers
// ENOTCONN) or comes back reset (a new generation: the program's mapping is of the device
// that was), or when it is stopped. Ending closes the ring: the program's accesses then fail at once
// (loads read all ones), never hang.
//
// Errors: an access outside the BAR, or of a width it refuses, fails like any refused access
// (a load reads all ones, a store is counted in the ring's store_failures); a lost link fails
// accesses, and the device's reset ends the ring.
//
// Thread-safety: stop() and done() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "remote_device.hpp"
#include "ring.hpp"
#include "rpcie/fd.hpp"
#include "rpcie/mapping.hpp"
#include "rpcie/pci.hpp"
#include "rpcie/result.hpp"

namespace rpcie::hostd {

class MmioRingServer {
 public:
  static constexpr std::uint32_t kCapacity = 1024;  // entries: ~1000 stores posted before a wait
  static constexpr std::size_t kBurstMax = 256;     // stores the drainer posts in one burst

  // A ring for the register BARs of `device` (ENODEV if it has none), with its memfd, not
  // yet served.
  static Result<std::unique_ptr<MmioRingServer>> create(std::shared_ptr<RemoteDevice> device,
                                                        std::chrono::milliseconds timeout);
  ~MmioRingServer();  // stops
  MmioRingServer(const MmioRingServer&) = delete;
  MmioRingServer& operator=(const MmioRingServer&) = delete;

  // The memfd to pass to the program (owned by the server; dup it to keep it).
  int memfd() const noexcept { return memfd_.get(); }
  std::size_t bytes() const noexcept { return memory_.size(); }

  // Starts the drainer; `connection` is the program's control connection, watched for its end.
  // An empty one (the answer could not be sent): the ring is closed and done() at once.
  void serve(Fd connection);
  void stop();
  bool done() const noexcept { return done_.load(); }

 private:
  MmioRingServer() = default;
  void drain_run();
  // Whether a request names a register access the device could take (BAR, width, range).
  bool request_valid(const mmio::RingRequest& request) const;
  // Performs one load on the device; false when it failed.
  bool load_perform(const mmio::RingRequest& request, std::uint64_t& value);
  // Posts the stores gathered in `burst_` as one burst and empties it; failed ones are counted.
  void burst_send();
  // Gathers `first` (a store) and the stores ready behind it into burst_; a load met on the
  // way is left in `load` (true returned).
  bool burst_gather(const mmio::RingRequest& first, mmio::RingRequest& load);
  bool connection_ended() const;

  std::shared_ptr<RemoteDevice> device_;
  std::uint64_t generation_ = 0;                               // the device's when the ring was made
  std::array<std::uint64_t, pci::kBarCount> register_size_{};  // 0: not a register BAR
  std::chrono::milliseconds timeout_{5000};
  Fd memfd_;
  Mapping memory_;
  mmio::RingConsumer consumer_;
  Fd connection_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread drainer_;
  std::vector<client::Attachment::PostedWrite> burst_;  // the drainer's; reserved once
};

}  // namespace rpcie::hostd
