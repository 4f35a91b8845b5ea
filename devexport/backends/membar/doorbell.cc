#include "doorbell.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <system_error>
#include <utility>

#include "rpcie/log.hpp"

namespace rpcie::dev::membar {

namespace {

using namespace std::chrono_literals;

constexpr std::string_view kLog = "membar";
// The idle worker still wakes now and then, so that no wait is without a deadline.
constexpr auto kWorkerIdleWake = 1s;
// The hash looks for a cancel between chunks, so power_on() waits at most one chunk.
constexpr std::size_t kHashChunk = std::size_t{1} << 20;
// An IrqSink call ends by the exporter's own deadline (2 s); this adds slack.
constexpr auto kQuiesceTimeout = 5s;

struct RegisterSpec {
  std::uint64_t offset;
  unsigned width;
  bool writable;
};
// Every register is readable; these are the only accesses BAR2 decodes.
constexpr std::array<RegisterSpec, 7> kRegisters{{
    {kRegId, 4, false},
    {kRegOffset, 8, true},
    {kRegLength, 8, true},
    {kRegDoorbell, 4, true},
    {kRegResult, 8, false},
    {kRegStatus, 4, false},
    {kRegCount, 4, false},
}};

const RegisterSpec* register_find(std::uint64_t offset, unsigned width) {
  for (const auto& r : kRegisters)
    if (r.offset == offset && r.width == width) return &r;
  return nullptr;
}

tl::unexpected<Error> refused(const char* what, std::uint64_t offset, unsigned width, const char* why) {
  return fail(EINVAL, fmt::format("membar: {} of {} bytes at BAR2 0x{:x}: {}", what, width, offset, why));
}

}  // namespace

Result<std::unique_ptr<Doorbell>> Doorbell::create(std::span<const std::uint8_t> memory) {
  std::unique_ptr<Doorbell> d(new Doorbell(memory));
  try {
    d->worker_ = std::thread([raw = d.get()] { raw->worker_run(); });
  } catch (const std::system_error& e) {
    return fail(EAGAIN, std::string("membar: cannot start the doorbell worker: ") + e.what());
  }
  return d;
}

Doorbell::~Doorbell() {
  {
    std::lock_guard guard(mutex_);
    stopping_ = true;
    ++epoch_;  // a hash in progress stops at its next chunk
    job_.reset();
  }
  work_changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Result<std::uint64_t> Doorbell::read(std::uint64_t offset, unsigned width) {
  if (register_find(offset, width) == nullptr)
    return refused("read", offset, width, "not a register at that width (see the register table)");
  std::lock_guard guard(mutex_);
  switch (offset) {
    case kRegId:
      return kIdValue;
    case kRegOffset:
      return regs_.offset;
    case kRegLength:
      return regs_.length;
    case kRegDoorbell:
      return regs_.doorbell;
    case kRegResult:
      return regs_.result;
    case kRegStatus:
      return regs_.status;
    default:  // kRegCount: register_find admits nothing else
      return regs_.count;
  }
}

Result<void> Doorbell::write(std::uint64_t offset, unsigned width, std::uint64_t value) {
  const RegisterSpec* r = register_find(offset, width);
  if (r == nullptr) return refused("write", offset, width, "not a register at that width (see the register table)");
  if (!r->writable) return refused("write", offset, width, "read-only register");
  std::lock_guard guard(mutex_);
  switch (offset) {
    case kRegOffset:
      regs_.offset = value;
      break;
    case kRegLength:
      regs_.length = value;
      break;
    default:  // kRegDoorbell
      regs_.doorbell = static_cast<std::uint32_t>(value);
      if (regs_.status & kStatusBusy) break;  // ignored while one is served
      regs_.status = kStatusBusy;
      job_ = Job{regs_.offset, regs_.length};
      work_changed_.notify_one();
      break;
  }
  return {};
}

void Doorbell::attach(IrqSink* irq) noexcept {
  std::lock_guard guard(mutex_);
  irq_ = irq;
}

void Doorbell::detach() noexcept {
  Lock lock(mutex_);
  power_on_locked(lock);
  irq_ = nullptr;  // no raise is in progress: power_on_locked waited for it
}

void Doorbell::power_on() noexcept {
  Lock lock(mutex_);
  power_on_locked(lock);
}

void Doorbell::power_on_locked(Lock& lock) noexcept {
  ++epoch_;
  job_.reset();
  // Nothing of the old doorbell may happen after we return: no read of the memory (it is
  // about to be zeroed), no interrupt.
  while (!outside_idle_.wait_for(lock, kQuiesceTimeout, [this] { return outside_ == 0; }))
    RPCIE_LOG_ERROR(kLog, "power-on: the doorbell worker overran its deadline; still waiting for it");
  regs_ = Registers{};
}

void Doorbell::worker_run() noexcept {
  Lock lock(mutex_);
  while (!stopping_) {
    if (job_)
      job_serve(lock);
    else
      work_changed_.wait_for(lock, kWorkerIdleWake);
  }
}

void Doorbell::job_serve(Lock& lock) noexcept {
  const Job job = *std::exchange(job_, std::nullopt);
  const std::uint64_t epoch = epoch_.load();
  const bool inside = job.offset <= memory_.size() && job.length <= memory_.size() - job.offset;
  std::uint64_t result = 0;
  if (inside) {
    ++outside_;
    lock.unlock();  // a long hash must not hold STATUS reads (or power_on) back
    const auto hash = range_hash(job, epoch);
    lock.lock();
    outside_end();
    if (!hash || epoch != epoch_.load()) return;  // power_on meanwhile: this job no longer exists
    result = *hash;
  } else {
    RPCIE_LOG_DEBUG(kLog, "doorbell: range [0x{:x} +0x{:x}) is outside BAR0 (0x{:x} bytes)", job.offset, job.length,
                    memory_.size());
  }
  // The order a driver relies on: RESULT, then STATUS, then COUNT (one critical section),
  // and the interrupt only after all three.
  regs_.result = result;
  regs_.status = inside ? 0 : kStatusError;
  ++regs_.count;
  IrqSink* irq = irq_;
  if (irq == nullptr) return;
  ++outside_;
  lock.unlock();
  irq->irq_raise(kDoorbellVector);
  lock.lock();
  outside_end();
}

std::optional<std::uint64_t> Doorbell::range_hash(const Job& job, std::uint64_t epoch) const noexcept {
  std::uint64_t hash = kFnvOffsetBasis;
  const auto range = memory_.subspan(job.offset, job.length);
  for (std::size_t at = 0; at < range.size(); at += kHashChunk) {
    if (epoch_.load(std::memory_order_relaxed) != epoch) return std::nullopt;
    hash = fnv1a_update(hash, range.subspan(at, std::min(kHashChunk, range.size() - at)));
  }
  return hash;
}

void Doorbell::outside_end() noexcept {
  if (--outside_ == 0) outside_idle_.notify_all();
}

}  // namespace rpcie::dev::membar
