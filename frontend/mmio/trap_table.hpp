// The mappings librpcie-mmio.so knows of: trapped register-BAR ranges (PROT_NONE
// reservations the SIGSEGV handler emulates) and memory-BAR mappings of rpcie devices
// (page-cache mappings, never trapped, written back before a register store to the same
// device: PCIe rule 3 across BARs, docs/protocol.md).
//
// Readers (the signal handler, on any thread) are lock-free and async-signal-safe: each
// slot holds a pointer to an immutable entry, published with a sequentially consistent
// store. A writer that changes a range publishes a new entry and retires the old one; a
// retired entry (and a port no live entry refers to) is reused or released only once every
// `Reader` section that began before the retirement has ended (a grace period: two reader
// counters and an epoch, so sections that begin later never delay it), so a reader never
// sees an entry half-written or a port closed under it. Readers that call find() outside a
// Reader section must be the writer itself.
//
// Waiting for a grace period is bounded (reclaim_wait): under constant faulting on other
// threads it ends as soon as the sections already running end; if one of them does not end
// before the deadline (a handler stuck on an access to a lost link), the retired entries
// and their ports are kept — never reused, never closed — until a later reclaim finds
// those sections over, and the caller keeps the range's addresses reserved (see munmap in
// mmap_hooks.cc and docs/rpcie-run.md).
//
// Writers (mmap, munmap, mprotect) are NOT thread-safe against each other: the caller
// serializes them (librpcie-mmio.so holds one mutex) and never writes from a signal
// handler. Capacity is fixed (kCapacity ranges): no allocation anywhere.
#pragma once

#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "bar_probe.hpp"
#include "emulator/bar_port.hpp"

namespace rpcie::mmio {

enum class EntryKind : std::uint8_t { trapped, memory };

struct TrapEntry {
  TrapRange range;  // memory entries: base, length and bar_offset; port null
  EntryKind kind = EntryKind::trapped;
  int prot = PROT_NONE;   // the protection the program asked for (the pages stay PROT_NONE)
  bool writable = false;  // the file was opened for writing: PROT_WRITE may be asked for
  DeviceKey device;
};

class TrapTable final : public TrapLookup {
 public:
  static constexpr std::size_t kCapacity = 256;
  // How long munmap (and an mmap short of slots or ports) waits for a grace period: far
  // longer than an emulation (microseconds, a round trip for a load), far shorter than a
  // stuck one (an access to a lost link waits for the access timeout, seconds).
  static constexpr int kReclaimTimeoutMs = 100;
  // Called (by a writer) once a port is referred to by no entry and no reader can still
  // be using it.
  using PortRelease = void (*)(BarPort* port) noexcept;

  explicit constexpr TrapTable(PortRelease release = nullptr) noexcept : release_(release) {}
  TrapTable(const TrapTable&) = delete;
  TrapTable& operator=(const TrapTable&) = delete;

  // --- readers: lock-free, async-signal-safe ---------------------------------------------
  // Marks a reader section (the signal handler around one emulation): entries and ports
  // seen inside stay valid until it ends. Nestable (a signal inside a handler).
  class Reader {
   public:
    explicit Reader(const TrapTable& table) noexcept : table_(&table), parity_(table.reader_enter()) {}
    ~Reader() { leave(); }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    // Ends the section early (before handing the signal to the program's handler, which
    // may never return).
    void leave() noexcept {
      if (table_ != nullptr) table_->active_[parity_].fetch_sub(1);
      table_ = nullptr;
    }

   private:
    const TrapTable* table_;
    unsigned parity_;
  };

