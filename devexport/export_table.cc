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
  auto slot = std::make_shared<ExportSlot>();
  slot->config = std::move(config);
  slot->backend = std::move(backend);
  std::lock_guard g(lock_);
  slots_.push_back(std::move(slot));
}

std::vector<ExportTable::Held> ExportTable::held() const {
  std::lock_guard g(lock_);
  std::vector<Held> out;
  for (const auto& s : slots_) out.push_back({s, s->holders.size()});
  return out;
}

ExportTable::Counts ExportTable::counts() const {
  std::lock_guard g(lock_);
  Counts c;
  c.exports = slots_.size();
  for (const auto& s : slots_) c.attached += s->holders.empty() ? 0 : 1;
  return c;
}

std::shared_ptr<ExportSlot> ExportTable::find(std::string_view name) const {
  std::lock_guard g(lock_);
  for (const auto& s : slots_)
    if (s->config.spec.name == name) return s;  // one slot a name: reload() replaces, never adds a second
  return nullptr;
}

std::vector<ExportTable::Configured> ExportTable::configured() const {
  std::lock_guard g(lock_);
  std::vector<Configured> out;
  for (const auto& s : slots_) out.push_back({s->config, s->retiring});
  return out;
}

void ExportTable::erase_locked(const ExportSlot& slot, std::vector<std::shared_ptr<ExportSlot>>& gone) {
  auto it = std::find_if(slots_.begin(), slots_.end(), [&](const auto& s) { return s.get() == &slot; });
  if (it == slots_.end()) return;
  gone.push_back(std::move(*it));
  slots_.erase(it);
}

ExportTable::ReloadOutcome ExportTable::reload(std::vector<Wanted> wanted) {
  ReloadOutcome out;
  std::vector<std::shared_ptr<ExportSlot>> gone;  // destroyed (backends closed) after the lock
  std::unique_lock g(lock_);
  auto by_name = [&](const std::string& name) -> std::shared_ptr<ExportSlot> {
    for (const auto& s : slots_)
      if (s->config.spec.name == name) return s;
    return nullptr;
  };
  for (const auto& s : std::vector(slots_)) {  // those no longer configured
    const bool kept = std::any_of(wanted.begin(), wanted.end(),
                                  [&](const Wanted& w) { return w.config.spec.name == s->config.spec.name; });
    if (kept) continue;
    if (s->holders.empty() && !s->resetting) {
      out.removed.push_back(s->config.spec.name);
      erase_locked(*s, gone);
    } else if (!s->retiring) {
      s->retiring = true;
      out.retiring.push_back(s->config.spec.name);
    }
  }
  for (auto& w : wanted) {
    auto old = by_name(w.config.spec.name);
    if (old && export_config_same(old->config, w.config)) {
      old->retiring = false;  // configured again while it waited for its last holder
      continue;
    }
    const bool busy = old && (!old->holders.empty() || old->resetting);
    if (busy || !w.backend) {
      out.refused.push_back(w.config.spec.name);
      continue;
    }
    (old ? out.replaced : out.added).push_back(w.config.spec.name);
    if (old) erase_locked(*old, gone);
    auto slot = std::make_shared<ExportSlot>();
    slot->config = std::move(w.config);
    slot->backend = std::move(w.backend);
    slots_.push_back(std::move(slot));
  }
  g.unlock();
  return out;
}

Result<bool> ExportTable::claim(ExportSlot& slot, const std::string& client, Deadline deadline) {
  const auto& allow = slot.config.allow;
  if (!allow.empty() && std::find(allow.begin(), allow.end(), client) == allow.end())
    return fail(EACCES, "client '" + client + "' is not allowed to attach '" + slot.config.spec.name + "'");
  std::unique_lock g(lock_);
  if (!reset_.wait_until(g, deadline.when(), [&] { return !slot.resetting; }))
    return fail(EBUSY, "busy: the device is still being reset after its last detach");
  if (slot.retiring) return fail(ENOENT, "export '" + slot.config.spec.name + "' was removed from the configuration");
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
  std::vector<std::shared_ptr<ExportSlot>> gone;  // the caller holds a reference: never the last
  {
    std::lock_guard g(lock_);
    slot.resetting = false;
    if (slot.retiring && slot.holders.empty()) erase_locked(slot, gone);
  }
  reset_.notify_all();
}

proto::ExportEntry ExportTable::entry(ExportSlot& slot, std::string& holder_storage) {
  std::lock_guard g(lock_);
  holder_storage = holders_text(slot.holders);
  return entry_make(slot, holder_storage);
}

proto::ListReply ExportTable::list(ListStorage& storage) {
  std::lock_guard g(lock_);
  proto::ListReply l;
  storage.holders.clear();
  storage.slots.clear();
  storage.holders.reserve(slots_.size());  // entries point into these strings: no reallocation
  for (auto& slot : slots_) {
    if (l.exports.size() == proto::kMaxExports) break;
    storage.slots.push_back(slot);
    storage.holders.push_back(holders_text(slot->holders));
    l.exports.push_back(entry_make(*slot, storage.holders.back()));
  }
  return l;
}

}  // namespace rpcie::dev
