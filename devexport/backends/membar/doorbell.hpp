// membar's doorbell unit (`doorbell=on`): BAR2's register block and the worker thread that
// serves each doorbell by hashing a range of the memory BAR. Internal to the membar backend;
// the register map is rpcie/membar_registers.hpp, the table and rules README.md's.
//
// Contract:
//  - read()/write(): exactly the widths and offsets of the register table; anything else is
//    EINVAL (nothing changes). Called from the attachment's thread (never overlapping), as
//    backend.hpp says of mmio_*.
//  - A DOORBELL write while no doorbell is being served snapshots OFFSET and LENGTH, sets
//    STATUS to busy (clearing error) and hands the job to the worker; mmio_write never waits
//    for the hash (64 MiB take tens of milliseconds). A DOORBELL write while busy is ignored
//    (not served, not counted): STATUS.busy is how a driver knows to wait. OFFSET and LENGTH
//    may be rewritten while busy; they count for the next doorbell.
//  - Serving: RESULT := FNV-1a of memory[OFFSET, OFFSET+LENGTH) (or 0 with STATUS.error when
//    the range is not inside the memory), then STATUS.busy clears, then COUNT moves — all in
//    one critical section, so a reader sees all three or none — and only then, with the lock
//    released, vector 0 is raised through the IrqSink (if one is set). An out-of-range
//    doorbell is served too (error bit, COUNT, interrupt): a driver waiting never hangs.
//  - attach(): the sink used from the next interrupt on (nullptr: none). The caller keeps
//    it valid until detach() returned.
//  - power_on(): cancels a doorbell in progress or queued (its result is dropped, it never
//    raises), waits until the worker is out of the memory and out of any IrqSink call, and
//    clears every register. After it returns nothing of the old doorbell happens, so the
//    memory may be zeroed. detach(): the same, and the sink is forgotten (may be freed).
//  - The memory span must outlive the Doorbell; the worker only reads it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "backend.hpp"
#include "rpcie/membar_registers.hpp"

namespace rpcie::dev::membar {

// The register map of the device this unit emulates (as edu's backend does with its own).
using namespace ::rpcie::membar;

class Doorbell {
 public:
  // Starts the worker thread (EAGAIN if it cannot be created).
  static Result<std::unique_ptr<Doorbell>> create(std::span<const std::uint8_t> memory);
  ~Doorbell();  // stops and joins the worker
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  Result<std::uint64_t> read(std::uint64_t offset, unsigned width);
  Result<void> write(std::uint64_t offset, unsigned width, std::uint64_t value);
  void attach(IrqSink* irq) noexcept;
  void detach() noexcept;
  void power_on() noexcept;

 private:
  using Lock = std::unique_lock<std::mutex>;

  struct Registers {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::uint32_t doorbell = 0;  // the last value written
    std::uint64_t result = 0;
    std::uint32_t status = 0;
    std::uint32_t count = 0;
  };
  struct Job {
    std::uint64_t offset;
    std::uint64_t length;
  };

  explicit Doorbell(std::span<const std::uint8_t> memory) noexcept : memory_(memory) {}

  void power_on_locked(Lock& lock) noexcept;
  void worker_run() noexcept;
  void job_serve(Lock& lock) noexcept;
  // FNV-1a of the range, or nothing when power_on() cancelled the job meanwhile.
  std::optional<std::uint64_t> range_hash(const Job& job, std::uint64_t epoch) const noexcept;
  void outside_end() noexcept;

  const std::span<const std::uint8_t> memory_;
  std::mutex mutex_;
  std::condition_variable work_changed_;  // worker: a job was queued, or stop
  std::condition_variable outside_idle_;  // power_on: the worker came back under the lock
  // Guarded by mutex_ (epoch_ is also read, unlocked, by the hashing worker):
  Registers regs_;
  std::optional<Job> job_;
  std::atomic<std::uint64_t> epoch_{0};  // bumped by power_on: an older job's result is dropped
  IrqSink* irq_ = nullptr;
  int outside_ = 0;  // the worker is hashing or inside an IrqSink call, without the lock
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace rpcie::dev::membar
