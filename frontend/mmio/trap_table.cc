#include "trap_table.hpp"

#include <time.h>

#include <cerrno>
#include <chrono>

#include "rpcie/deadline.hpp"

namespace rpcie::mmio {

namespace {

bool entry_holds(const TrapEntry& e, std::uintptr_t address) noexcept {
  return address >= e.range.base && address - e.range.base < e.range.length;
}

bool entry_overlaps(const TrapEntry& e, std::uintptr_t base, std::size_t length) noexcept {
  return e.range.base < base + length && base < e.range.base + e.range.length;
}

// The piece [from, to) of `e` (inside it) as an entry of its own.
TrapEntry entry_piece(const TrapEntry& e, std::uintptr_t from, std::uintptr_t to) noexcept {
  TrapEntry piece = e;
  piece.range.base = from;
  piece.range.length = to - from;
  piece.range.bar_offset = e.range.bar_offset + (from - e.range.base);
  return piece;
}

}  // namespace

const TrapEntry* TrapTable::entry_find(std::uintptr_t address) const noexcept {
  const std::size_t used = used_.load();
  for (std::size_t i = 0; i < used; ++i) {
    const TrapEntry* e = slots_[i].load();
    if (e != nullptr && entry_holds(*e, address)) return e;
  }
  return nullptr;
}

const TrapRange* TrapTable::find(std::uintptr_t address) const noexcept {
  const TrapEntry* e = entry_find(address);
  return e != nullptr && e->kind == EntryKind::trapped ? &e->range : nullptr;
}

bool TrapTable::overlaps(std::uintptr_t base, std::size_t length) const noexcept {
  const std::size_t used = used_.load();
  for (std::size_t i = 0; i < used; ++i) {
    const TrapEntry* e = slots_[i].load();
    if (e != nullptr && entry_overlaps(*e, base, length)) return true;
  }
  return false;
}

std::size_t TrapTable::size() const noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < used_.load(); ++i) n += slots_[i].load() != nullptr ? 1 : 0;
  return n;
}

std::size_t TrapTable::overlapping(std::uintptr_t base, std::size_t length, TrapEntry* out,
                                   std::size_t max) const noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < used_.load() && n < max; ++i) {
    const TrapEntry* e = slots_[i].load();
    if (e == nullptr || !entry_overlaps(*e, base, length)) continue;
    std::size_t at = n++;  // insertion sort: a handful of entries
    while (at > 0 && out[at - 1].range.base > e->range.base) {
      out[at] = out[at - 1];
      --at;
    }
    out[at] = *e;
  }
  return n;
}

int TrapTable::slot_free() const noexcept {
  for (std::size_t i = 0; i < kCapacity; ++i)
    if (slots_[i].load() == nullptr) return static_cast<int>(i);
  return -1;
}

std::size_t TrapTable::records_free() const noexcept {
  std::size_t n = 0;
  for (auto s : states_) n += s == RecordState::free ? 1 : 0;
  return n;
}

TrapEntry* TrapTable::record_take() noexcept {
  for (std::size_t i = 0; i < kRecords; ++i)
    if (states_[i] == RecordState::free) {
      states_[i] = RecordState::live;
      return &records_[i];
    }
  return nullptr;
}

void TrapTable::slot_publish(std::size_t slot, TrapEntry* entry) noexcept {
  if (slot >= used_.load()) used_.store(slot + 1);  // before the entry: readers scan far enough
  slots_[slot].store(entry);
}

void TrapTable::record_retire(const TrapEntry* entry) noexcept {
  const auto index = static_cast<std::size_t>(entry - records_.data());
  states_[index] = RecordState::retired;
  retired_at_[index] = epoch_.load();
  BarPort* port = entry->range.port;
  if (port == nullptr) return;
  for (std::size_t i = 0; i < kCapacity; ++i) {
    const TrapEntry* e = slots_[i].load();
    if (e != nullptr && e->range.port == port) return;  // still in use
  }
  orphans_[orphan_count_++] = Orphan{port, epoch_.load()};
}

int TrapTable::insert(const TrapEntry& entry) noexcept {
  reclaim();
  const int slot = slot_free();
  TrapEntry* record = slot < 0 ? nullptr : record_take();
  if (record == nullptr) return ENOMEM;
  *record = entry;
  slot_publish(static_cast<std::size_t>(slot), record);
  return 0;
}

int TrapTable::remove(std::uintptr_t base, std::size_t length) noexcept { return carve(base, length, false, 0); }

int TrapTable::protect(std::uintptr_t base, std::size_t length, int prot) noexcept {
  return carve(base, length, true, prot);
}

