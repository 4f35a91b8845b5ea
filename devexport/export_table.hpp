// The exporter's exports and who holds them: lookup by name, claim and release (the rules
// of `shared` and `allow`), and the entries of list and attach replies.
//
// Contract:
//  - Every member may be called from any thread at once: the slots and their holders are
//    guarded by one lock inside the table.
//  - A slot is shared: find() hands out a reference that keeps it (and its backend) alive
//    while an attach uses it, even after a reload took it out of the table.
//  - A slot's config never changes: a changed export is a new slot (reload()).
//  - A holder is a client name; one client may hold a shared export more than once (one
//    claim per attachment, released one at a time).
//  - Reload (reload()): an export no longer configured is retired:
//    it takes no new claim (ENOENT) and leaves the table at once when free, or when the
//    reset after its last holder's detach is done; until then it is still listed and its
//    attachments go on. Configured again while retiring, with the same settings, it is
//    simply kept.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "export_slot.hpp"
#include "rpcie/deadline.hpp"
#include "rpcie/protocol.hpp"
#include "rpcie/result.hpp"

namespace rpcie::dev {

class ExportTable {
 public:
  ExportTable() = default;
  ExportTable(const ExportTable&) = delete;
  ExportTable& operator=(const ExportTable&) = delete;

  // `config.data_path` is the export's policy as it is to be listed (the caller resolves
  // it against the exporter's: export_data_path_policy); unset lists as automatic.
  void add(ExportConfig config, std::unique_ptr<Backend> backend);

  struct Counts {
    std::size_t exports = 0;   // in the table, retiring ones included
    std::size_t attached = 0;  // with at least one holder
  };
  Counts counts() const;

  // The export of that name (retiring or not: claim() refuses a retiring one), or null.
  std::shared_ptr<ExportSlot> find(std::string_view name) const;

  // The configuration of every export in the table, with whether it is retiring.
  struct Configured {
    ExportConfig config;
    bool retiring = false;
  };
  std::vector<Configured> configured() const;

  // Makes the table what `wanted` says (each with its backend, null for an export the table
  // has already with the same settings: export_config_same), by the rules of the contract.
  // An export whose settings changed is replaced when free; a held one keeps its old
  // settings, and its name goes to `ReloadOutcome::refused`.
  struct Wanted {
    ExportConfig config;
    std::unique_ptr<Backend> backend;
  };
  struct ReloadOutcome {
    std::vector<std::string> added, replaced, removed, retiring, refused;
  };
  ReloadOutcome reload(std::vector<Wanted> wanted);

  // Every export in the table (retiring ones included), with its number of claims now.
  struct Held {
    std::shared_ptr<ExportSlot> slot;
    std::size_t holders = 0;
  };
  std::vector<Held> held() const;

  // Claims `slot` for `client`. EACCES when the export's allow list does not name the
  // client; EBUSY ("busy: attached by NAMES") when a non-shared export is held already.
  // While the last holder's attachment is still being torn down (release() returned true,
  // reset_done() not yet called) the claim waits for it until `deadline` (then EBUSY): a
  // client that re-attaches right after losing its link finds the device reset, never
  // half-detached. Returns whether the client is now the only holder (it attaches the device).
  // A retiring export is ENOENT.
  Result<bool> claim(ExportSlot& slot, const std::string& client, Deadline deadline);
  // Releases one claim of `client`; true when no holder is left: the caller then detaches
  // (resets) the device and calls reset_done(), which claims wait for.
  bool release(ExportSlot& slot, const std::string& client);
  // Ends the reset; a retiring slot leaves the table here.
  void reset_done(ExportSlot& slot);

  // The entry describing `slot` now; its flags carry the data-path policy
  // (kExportSealedOnly / kExportOpenOnly, neither for automatic). Its views point into `slot` and into
  // `holder_storage`, which receives the holder names ("a,b").
  proto::ExportEntry entry(ExportSlot& slot, std::string& holder_storage);
  // Every export, at most proto::kMaxExports. The entries point into `storage`, which keeps
  // the slots listed alive and holds their holder names (cleared first).
  struct ListStorage {
    std::vector<std::shared_ptr<ExportSlot>> slots;
    std::vector<std::string> holders;
  };
  proto::ListReply list(ListStorage& storage);

 private:
  // Takes `slot` out of the table; it goes away with the last reference. Lock held.
  void erase_locked(const ExportSlot& slot, std::vector<std::shared_ptr<ExportSlot>>& gone);
  std::vector<std::shared_ptr<ExportSlot>> slots_;
  mutable std::mutex lock_;  // the slots, and the holders and flags of each
  std::condition_variable reset_;
};

}  // namespace rpcie::dev