  // The trapped range holding `address`, or null (TrapLookup).
  const TrapRange* find(std::uintptr_t address) const noexcept override;
  // The entry of either kind holding `address`, or null.
  const TrapEntry* entry_find(std::uintptr_t address) const noexcept;
  // Whether any entry overlaps [base, base + length): the cheap test of munmap/mprotect.
  bool overlaps(std::uintptr_t base, std::size_t length) const noexcept;
  // Calls f(base, length) for every memory entry of `device`.
  template <class F>
  void memory_each(const DeviceKey& device, F&& f) const noexcept {
    const std::size_t used = used_.load();
    for (std::size_t i = 0; i < used; ++i) {
      const TrapEntry* e = slots_[i].load();
      if (e != nullptr && e->kind == EntryKind::memory && e->device == device) f(e->range.base, e->range.length);
    }
  }

  // --- writers: serialized by the caller, never in a signal handler ------------------------
  // Adds an entry (its range must not overlap another's: the kernel gave it fresh). 0, or
  // ENOMEM when the table is full.
  int insert(const TrapEntry& entry) noexcept;
  // Forgets [base, base + length) in every entry (munmap, MAP_FIXED over it): entries inside
  // disappear, entries across an end shrink, an entry around it splits in two. 0, or ENOMEM
  // (nothing changed) when a split needs a slot the table does not have.
  int remove(std::uintptr_t base, std::size_t length) noexcept;
  // Records protection `prot` for the trapped parts of [base, base + length), splitting
  // entries as remove() does. 0 or ENOMEM (nothing changed).
  int protect(std::uintptr_t base, std::size_t length, int prot) noexcept;
  // Up to `max` entries overlapping [base, base + length), ascending by base; their count.
  std::size_t overlapping(std::uintptr_t base, std::size_t length, TrapEntry* out, std::size_t max) const noexcept;
  // Live entries.
  std::size_t size() const noexcept;
  // Reuses retired entries and releases orphaned ports whose grace period is over; never
  // waits.
  void reclaim() noexcept;
  // Reclaims everything retired so far, waiting (sleeping in short steps) for the reader
  // sections that began before it to end, until `timeout_ms` has passed. true: nothing
  // retired is left; false: the deadline passed first and the rest stays retired (a later
  // reclaim() or reclaim_wait() finishes it).
  bool reclaim_wait(int timeout_ms) noexcept;
  // Whether entries or ports retired so far are still waiting for their grace period.
  bool retired_pending() const noexcept;
  // In a child after fork: only the forking thread exists, so no reader is inside.
  void fork_child() noexcept;

 private:
  enum class RecordState : std::uint8_t { free, live, retired };
  static constexpr std::size_t kRecords = 2 * kCapacity;
  struct Orphan {
    BarPort* port;
    std::uint64_t epoch;  // the epoch it was orphaned in
  };

  unsigned reader_enter() const noexcept;
  void grace_advance() noexcept;

  int carve(std::uintptr_t base, std::size_t length, bool keep, int prot) noexcept;
  TrapEntry* record_take() noexcept;
  void record_retire(const TrapEntry* entry) noexcept;
  int slot_free() const noexcept;
  std::size_t records_free() const noexcept;
  void slot_publish(std::size_t slot, TrapEntry* entry) noexcept;

  std::array<std::atomic<const TrapEntry*>, kCapacity> slots_{};
  std::atomic<std::size_t> used_{0};  // slots [0, used_) may be non-null
  // A reader enters under epoch_ and counts itself in active_[epoch & 1]; a writer flips
  // epoch_ and waits for the old parity's count to reach zero.
  std::atomic<std::uint64_t> epoch_{0};
  mutable std::array<std::atomic<unsigned>, 2> active_{};
  // Writer-only state (no reader touches it).
  std::uint64_t drained_ = 0;  // every section begun under an epoch below it has ended
  std::array<TrapEntry, kRecords> records_{};
  std::array<RecordState, kRecords> states_{};
  std::array<std::uint64_t, kRecords> retired_at_{};  // the epoch a retired record was retired in
  std::array<Orphan, kRecords> orphans_{};            // ports whose last entry retired
  std::size_t orphan_count_ = 0;
  PortRelease release_;
};

}  // namespace rpcie::mmio
