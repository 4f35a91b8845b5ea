// The exporter's exports and who holds them: lookup by name, claim and release (the rules
// of `shared` and `allow`), and the entries of list and attach replies.
//
// Contract:
//  - Exports are added before serving starts (add() is not thread-safe with the rest) and
//    never move or go away afterwards: an ExportSlot* stays valid for the table's life.
//  - find(), claim(), release(), reset_done(), entry() and list() may be called from any
//    thread at once: holders are guarded by one lock inside the table.
//  - A holder is a client name; one client may hold a shared export more than once (one
//    claim per attachment, released one at a time).
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
  std::size_t size() const noexcept { return slots_.size(); }

  // The export at `i` (< size()), in the order added.
  ExportSlot& at(std::size_t i) const noexcept { return *slots_[i]; }
  // How many claims `slot` has now (its attachments).
  std::size_t holder_count(const ExportSlot& slot);

  // The export of that name, or null.
  ExportSlot* find(std::string_view name) const noexcept;

  // Claims `slot` for `client`. EACCES when the export's allow list does not name the
  // client; EBUSY ("busy: attached by NAMES") when a non-shared export is held already.
  // While the last holder's attachment is still being torn down (release() returned true,
  // reset_done() not yet called) the claim waits for it until `deadline` (then EBUSY): a
  // client that re-attaches right after losing its link finds the device reset, never
  // half-detached. Returns whether the client is now the only holder (it attaches the device).
  Result<bool> claim(ExportSlot& slot, const std::string& client, Deadline deadline);
  // Releases one claim of `client`; true when no holder is left: the caller then detaches
  // (resets) the device and calls reset_done(), which claims wait for.
  bool release(ExportSlot& slot, const std::string& client);
  void reset_done(ExportSlot& slot);

  // The entry describing `slot` now; its flags carry the data-path policy
  // (kExportSealedOnly / kExportOpenOnly, neither for automatic). Its views point into `slot` and into
  // `holder_storage`, which receives the holder names ("a,b").
  proto::ExportEntry entry(ExportSlot& slot, std::string& holder_storage);
  // Every export, at most proto::kMaxExports. The entries point into the table and into
  // `holder_storage` (one string per entry; cleared first).
  proto::ListReply list(std::vector<std::string>& holder_storage);

 private:
  std::vector<std::unique_ptr<ExportSlot>> slots_;
  std::mutex lock_;  // the holders and the resetting flag of every slot
  std::condition_variable reset_;
};

}  // namespace rpcie::dev
