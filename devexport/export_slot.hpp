// One configured export as the exporter holds it: shared by the control side (who holds it,
// listing) and the data path (the backend the attachments drive).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.hpp"
#include "config.hpp"
#include "export_counters.hpp"

namespace rpcie::dev {

struct ExportSlot {
  ExportConfig config;
  std::unique_ptr<Backend> backend;
  std::vector<std::string> holders;  // client names; guarded by the ExportTable's lock
  bool resetting = false;            // the last holder left and its teardown is under way; likewise
  bool retiring = false;             // no longer configured: leaves the table when free; likewise
  // Serialises backend calls, which several attachments make at once on a shared export.
  // Taken before a ServedAttachment's DMA lock, never after it.
  std::mutex calls;
  bool device_attached = false;  // guarded by calls
  ExportCounters counters;       // lock-free
};

// True when BAR `r` is offered to the client as a memory region it reaches with one-sided
// RMA (plain, writable memory the backend exposes whole) rather than through the bounce
// buffer.
inline bool bar_direct(Backend& b, const Region& r) {
  return r.kind == RegionKind::memory && !r.readonly && b.bar_memory(r.bar).size() == r.size;
}

}  // namespace rpcie::dev
