// LocalDoorbell: wakes a peer on the same host whose completion queue has no wait fd.
//
// libfabric 1.17's shm gives its CQ no wait object, so an idle Channel backs off with sleeps
// of up to ChannelOptions::backoff_max, and work that needs its progress (a message to it,
// or its part of a small RMA write aimed at it) waits for its next wake-up: small RMA writes
// over shm ran at 0.02 of raw. So each such endpoint owns a doorbell, a futex word in a
// small shared-memory file named after its fabric address (/dev/shm/PID:N:M.rpcie-db beside
// shm's own PID:N:M, else /dev/shm/rpcie-db-<hash of the address>); its
// peer opens it by the same name and, after each post, rings it when the owner has said it
// sleeps: a shared load otherwise.
//
// No lost wake-up: a sleeper announces itself (sleep_announce), polls its CQ once more, and
// only then sleeps on the word it read (sleep); a ringer posts, then reads the announcement
// and, if there is one, bumps the word and wakes. Either the sleeper's last poll finds what
// was posted, or the ringer sees the announcement.
//
// Trust: the file is readable and writable by every local user (the two peers may run as
// different users). A local user can wake the owner (it polls and sleeps again) or make it
// miss a wake-up (it then wakes at its back-off, as without a doorbell); no data passes
// through it.
//
// Ownership: the owner (create) unlinks the file on destruction; a peer's handle (open)
// only unmaps. Thread-safety: every member from any thread; several sleepers may share one.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "rpcie/mapping.hpp"
#include "rpcie/result.hpp"

namespace rpcie {

class LocalDoorbell {
 public:
  // The doorbell of the endpoint at `address` (its fi_getname bytes): created (owner), or
  // opened (its peer). ENOENT when the peer has none (another build, or not shm).
  static Result<LocalDoorbell> create(std::span<const std::uint8_t> address);
  static Result<LocalDoorbell> open(std::span<const std::uint8_t> address);
  // The shared-memory name for `address`: "/PID:N:M.rpcie-db" for shm's "fi_shm://PID:N:M",
  // else "/rpcie-db-" and 16 hex digits.
  static std::string name_for(std::span<const std::uint8_t> address);

  LocalDoorbell(LocalDoorbell&&) noexcept = default;  // the moved-from one unlinks nothing
  LocalDoorbell& operator=(LocalDoorbell&&) = delete;
  LocalDoorbell(const LocalDoorbell&) = delete;
  ~LocalDoorbell();

  // The ringer, after a post to the owner: wakes its sleepers, if any.
  void ring() noexcept;
  // The sleeper: announce (returns the word to sleep on), look for work once more, then
  // sleep unless there was some; sleep_end() always follows sleep_announce().
  std::uint32_t sleep_announce() noexcept;
  // Sleeps until rung or `most` passes; true when rung.
  bool sleep(std::uint32_t word, std::chrono::microseconds most) noexcept;
  void sleep_end() noexcept;

 private:
  struct Shared;
  LocalDoorbell(Mapping mapping, std::string name, bool owner) noexcept
      : mapping_(std::move(mapping)), name_(std::move(name)), owner_(owner) {}
  Shared& shared() const noexcept;
  Mapping mapping_;
  std::string name_;
  bool owner_;
};

}  // namespace rpcie
