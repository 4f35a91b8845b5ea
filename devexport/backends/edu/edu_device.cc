#include "edu_device.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include "rpcie/log.hpp"

namespace rpcie::dev::edu {

namespace {

constexpr std::string_view kLog = "edu";

constexpr auto kDmaTimeout = std::chrono::seconds(5);
// A port call ends by its own deadline; this adds scheduling slack on a busy machine.
constexpr auto kQuiesceTimeout = kDmaTimeout + std::chrono::seconds(1);
// A transfer the link's resume holds up (EAGAIN) is tried again this much later by the worker.
constexpr auto kDmaRetry = std::chrono::milliseconds(10);
// The idle worker still wakes now and then, so that no wait is without a deadline. Rarely:
// whatever gives it work (a job queued or cancelled, stop) notifies it, and each export has
// a worker, attached or not (64 exports woken once a second took 0.2 % of a core).
constexpr auto kWorkerIdleWake = std::chrono::seconds(60);

std::uint64_t width_mask(unsigned width) {
  return width >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * width)) - 1;
}

// What QEMU's model decodes: 4-byte accesses below 0x80, 4- or 8-byte ones from 0x80 on.
bool width_decoded(std::uint64_t offset, unsigned width) {
  return offset < kRegWideStart ? width == 4 : (width == 4 || width == 8);
}

// n! modulo 2^32. From 34 on the product has at least 32 factors of two and wraps to 0, so
// the loop never runs the 4 billion rounds QEMU's would for a large n.
std::uint32_t factorial_wrapping(std::uint32_t n) {
  if (n >= 34) return 0;
  std::uint32_t product = 1;
  for (std::uint32_t i = 2; i <= n; ++i) product *= i;
  return product;
}

bool in_dma_buffer(std::uint64_t address, std::uint64_t count) {
  return address >= kDmaBufferAddress && count <= kDmaBufferSize &&
         address - kDmaBufferAddress <= kDmaBufferSize - count;
}

Result<void> mmio_access_check(std::uint8_t bar, std::uint64_t offset, unsigned width, std::string_view what) {
  if (bar == 0 && pci::access_valid(offset, width, kBar0Size)) return {};
  return fail(EINVAL, fmt::format("edu: mmio {} of {} bytes at BAR{} 0x{:x}: only BAR0 (1 MiB) exists, "
                                  "accesses are 1, 2, 4 or 8 bytes, aligned, inside it",
                                  what, width, bar, offset));
}

}  // namespace

Result<std::unique_ptr<Device>> Device::create(std::chrono::nanoseconds delay) {
  std::unique_ptr<Device> device(new Device(delay));
  try {
    device->worker_ = std::thread([raw = device.get()] { raw->worker_run(); });
  } catch (const std::system_error& e) {
    return fail(EAGAIN, std::string("edu: cannot start the worker thread: ") + e.what());
  }
  return device;
}

Device::~Device() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
    jobs_cancel();
  }
  work_changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Result<std::uint32_t> Device::config_read(std::uint32_t offset, unsigned width) { return config_.read(offset, width); }

Result<void> Device::config_write(std::uint32_t offset, unsigned width, std::uint32_t value) {
  return config_.write(offset, width, value);
}

Result<std::uint64_t> Device::mmio_read(std::uint8_t bar, std::uint64_t offset, unsigned width) {
  if (auto ok = mmio_access_check(bar, offset, width, "read"); !ok) return tl::unexpected(std::move(ok.error()));
  const std::uint64_t all_ones = width_mask(width);
  if (!width_decoded(offset, width)) return all_ones;
  std::lock_guard guard(mutex_);
  std::uint64_t value = all_ones;  // offsets not in the table, and the write-only ones
  switch (offset) {
    case kRegId:
      value = kIdValue;
      break;
    case kRegLiveness:
      value = regs_.liveness;
      break;
    case kRegFactorial:
      value = regs_.factorial;
      break;
    case kRegStatus:
      value = regs_.status;
      break;
    case kRegIrqStatus:
      value = regs_.irq_status;
      break;
    // A 4-byte read of a DMA register is its low half (the +4 offsets do not decode).
    case kRegDmaSrc:
      value = regs_.dma_src;
      break;
    case kRegDmaDst:
      value = regs_.dma_dst;
      break;
    case kRegDmaCount:
      value = regs_.dma_count;
      break;
    case kRegDmaCmd:
      value = regs_.dma_cmd;
      break;
    default:
      break;
  }
  return value & all_ones;
}

