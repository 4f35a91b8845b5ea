#include "ring.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace rpcie::mmio {
namespace {

// Shared (not FUTEX_PRIVATE): the two sides are different processes.
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept {
  const int saved = errno;
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  errno = saved;
}

// Sleeps while `word` holds `expected`, at most until `deadline_ns` (CLOCK_MONOTONIC).
void futex_wait_until(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::int64_t deadline_ns) noexcept {
  const int saved = errno;
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const std::int64_t left = deadline_ns - (static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec);
  if (left > 0) {
    const timespec relative{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, expected, &relative, nullptr, 0);
  }
  errno = saved;
}

std::int64_t now_ns() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

std::int64_t deadline_after_ms(int timeout_ms) noexcept { return now_ns() + std::int64_t{timeout_ms} * 1000000; }

bool capacity_valid(std::uint32_t capacity) noexcept {
  return capacity >= 2 && capacity <= (1u << 20) && (capacity & (capacity - 1)) == 0;
}

// Where a ring's parts are, if `memory` holds a valid one.
bool ring_locate(void* memory, std::size_t size, RingHeader*& header, RingEntry*& entries) noexcept {
  if (memory == nullptr || size < sizeof(RingHeader)) return false;
  auto* h = static_cast<RingHeader*>(memory);
  if (h->magic != kRingMagic || h->version != kRingVersion || h->entry_size != sizeof(RingEntry) ||
      !capacity_valid(h->capacity) || size < ring_bytes(h->capacity))
    return false;
  header = h;
  entries = reinterpret_cast<RingEntry*>(static_cast<std::uint8_t*>(memory) + sizeof(RingHeader));
  return true;
}

}  // namespace

std::size_t ring_bytes(std::uint32_t capacity) noexcept {
  return sizeof(RingHeader) + std::size_t{capacity} * sizeof(RingEntry);
}

bool ring_format(void* memory, std::size_t size, std::uint32_t capacity) noexcept {
  if (!capacity_valid(capacity) || memory == nullptr || size < ring_bytes(capacity)) return false;
  auto* header = static_cast<RingHeader*>(memory);
  auto* entries = reinterpret_cast<RingEntry*>(static_cast<std::uint8_t*>(memory) + sizeof(RingHeader));
  for (std::uint32_t i = 0; i < capacity; ++i) entries[i].sequence.store(i, std::memory_order_relaxed);
  header->capacity = capacity;
  header->entry_size = sizeof(RingEntry);
  header->version = kRingVersion;
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kRingMagic;  // last: a ring is valid only once formatted whole
  return true;
}

// --- Producer ---------------------------------------------------------------------------------

bool RingProducer::attach(void* memory, std::size_t size) noexcept {
  if (!ring_locate(memory, size, header_, entries_)) return false;
  mask_ = header_->capacity - 1;
  return true;
}

void RingProducer::reset() noexcept {
  header_ = nullptr;
  entries_ = nullptr;
  mask_ = 0;
  abandoned_.store(false, std::memory_order_relaxed);
}

bool RingProducer::closed() const noexcept {
  return header_ == nullptr || abandoned_.load(std::memory_order_relaxed) ||
         header_->closed.load(std::memory_order_acquire) != 0;
}

std::uint64_t RingProducer::store_failures() const noexcept {
  return header_ == nullptr ? 0 : header_->store_failures.load(std::memory_order_relaxed);
}

RingEntry* RingProducer::slot_claim(std::uint64_t& position, std::int64_t deadline_ns) noexcept {
  if (closed()) return nullptr;
  position = header_->tail.fetch_add(1, std::memory_order_relaxed);
  RingEntry& entry = entries_[position & mask_];
  // The slot is free once the lap before has left it; the ring is full until then.
  while (entry.sequence.load(std::memory_order_acquire) != position) {
    if (closed() || now_ns() >= deadline_ns) {
      // The position is claimed and will never be published: nothing behind it can be
      // served in order any more, so this ring is done for this process.
      abandoned_.store(true, std::memory_order_relaxed);
      return nullptr;
    }
    const std::uint32_t seen = header_->slot_freed.load(std::memory_order_acquire);
    header_->producers_waiting.fetch_add(1, std::memory_order_seq_cst);
    if (entry.sequence.load(std::memory_order_seq_cst) != position)
      futex_wait_until(header_->slot_freed, seen, deadline_ns);
    header_->producers_waiting.fetch_sub(1, std::memory_order_relaxed);
  }
  return &entry;
}

void RingProducer::publish(RingEntry& entry, std::uint64_t position) noexcept {
  entry.sequence.store(position + 1, std::memory_order_seq_cst);
  // Pairs with the consumer's consumer_sleeping store and re-check: either it sees this
  // entry, or this sees it asleep and rings.
  if (header_->consumer_sleeping.load(std::memory_order_seq_cst) != 0) {
    header_->doorbell.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(header_->doorbell);
  }
}

