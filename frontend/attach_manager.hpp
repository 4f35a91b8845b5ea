// The control socket's requests (rpcie/control.hpp) acted on: attach a remote device and
// publish it in the tree, withdraw devices, report their status. The answers' fields are in
// docs/rpcie-hostd.md. Every request carries the requester's credentials (SO_PEERCRED):
// attachments are owned by the uid that made them (attach_owners.hpp); a non-root user
// detaches and sees the details of only their own, root all.
// The attachments held are kept in the state file (state_file.hpp), rewritten on every attach
// and detach, and restore_start() re-attaches what an earlier hostd left listed there, then
// attaches the configuration file's [[attach]] entries (hostd_config.hpp) that are not among
// them. `rpcie attach --persist` / `detach --persist` also add or remove the entry in the
// configuration file (config_edit.hpp).
// Thread-safety: request() is called concurrently by the control server; the tree serializes
// what must be, detaches are serialized here (an ownership check and its withdraw are one
// step: the name cannot change hands between them). The restorer is one thread of its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "attach_owners.hpp"
#include "attach_request.hpp"
#include "control_server.hpp"
#include "hostd_config.hpp"
#include "mmio_ring_server.hpp"
#include "remote_device.hpp"
#include "rpcie/result.hpp"
#include "state_file.hpp"
#include "tree.hpp"

namespace rpcie::hostd {

// Whether a process with `peer`'s credentials may read and write a device's files, which are
// root:`group` with `mode`: root, or the mode's "other" read-write bits, or its group bits and
// `group` among the peer's groups (read from /proc/<pid>/status).
bool peer_may_use(const ucred& peer, gid_t group, mode_t mode);

class AttachManager {
 public:
  // `tree` must outlive the manager. `state_path`: the state file; empty: none.
  AttachManager(const AttachContext& context, AttachPolicy policy, Tree& tree, std::string state_path = {});

  ~AttachManager();  // restore_stop(), stops the MMIO rings

  // Reads the state file and re-attaches, in the background, every attachment it lists, under
  // its old name rpcieN and for its old owner: each name is reserved at once, so that no new
  // attach takes it. An attach that fails for a while (the exporter not reachable yet, or
  // still holding the device for the old hostd's lease: EBUSY) is retried with back-off
  // (kRestoreBackoffFirst doubling to kRestoreBackoffMax) until it succeeds or hostd stops;
  // one the exporter refuses for good (EACCES, ENOENT, EPERM, EINVAL) is dropped from the file
  // and logged. `rpcie detach` of a name still being restored cancels it. A malformed file is
  // not fatal: it is logged, kept as FILE.bad and restores nothing (hostd serves new attaches
  // and writes a fresh file).
  // Then attaches `configured` (the configuration's [[attach]] entries) as configured_apply.
  // Call once, after the tree is mounted and the control socket is up; returns at once.
  void restore_start(const std::vector<ConfiguredAttach>& configured = {});
  // Where the configuration comes from: what config_reload() reads and `--persist` edits
  // (the first file of `source`; a persisted entry is removed from the file that has it).
  // Set before restore_start; unset, --persist is refused (EINVAL).
  void config_source_set(ConfigSource source);
  // Reads the configuration again and attaches, as configured_apply, its [[attach]]
  // entries that are neither attached nor pending; other keys are ignored (they take effect
  // at the next start). For SIGHUP. The number of entries taken on; an error (a bad file or
  // entry, with its FILE:LINE) changes nothing.
  Result<std::size_t> config_reload();
  // Stops the restorer (joins it; an attempt in progress runs to its deadline). Call before
  // the tree is unmounted. Idempotent. The state file keeps what it lists: a stop is not a
  // detach.
  void restore_stop();

  static constexpr auto kRestoreBackoffFirst = std::chrono::milliseconds(100);
  static constexpr auto kRestoreBackoffMax = std::chrono::seconds(2);
  // Configured entries (configured_apply): each gets a name rpcieN at once (its `device`, or
  // the lowest free one), shows in status as "restoring" and is attached in the background,
  // retried after every failure — whatever the error: the operator asked for it — with a
  // back-off from kConfiguredBackoffFirst doubling to kConfiguredBackoffMax, each wait
  // varied by +-25% (hosts restarted together do not retry in step). One that is already
  // attached or pending (same host as spelt, port and export: restored from the state file)
  // is not attached twice; a pending one of those is retried the configured way.
  static constexpr auto kConfiguredBackoffFirst = std::chrono::milliseconds(1000);
  static constexpr auto kConfiguredBackoffMax = std::chrono::milliseconds(60000);
  // What a {"op":"status","device_telemetry":true} may spend asking exporters, all devices
  // together: one that has not answered by then shows {"error": ...} instead.
  static constexpr auto kTelemetryBudget = std::chrono::seconds(2);