Result<void> Device::mmio_write(std::uint8_t bar, std::uint64_t offset, unsigned width, std::uint64_t value) {
  if (auto ok = mmio_access_check(bar, offset, width, "write"); !ok) return ok;
  if (!width_decoded(offset, width)) return {};
  // A 4-byte write to a DMA register thus zero-extends into all 64 bits, as in QEMU.
  value &= width_mask(width);
  const auto value32 = static_cast<std::uint32_t>(value);
  Lock lock(mutex_);
  // QEMU ignores every DMA register write while a transfer runs.
  const bool dma_running = (regs_.dma_cmd & kDmaCmdStart) != 0;
  switch (offset) {
    case kRegLiveness:
      regs_.liveness = ~value32;
      break;
    case kRegFactorial:
      if (regs_.status & kStatusComputing) break;
      regs_.factorial = value32;
      regs_.status |= kStatusComputing;
      factorial_due_ = Clock::now() + delay_;
      job_queued();
      break;
    case kRegStatus:  // only "interrupt when done" is writable; "computing" is the worker's
      regs_.status = (regs_.status & ~kStatusIrqOnFactorial) | (value32 & kStatusIrqOnFactorial);
      break;
    case kRegIrqRaise:
      regs_.irq_status |= value32;
      // As QEMU: every raise with a bit pending sends a message, even with value 0.
      if (regs_.irq_status != 0) irq_raise_unlocked(lock);
      break;
    case kRegIrqAck:
      regs_.irq_status &= ~value32;
      break;
    case kRegDmaSrc:
      if (!dma_running) regs_.dma_src = value;
      break;
    case kRegDmaDst:
      if (!dma_running) regs_.dma_dst = value;
      break;
    case kRegDmaCount:
      if (!dma_running) regs_.dma_count = value;
      break;
    case kRegDmaCmd:
      // QEMU takes a command only when it has the start bit; the others are dropped whole.
      if (dma_running || (value & kDmaCmdStart) == 0) break;
      regs_.dma_cmd = value;
      dma_due_ = Clock::now() + delay_;
      job_queued();
      break;
    default:
      break;
  }
  return {};
}

bool Device::mmio_write_is_doorbell(std::uint8_t bar, std::uint64_t offset) const noexcept {
  // The only write that can start a transfer out of host memory. The factorial reads none.
  return bar == 0 && offset == kRegDmaCmd;
}

Result<void> Device::attach(DmaPort* dma, IrqSink* irq) {
  std::lock_guard guard(mutex_);
  if (attached_) return fail(EBUSY, "edu: already attached; detach first");
  attached_ = true;
  dma_ = dma;
  irq_ = irq;
  return {};
}

void Device::detach() noexcept {
  Lock lock(mutex_);
  attached_ = false;
  dma_ = nullptr;
  irq_ = nullptr;
  jobs_cancel();
  work_changed_.notify_one();
  // The exporter may free the ports as soon as we return, so a call in progress has to end
  // first, however late: its own deadline bounds it.
  while (!ports_quiesce(lock, kQuiesceTimeout))
    RPCIE_LOG_ERROR(kLog, "detach: a DMA or interrupt call overran its deadline; still waiting for it");
  regs_ = Registers{};
  lock.unlock();
  config_.reset();
}

Result<void> Device::reset() {
  Lock lock(mutex_);
  jobs_cancel();
  work_changed_.notify_one();
  // After a reset no transfer of the old job may land: wait for one in flight.
  const bool quiet = ports_quiesce(lock, kQuiesceTimeout);
  regs_ = Registers{};
  lock.unlock();
  config_.reset();
  if (!quiet) return fail(EIO, "edu: reset: a DMA or interrupt call of the old job overran its deadline");
  return {};
}

void Device::job_queued() noexcept {
  // Inline jobs wait for work_run(), which the exporter calls once the write that queued
  // them has completed; waking the worker for them would only make it race for the lock.
  if (!jobs_inline()) work_changed_.notify_one();
}

void Device::work_inline_enable() noexcept {
  std::lock_guard guard(mutex_);
  inline_ = true;
}

void Device::work_run() noexcept {
  Lock lock(mutex_);
  if (!jobs_inline()) return;
  // Both jobs may be due (a factorial and a DMA started by one batch of writes): the
  // factorial first, as the worker would. Each finish drops the lock around port calls.
  for (;;) {
    const auto now = Clock::now();
    if (factorial_due_ && *factorial_due_ <= now)
      factorial_finish(lock);
    else if (dma_due_ && *dma_due_ <= now && dma_finish(lock))
      continue;
    else
      return;  // nothing due, or a transfer kept for after a resume (EAGAIN)
  }
}