// Splits every entry overlapping [base, end) at base and end; the middle piece is dropped
// (remove) or kept with `prot` (protect; trapped entries only). New pieces are published
// before the old entry is replaced, so a reader always finds some entry with the right
// values for an address that stays mapped.
int TrapTable::carve(std::uintptr_t base, std::size_t length, bool keep, int prot) noexcept {
  reclaim();
  const std::uintptr_t end = base + length;
  std::size_t slots_needed = 0, records_needed = 0, free_slots = 0;
  std::array<std::size_t, kCapacity> targets;  // the slots to carve, fixed before any change
  std::size_t target_count = 0;
  for (std::size_t i = 0; i < kCapacity; ++i) {
    const TrapEntry* e = slots_[i].load();
    if (e == nullptr) {
      ++free_slots;
      continue;
    }
    if (!entry_overlaps(*e, base, length) || (keep && e->kind != EntryKind::trapped)) continue;
    targets[target_count++] = i;
    const std::size_t pieces = (e->range.base < base) + (end < e->range.base + e->range.length) + (keep ? 1 : 0);
    records_needed += pieces;
    slots_needed += pieces > 1 ? pieces - 1 : 0;
  }
  if (slots_needed > free_slots || records_needed > records_free()) return ENOMEM;
  for (std::size_t t = 0; t < target_count; ++t) {
    const std::size_t i = targets[t];
    const TrapEntry* e = slots_[i].load();
    const std::uintptr_t e_end = e->range.base + e->range.length;
    TrapEntry pieces[3];
    std::size_t n = 0;
    if (e->range.base < base) pieces[n++] = entry_piece(*e, e->range.base, base);
    if (keep) {
      pieces[n] = entry_piece(*e, e->range.base < base ? base : e->range.base, end < e_end ? end : e_end);
      pieces[n++].prot = prot;
    }
    if (end < e_end) pieces[n++] = entry_piece(*e, end, e_end);
    for (std::size_t p = 1; p < n; ++p) {
      TrapEntry* record = record_take();
      *record = pieces[p];
      slot_publish(static_cast<std::size_t>(slot_free()), record);
    }
    TrapEntry* first = nullptr;
    if (n > 0) {
      first = record_take();
      *first = pieces[0];
    }
    slots_[i].store(first);
    record_retire(e);
  }
  return 0;
}

unsigned TrapTable::reader_enter() const noexcept {
  // Counted under the epoch seen both before and after counting: a writer that flipped in
  // between may have read the count already, so the reader moves to the new parity.
  for (;;) {
    const std::uint64_t epoch = epoch_.load();
    const auto parity = static_cast<unsigned>(epoch & 1);
    active_[parity].fetch_add(1);
    if (epoch_.load() == epoch) return parity;
    active_[parity].fetch_sub(1);
  }
}

bool TrapTable::retired_pending() const noexcept {
  for (auto s : states_)
    if (s == RecordState::retired) return true;
  return orphan_count_ != 0;
}

// One non-blocking step of the grace period: the old parity's sections have ended (drained_
// catches up with epoch_), then, if something retired since, a flip starts the next period.
void TrapTable::grace_advance() noexcept {
  const std::uint64_t epoch = epoch_.load();
  if (drained_ + 1 == epoch && active_[(epoch - 1) & 1].load() == 0) drained_ = epoch;
  if (drained_ != epoch || !retired_pending()) return;
  bool newer = orphan_count_ != 0 && orphans_[orphan_count_ - 1].epoch >= drained_;
  for (std::size_t i = 0; i < kRecords && !newer; ++i)
    newer = states_[i] == RecordState::retired && retired_at_[i] >= drained_;
  if (!newer) return;
  epoch_.store(epoch + 1);  // sections from now on count under the other parity
  if (active_[epoch & 1].load() == 0) drained_ = epoch + 1;
}

void TrapTable::reclaim() noexcept {
  grace_advance();
  for (std::size_t i = 0; i < kRecords; ++i)
    if (states_[i] == RecordState::retired && retired_at_[i] < drained_) states_[i] = RecordState::free;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < orphan_count_; ++i) {
    if (orphans_[i].epoch >= drained_) {
      orphans_[kept++] = orphans_[i];  // order kept: epochs stay ascending
      continue;
    }
    if (release_ != nullptr) release_(orphans_[i].port);
  }
  orphan_count_ = kept;
}

bool TrapTable::reclaim_wait(int timeout_ms) noexcept {
  const Deadline deadline = Deadline::after(std::chrono::milliseconds(timeout_ms));
  for (unsigned round = 0;; ++round) {
    reclaim();
    if (!retired_pending()) return true;
    if (deadline.expired()) return false;
    // A handler's emulation takes microseconds (one round trip for a load): poll finely.
    const timespec pause{0, round < 16 ? 2'000 : 50'000};
    nanosleep(&pause, nullptr);
  }
}

void TrapTable::fork_child() noexcept {
  active_[0].store(0);
  active_[1].store(0);
  drained_ = epoch_.load();
}

}  // namespace rpcie::mmio
