// The MMIO ring: how a program's loads and stores on a mapped register BAR reach rpcie-hostd
// without a FUSE round trip. One ring per device and process, for all the device's register
// BARs (so that accesses to different BARs keep their program order, as a CPU's do on PCIe),
// in shared memory that hostd creates (a memfd, passed over the control socket) and both map. Many producers (the
// program's threads, inside librpcie-mmio's SIGSEGV handler), one consumer (hostd's drainer).
//
// Order (docs/protocol.md, rules 1-2): entries are served strictly in the order their slots
// were claimed. A store is posted: the producer returns once the entry is published. A load
// is published like a store and the producer then waits for its answer, which the consumer
// gives only after every earlier entry was performed — so a load never passes a store.
//
// Waiting: both sides sleep on futex words in the shared memory (no syscall on the fast path
// while the other side is awake). Every producer wait has a deadline; a consumer that went
// away leaves the ring `closed` or lets the deadline fail the access.
//
// Producer members are async-signal-safe (no allocation, no locks, errno kept) and safe from
// any thread. Consumer members are for one thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rpcie::mmio {

inline constexpr std::uint32_t kRingMagic = 0x52494d52;  // "RMIR"
inline constexpr std::uint32_t kRingVersion = 1;

enum class RingOp : std::uint8_t { store = 1, load = 2 };

// Load answers (RingEntry::answer).
enum class RingAnswer : std::uint32_t { waiting = 0, value = 1, failed = 2 };

struct alignas(64) RingEntry {
  // Vyukov's sequence: == pos, free for the producer of position pos; == pos + 1, published;
  // == pos + capacity, free for the next lap. A load's slot is freed by its producer once it
  // has read the answer, a store's by the consumer once it is performed.
  std::atomic<std::uint64_t> sequence;
  std::uint64_t offset;               // in the BAR
  std::uint64_t value;                // a store's value; a load's answer
  std::atomic<std::uint32_t> answer;  // RingAnswer; futex word of the waiting producer
  RingOp op;
  std::uint8_t width;  // 1, 2, 4 or 8
  std::uint8_t bar;    // 0-5
};

struct RingHeader {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t capacity;  // entries; a power of two
  std::uint32_t entry_size;
  alignas(64) std::atomic<std::uint64_t> tail;      // next position a producer claims
  alignas(64) std::atomic<std::uint32_t> doorbell;  // futex word the consumer sleeps on
  std::atomic<std::uint32_t> consumer_sleeping;
  std::atomic<std::uint32_t> closed;                  // 1: the consumer is gone for good; producers fail at once
  alignas(64) std::atomic<std::uint32_t> slot_freed;  // futex word of producers waiting for a slot
  std::atomic<std::uint32_t> producers_waiting;
  std::atomic<std::uint64_t> store_failures;  // posted stores the device side could not perform
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free,
              "the ring is shared between processes: its atomics must not hide a lock");

// Bytes of shared memory a ring of `capacity` entries takes (header, then the entries).
std::size_t ring_bytes(std::uint32_t capacity) noexcept;

// Formats `memory` (ring_bytes(capacity) bytes, zeroed, 64-byte aligned) as an empty ring.
// capacity: a power of two from 2 to 1 << 20; false otherwise.
bool ring_format(void* memory, std::size_t size, std::uint32_t capacity) noexcept;

class RingProducer {
 public:
  RingProducer() = default;
  // Validates a mapped ring (magic, version, capacity, size); false if it is not one.
  bool attach(void* memory, std::size_t size) noexcept;
  bool attached() const noexcept { return header_ != nullptr; }
  // Forgets the ring (the caller unmaps it).
  void reset() noexcept;

  // Publishes a store; waits (at most `timeout_ms`) only while the ring is full. false: the
  // ring is closed or stayed full past the deadline.
  bool store(unsigned bar, std::uint64_t offset, unsigned width, std::uint64_t value, int timeout_ms) noexcept;
  // Publishes a load and waits at most `timeout_ms` for its answer. false: closed, failed on
  // the device side, or no answer in time (the slot is then abandoned: the ring is no longer
  // usable and closed() reports true from this producer's side).
  bool load(unsigned bar, std::uint64_t offset, unsigned width, std::uint64_t& value, int timeout_ms) noexcept;

  bool closed() const noexcept;
  std::uint64_t store_failures() const noexcept;

 private:
  // Claims the next position and waits for its slot; null on close or deadline.
  RingEntry* slot_claim(std::uint64_t& position, std::int64_t deadline_ns) noexcept;
  void publish(RingEntry& entry, std::uint64_t position) noexcept;

  RingHeader* header_ = nullptr;
  RingEntry* entries_ = nullptr;
  std::uint32_t mask_ = 0;
  mutable std::atomic<bool> abandoned_{false};
};

struct RingRequest {
  RingOp op = RingOp::store;
  unsigned bar = 0;
  unsigned width = 0;
  std::uint64_t offset = 0;
  std::uint64_t value = 0;  // stores
};

class RingConsumer {
 public:
  RingConsumer() = default;
  // `memory` was formatted by ring_format.
  bool attach(void* memory, std::size_t size) noexcept;

  // The next entry in order, waiting at most `timeout_ms` (spinning `spin_ns` first, then
  // sleeping on the doorbell). false: nothing arrived in time. After a true, call exactly
  // one of store_done() / load_answer() before the next call.
  bool next(RingRequest& request, int timeout_ms, std::int64_t spin_ns) noexcept;
  // The store just taken was performed (ok) or not (counted in store_failures). Its slot
  // is free again: the caller keeps what it still needs of the request. `wake` false: the
  // producers waiting for a slot are not woken yet (the caller frees more slots first, then
  // calls producers_wake() once: one wake-up per burst instead of one per slot).
  void store_done(bool ok, bool wake = true) noexcept;
  // Wakes the producers waiting for a free slot, if any.
  void producers_wake() noexcept;
  // `count` stores taken earlier (store_done(true) when taken) could not be performed after all.
  void stores_failed(std::uint64_t count) noexcept;
  // Answers the load just taken and wakes its producer.
  void load_answer(bool ok, std::uint64_t value) noexcept;
  // No more answers will come: producers fail from now on, and waiting ones are woken.
  void close() noexcept;

 private:
  bool ready() const noexcept;

  RingHeader* header_ = nullptr;
  RingEntry* entries_ = nullptr;
  std::uint32_t mask_ = 0;
  std::uint64_t head_ = 0;  // the position being served
};

}  // namespace rpcie::mmio