void Device::worker_run() noexcept {
  Lock lock(mutex_);
  while (!stopping_) {
    const auto now = Clock::now();
    if (jobs_inline()) {
      // work_run() finishes every job; the worker only idles (until stop, or until inline
      // work is switched off, which does not happen today).
      work_changed_.wait_until(lock, now + kWorkerIdleWake);
      continue;
    }
    if (factorial_due_ && *factorial_due_ <= now) {
      factorial_finish(lock);
      continue;
    }
    if (dma_due_ && *dma_due_ <= now) {
      (void)dma_finish(lock);  // kept for later: dma_due_ says when
      continue;
    }
    auto wake = now + kWorkerIdleWake;
    if (factorial_due_) wake = std::min(wake, *factorial_due_);
    if (dma_due_) wake = std::min(wake, *dma_due_);
    work_changed_.wait_until(lock, wake);
  }
}

void Device::factorial_finish(Lock& lock) noexcept {
  factorial_due_.reset();
  regs_.factorial = factorial_wrapping(regs_.factorial);
  regs_.status &= ~kStatusComputing;
  // Like QEMU, bit 0x80 counts as it is when the result is ready, not when the work began.
  if (regs_.status & kStatusIrqOnFactorial) {
    regs_.irq_status |= kIrqFactorial;
    irq_raise_unlocked(lock);
  }
}

bool Device::dma_finish(Lock& lock) noexcept {
  dma_due_.reset();
  const std::uint64_t epoch = epoch_;
  const std::uint64_t cmd = regs_.dma_cmd;
  const std::uint64_t count = regs_.dma_count;
  const bool to_host = (cmd & kDmaCmdToHost) != 0;
  const std::uint64_t device_address = to_host ? regs_.dma_src : regs_.dma_dst;
  const std::uint64_t iova = to_host ? regs_.dma_dst : regs_.dma_src;
  const char* direction = to_host ? "to" : "from";

  // QEMU only logs a transfer outside the buffer and then performs it anyway (overrunning
  // its buffer); here it is not performed. The command still completes, interrupt included,
  // so that a driver waiting for it does not hang.
  if (!in_dma_buffer(device_address, count)) {
    RPCIE_LOG_WARN(
        kLog,
        "DMA of {} bytes {} IOVA 0x{:x} not performed: device address 0x{:x} is outside the buffer [0x{:x}, 0x{:x})",
        count, direction, iova, device_address, kDmaBufferAddress, kDmaBufferAddress + kDmaBufferSize);
  } else if (dma_ == nullptr) {
    RPCIE_LOG_WARN(kLog, "DMA of {} bytes {} IOVA 0x{:x} not performed: no client is attached", count, direction, iova);
  } else if (count > 0) {
    DmaPort* dma = dma_;
    const std::uint64_t offset = device_address - kDmaBufferAddress;
    const auto bytes = std::span(dma_scratch_).first(count);
    // The buffer is copied through scratch so that the port is never called with the lock.
    if (to_host) std::memcpy(bytes.data(), regs_.buffer.data() + offset, count);
    ++port_calls_;
    lock.unlock();
    const auto deadline = Deadline::after(kDmaTimeout);
    Result<void> done = to_host ? dma->dma_write(iova, bytes, deadline) : dma->dma_read(iova, bytes, deadline);
    lock.lock();
    port_call_end();
    if (epoch != epoch_) return true;  // reset or detach meanwhile: this job no longer exists
    if (!done && done.error().code == EAGAIN) {
      // The link to the client is being resumed: the transfer waits for it, as a device's
      // DMA waits for a link in recovery. Run again with the next work (inline: the exporter
      // runs due work after a resume), or by the worker after a pause.
      dma_due_ = Clock::now() + (jobs_inline() ? Clock::duration::zero() : kDmaRetry);
      return false;
    }
    if (!done)
      RPCIE_LOG_WARN(kLog, "DMA of {} bytes {} IOVA 0x{:x} not performed: {}", count, direction, iova,
                     done.error().describe());
    else if (!to_host)
      std::memcpy(regs_.buffer.data() + offset, bytes.data(), count);
  }
  regs_.dma_cmd &= ~kDmaCmdStart;
  // Only now, after dma_write returned: the client must see the data before the interrupt.
  if (cmd & kDmaCmdIrq) {
    regs_.irq_status |= kIrqDma;
    irq_raise_unlocked(lock);
  }
  return true;
}

void Device::irq_raise_unlocked(Lock& lock) noexcept {
  IrqSink* irq = irq_;
  if (irq == nullptr) return;
  ++port_calls_;
  lock.unlock();
  irq->irq_raise(0);  // the one vector carries every interrupt status bit
  lock.lock();
  port_call_end();
}

void Device::port_call_end() noexcept {
  if (--port_calls_ == 0) ports_idle_.notify_all();
}

bool Device::ports_quiesce(Lock& lock, Clock::duration timeout) noexcept {
  return ports_idle_.wait_for(lock, timeout, [this] { return port_calls_ == 0; });
}

void Device::jobs_cancel() noexcept {
  ++epoch_;
  factorial_due_.reset();
  dma_due_.reset();
}

}  // namespace rpcie::dev::edu