  // One request ({"op": ...}, already checked to be an object with a string "op") from a
  // process with credentials `peer`; an unknown op or a failure is answered {"error",
  // "errno"} (EPERM: another user's attachment). Also serves {"op":"mmio_ring","bdf":B}
  // (the memfd of a new ring for the device's register BARs passed with the answer
  // {"ring_bytes":N,"timeout_ms":T}, the connection kept by the ring's server), and
  // {"op":"status","device_telemetry":true|false} (EINVAL for another type).
  ControlServer::Reply request(const nlohmann::json& request, const ucred& peer);

  // The Prometheus text of every attached device, every owner's (the --metrics address is
  // the operator's to expose), device_metrics.hpp. Thread-safe.
  std::string metrics() const;

 private:
  ControlServer::Reply mmio_ring(const nlohmann::json& request, const ucred& peer);
  nlohmann::json attach(const nlohmann::json& request, uid_t peer);
  nlohmann::json detach(const nlohmann::json& request, uid_t peer);
  // `telemetry`: each connected device's DeviceTelemetry asked of its exporter as well
  // ("device_telemetry"), all of them within kTelemetryBudget.
  nlohmann::json status(uid_t peer, bool telemetry) const;

  // An attachment the state file lists that is not attached yet (attach_restore.cc).
  struct Pending {
    StateEntry entry;
    std::uint64_t serial = 0;  // its claim in owners_
    std::chrono::steady_clock::time_point next_try;
    std::chrono::milliseconds backoff = kRestoreBackoffFirst;
    bool trying = false;      // the restorer is attaching it now, without the lock
    bool cancelled = false;   // detached while pending: the restorer lets it go
    bool configured = false;  // a configured entry: retried whatever the error
    std::string last_error;
  };
  void restore_run();
  void state_restore();  // the state file's part of restore_start
  // Takes on each entry of `configured` not attached or pending (attach_configured.cc).
  void configured_apply_locked(const std::vector<ConfiguredAttach>& configured);
  // Starts the restorer if something is pending and it is not running (or stopped for good).
  void restorer_ensure_locked();
  // The next wait of a failed pending entry, and its back-off doubled.
  std::chrono::milliseconds retry_delay_next(Pending& p);
  // --persist (attach_persist.cc): checks before an attach that its entry can be written;
  // writes it after (undoing the attach when that fails); removes a device's entry.
  Result<void> persist_check(const AttachParams& p);
  nlohmann::json persist_add(nlohmann::json answer, const nlohmann::json& request, const AttachParams& p,
                             unsigned index, uid_t peer);
  Result<void> persist_remove(const std::string& name, uid_t peer);
  // Ends a cancelled or refused pending entry: its claim and name are released.
  void pending_drop_locked(std::map<unsigned, Pending>::iterator it);
  // Cancels the pending entry named `name` if `peer` may (detach); ENOENT when none is.
  Result<bool> pending_cancel(const std::string& name, uid_t peer);
  std::vector<std::string> pending_cancel_all(uid_t peer);  // those of `peer` (root: all); their names
  // Rewrites the state file from held_ and the live pending_ entries (errors are logged).
  void state_save_locked();

  const AttachContext context_;
  const AttachPolicy policy_;
  Tree& tree_;
  AttachOwners owners_;
  const std::string state_path_;
  mutable std::mutex state_lock_;
  std::map<unsigned, StateEntry> held_;  // attached (and published), by index
  std::map<unsigned, Pending> pending_;  // listed in the state file, being restored
  std::condition_variable restore_wake_;
  bool restore_stopping_ = false;
  bool restore_running_ = false;  // the restorer thread has not ended
  ConfigSource config_source_;
  bool config_source_known_ = false;
  std::mutex persist_lock_;  // one --persist change of the configuration at a time
  std::thread restorer_;
  std::mutex detach_lock_;
  std::mutex rings_lock_;
  std::vector<std::unique_ptr<MmioRingServer>> rings_;  // ended ones are reaped at the next request
};

}  // namespace rpcie::hostd
