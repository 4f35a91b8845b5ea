// See export_table.hpp for the contract.
#include "export_table.hpp"

#include <algorithm>

#include "rpcie/pci.hpp"

namespace rpcie::dev {

namespace {

pci::BarKind bar_kind(RegionKind k) {
  switch (k) {
    case RegionKind::registers:
      return pci::BarKind::registers;
    case RegionKind::memory:
      return pci::BarKind::memory;
    case RegionKind::io:
      return pci::BarKind::io;
  }
  return pci::BarKind::registers;
}

std::uint8_t data_path_flags(DataPathChoice policy) {
  switch (policy) {
    case DataPathChoice::sealed:
      return proto::kExportSealedOnly;
    case DataPathChoice::open:
      return proto::kExportOpenOnly;
    case DataPathChoice::automatic:
      break;
  }
  return 0;
}

std::string holders_text(const std::vector<std::string>& holders) {
  std::string out;
  for (const auto& h : holders) out += (out.empty() ? "" : ",") + h;
  return out;
}

// The entry of `slot`, its holders given as text. Views point into `slot` and `holder`.
proto::ExportEntry entry_make(ExportSlot& slot, const std::string& holder) {
  proto::ExportEntry e;
  const auto& id = slot.backend->identity();
  e.name = slot.config.spec.name;
  e.backend = slot.backend->name();
  e.holder = std::string_view(holder).substr(0, proto::kMaxNameText);
  e.vendor = id.vendor;
  e.device = id.device;
  e.class_code = id.class_code & 0xffffff;
  e.subsystem_vendor = id.subsystem_vendor;
  e.subsystem_device = id.subsystem_device;
  e.revision = id.revision;
  e.state = slot.holders.empty() ? proto::ExportState::free : proto::ExportState::attached;
  e.flags = static_cast<std::uint8_t>((slot.config.shared ? proto::kExportShared : 0) |
                                      (slot.config.dma == DmaMode::mirror ? proto::kExportMirror : 0) |
                                      data_path_flags(slot.config.data_path.value_or(DataPathChoice::automatic)));
  e.vectors = std::min<std::uint16_t>(slot.backend->vector_count(), proto::kMaxVector);
  for (const auto& r : slot.backend->regions()) {
    if (e.bars.size() == pci::kBarCount) break;
    std::uint8_t flags =
        static_cast<std::uint8_t>((r.is_64bit ? proto::kBarFlag64 : 0) | (r.readonly ? proto::kBarFlagReadonly : 0) |
                                  (bar_direct(*slot.backend, r) ? proto::kBarFlagDirect : 0));
    e.bars.push_back({r.bar, bar_kind(r.kind), flags, r.size});
  }
  return e;
}

}  // namespace

void ExportTable::add(ExportConfig config, std::unique_ptr<Backend> backend) {
  auto slot = std::make_unique<ExportSlot>();
  slot->config = std::move(config);
  slot->backend = std::move(backend);
  slots_.push_back(std::move(slot));
}

std::size_t ExportTable::holder_count(const ExportSlot& slot) {
  std::lock_guard g(lock_);
  return slot.holders.size();
}

ExportSlot* ExportTable::find(std::string_view name) const noexcept {
  for (const auto& s : slots_)
    if (s->config.spec.name == name) return s.get();
  return nullptr;
}

Result<bool> ExportTable::claim(ExportSlot& slot, const std::string& client, Deadline deadline) {
  const auto& allow = slot.config.allow;
  if (!allow.empty() && std::find(allow.begin(), allow.end(), client) == allow.end())
    return fail(EACCES, "client '" + client + "' is not allowed to attach '" + slot.config.spec.name + "'");
  std::unique_lock g(lock_);
  if (!reset_.wait_until(g, deadline.when(), [&] { return !slot.resetting; }))
    return fail(EBUSY, "busy: the device is still being reset after its last detach");
  if (!slot.holders.empty() && !slot.config.shared)
    return fail(EBUSY, "busy: attached by " + holders_text(slot.holders));
  slot.holders.push_back(client);
  return slot.holders.size() == 1;
}

bool ExportTable::release(ExportSlot& slot, const std::string& client) {
  std::lock_guard g(lock_);
  auto it = std::find(slot.holders.begin(), slot.holders.end(), client);
  if (it != slot.holders.end()) slot.holders.erase(it);
  slot.resetting = slot.holders.empty();
  return slot.resetting;
}

void ExportTable::reset_done(ExportSlot& slot) {
  {
    std::lock_guard g(lock_);
    slot.resetting = false;
  }
  reset_.notify_all();
}

proto::ExportEntry ExportTable::entry(ExportSlot& slot, std::string& holder_storage) {
  std::lock_guard g(lock_);
  holder_storage = holders_text(slot.holders);
  return entry_make(slot, holder_storage);
}

proto::ListReply ExportTable::list(std::vector<std::string>& holder_storage) {
  std::lock_guard g(lock_);
  proto::ListReply l;
  holder_storage.clear();
  holder_storage.reserve(slots_.size());  // entries point into these strings: no reallocation
  for (auto& slot : slots_) {
    if (l.exports.size() == proto::kMaxExports) break;
    holder_storage.push_back(holders_text(slot->holders));
    l.exports.push_back(entry_make(*slot, holder_storage.back()));
  }
  return l;
}

}  // namespace rpcie::dev
