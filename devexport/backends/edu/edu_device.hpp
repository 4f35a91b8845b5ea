// The edu function behind edu_create(): BAR0's register model, the device's DMA buffer, and
// the worker thread that finishes factorials and DMA transfers (or, with inline work enabled
// and no delay, work_run() on the exporter's attachment thread). Internal to the edu backend;
// the contract is edu.hpp's, the register table README.md's.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "backend.hpp"
#include "edu_config.hpp"
#include "rpcie/edu_registers.hpp"

namespace rpcie::dev::edu {

class Device final : public Backend {
 public:
  // Starts the worker thread (EAGAIN if it cannot be created).
  static Result<std::unique_ptr<Device>> create(std::chrono::nanoseconds delay);
  ~Device() override;  // stops and joins the worker
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  std::string_view name() const noexcept override { return "edu"; }
  const Identity& identity() const noexcept override { return kIdentity; }
  std::span<const Region> regions() const noexcept override { return regions_; }
  std::uint16_t vector_count() const noexcept override { return 1; }
  bool uses_dma() const noexcept override { return true; }

  Result<std::uint32_t> config_read(std::uint32_t offset, unsigned width) override;
  Result<void> config_write(std::uint32_t offset, unsigned width, std::uint32_t value) override;
  Result<std::uint64_t> mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width) override;
  Result<void> mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value) override;
  bool mmio_write_is_doorbell(std::uint8_t bar, std::uint64_t offset) const noexcept override;
  Result<void> attach(DmaPort* dma, IrqSink* irq) override;
  void detach() noexcept override;
  Result<void> reset() override;
  void work_inline_enable() noexcept override;
  void work_run() noexcept override;

 private:
  using Clock = std::chrono::steady_clock;
  using Lock = std::unique_lock<std::mutex>;

  // BAR0 state at power-on (value-initialised) and as the driver sees it.
  struct Registers {
    std::uint32_t liveness = 0;    // 0x04: holds the inverse of the last write
    std::uint32_t factorial = 0;   // 0x08: n while computing, n! after
    std::uint32_t status = 0;      // 0x20
    std::uint32_t irq_status = 0;  // 0x24
    std::uint64_t dma_src = 0;     // 0x80
    std::uint64_t dma_dst = 0;     // 0x88
    std::uint64_t dma_count = 0;   // 0x90
    std::uint64_t dma_cmd = 0;     // 0x98
    std::array<std::uint8_t, kDmaBufferSize> buffer{};
  };

  explicit Device(std::chrono::nanoseconds delay) noexcept : delay_(delay) {}

  void worker_run() noexcept;
  // Whether jobs are left to work_run() (inline enabled and no delay) instead of the worker.
  bool jobs_inline() const noexcept { return inline_ && delay_ == std::chrono::nanoseconds::zero(); }
  void job_queued() noexcept;
  void factorial_finish(Lock& lock) noexcept;
  // False when the transfer was kept for later (EAGAIN: the link is being resumed).
  bool dma_finish(Lock& lock) noexcept;
  // Raises vector 0 through the IrqSink, if attached, with the lock released meanwhile.
  void irq_raise_unlocked(Lock& lock) noexcept;
  void port_call_end() noexcept;
  // Waits until no DmaPort/IrqSink call is in progress; false if `timeout` passed first.
  bool ports_quiesce(Lock& lock, Clock::duration timeout) noexcept;
  // Pending work is dropped and a worker inside a port call will discard its result.
  void jobs_cancel() noexcept;

  const std::chrono::nanoseconds delay_;
  const std::array<Region, 1> regions_{
      {{.bar = 0, .size = kBar0Size, .kind = RegionKind::registers, .is_64bit = false, .readonly = false}}};
  ConfigSpace config_;  // attachment thread only: the worker never touches it

  std::mutex mutex_;
  std::condition_variable work_changed_;  // worker: a job was queued or cancelled, or stop
  std::condition_variable ports_idle_;    // detach/reset: a port call ended
  // Guarded by mutex_:
  Registers regs_;
  std::optional<Clock::time_point> factorial_due_;  // a factorial finishes then
  std::optional<Clock::time_point> dma_due_;        // a DMA transfer is performed then
  std::uint64_t epoch_ = 0;                         // bumped by reset/detach: results of older jobs are dropped
  bool attached_ = false;
  DmaPort* dma_ = nullptr;
  IrqSink* irq_ = nullptr;
  int port_calls_ = 0;  // worker or mmio thread inside a DmaPort/IrqSink call
  bool stopping_ = false;
  bool inline_ = false;  // work_inline_enable() was called

  // Bytes in flight: used by whichever thread runs jobs (the worker, or the caller of
  // work_run() when jobs_inline(); never both, and one DMA runs at a time).
  std::array<std::uint8_t, kDmaBufferSize> dma_scratch_{};
  std::thread worker_;
};

}  // namespace rpcie::dev::edu