bool RingProducer::store(unsigned bar, std::uint64_t offset, unsigned width, std::uint64_t value,
                         int timeout_ms) noexcept {
  std::uint64_t position = 0;
  RingEntry* entry = slot_claim(position, deadline_after_ms(timeout_ms));
  if (entry == nullptr) return false;
  entry->op = RingOp::store;
  entry->bar = static_cast<std::uint8_t>(bar);
  entry->width = static_cast<std::uint8_t>(width);
  entry->offset = offset;
  entry->value = value;
  publish(*entry, position);
  return true;
}

bool RingProducer::load(unsigned bar, std::uint64_t offset, unsigned width, std::uint64_t& value,
                        int timeout_ms) noexcept {
  const std::int64_t deadline = deadline_after_ms(timeout_ms);
  std::uint64_t position = 0;
  RingEntry* entry = slot_claim(position, deadline);
  if (entry == nullptr) return false;
  entry->op = RingOp::load;
  entry->bar = static_cast<std::uint8_t>(bar);
  entry->width = static_cast<std::uint8_t>(width);
  entry->offset = offset;
  entry->answer.store(static_cast<std::uint32_t>(RingAnswer::waiting), std::memory_order_relaxed);
  publish(*entry, position);
  std::uint32_t answer = 0;
  while ((answer = entry->answer.load(std::memory_order_acquire)) == static_cast<std::uint32_t>(RingAnswer::waiting)) {
    if (now_ns() >= deadline || header_->closed.load(std::memory_order_acquire) != 0) {
      abandoned_.store(true, std::memory_order_relaxed);  // the slot stays ours: see load()'s contract
      return false;
    }
    futex_wait_until(entry->answer, static_cast<std::uint32_t>(RingAnswer::waiting), deadline);
  }
  value = entry->value;
  // The answer is read: the slot is free for the next lap.
  entry->sequence.store(position + mask_ + 1, std::memory_order_seq_cst);
  if (header_->producers_waiting.load(std::memory_order_seq_cst) != 0) {
    header_->slot_freed.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(header_->slot_freed);
  }
  return answer == static_cast<std::uint32_t>(RingAnswer::value);
}

// --- Consumer ---------------------------------------------------------------------------------

bool RingConsumer::attach(void* memory, std::size_t size) noexcept {
  if (!ring_locate(memory, size, header_, entries_)) return false;
  mask_ = header_->capacity - 1;
  head_ = 0;
  return true;
}

bool RingConsumer::ready() const noexcept {
  return entries_[head_ & mask_].sequence.load(std::memory_order_acquire) == head_ + 1;
}

bool RingConsumer::next(RingRequest& request, int timeout_ms, std::int64_t spin_ns) noexcept {
  const std::int64_t start = now_ns();
  const std::int64_t deadline = start + std::int64_t{timeout_ms} * 1000000;
  while (!ready()) {
    if (now_ns() - start < spin_ns) {
      // A producer on this same CPU must get to run: spinning without yielding would hold
      // it off for the whole spin, once per store.
      ::sched_yield();
      continue;
    }
    if (now_ns() >= deadline) return false;
    const std::uint32_t bell = header_->doorbell.load(std::memory_order_seq_cst);
    header_->consumer_sleeping.store(1, std::memory_order_seq_cst);
    if (!ready()) futex_wait_until(header_->doorbell, bell, deadline);
    header_->consumer_sleeping.store(0, std::memory_order_relaxed);
  }
  const RingEntry& entry = entries_[head_ & mask_];
  request.op = entry.op;
  request.bar = entry.bar;
  request.width = entry.width;
  request.offset = entry.offset;
  request.value = entry.value;
  return true;
}

void RingConsumer::store_done(bool ok, bool wake) noexcept {
  if (!ok) header_->store_failures.fetch_add(1, std::memory_order_relaxed);
  // seq_cst: pairs with a waiting producer's producers_waiting increment and re-check.
  entries_[head_ & mask_].sequence.store(head_ + mask_ + 1, std::memory_order_seq_cst);
  ++head_;
  if (wake) producers_wake();
}

void RingConsumer::producers_wake() noexcept {
  if (header_->producers_waiting.load(std::memory_order_seq_cst) != 0) {
    header_->slot_freed.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(header_->slot_freed);
  }
}

void RingConsumer::stores_failed(std::uint64_t count) noexcept {
  header_->store_failures.fetch_add(count, std::memory_order_relaxed);
}

void RingConsumer::load_answer(bool ok, std::uint64_t value) noexcept {
  RingEntry& entry = entries_[head_ & mask_];
  entry.value = ok ? value : ~std::uint64_t{0};
  const auto answer = ok ? RingAnswer::value : RingAnswer::failed;
  entry.answer.store(static_cast<std::uint32_t>(answer), std::memory_order_release);
  futex_wake_all(entry.answer);
  ++head_;  // the producer frees the slot once it has read the answer
}

void RingConsumer::close() noexcept {
  if (header_ == nullptr) return;
  header_->closed.store(1, std::memory_order_seq_cst);
  futex_wake_all(header_->slot_freed);
  for (std::uint32_t i = 0; i <= mask_; ++i) futex_wake_all(entries_[i].answer);
}

}  // namespace rpcie::mmio
