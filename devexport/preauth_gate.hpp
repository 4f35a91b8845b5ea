// Admission of pre-authentication connections: at most `per_address` from one source
// and `total` in all (exporter.hpp says why and what happens to the rest). A source is an
// IPv4 address (an IPv4-mapped IPv6 address counts as its IPv4 address) or an IPv6 /64:
// one host holds a whole /64, so counting its addresses one by one would cap nothing.
//
// A Ticket is one admitted connection; it gives its place back when destroyed (or reset).
// Tickets must not outlive their gate. Thread-safe: the accept loop admits, connection
// threads drop their tickets.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace rpcie::dev {

// The source an address counts against: "a.b.c.d" for IPv4 and IPv4-mapped IPv6, the /64
// prefix ("2001:db8:1:2::/64") for other IPv6 addresses, anything else as it is.
std::string preauth_source(const std::string& address);

class PreauthGate {
 public:
  PreauthGate(std::uint32_t per_address, std::uint32_t total) noexcept : per_address_(per_address), total_(total) {}
  PreauthGate(const PreauthGate&) = delete;
  PreauthGate& operator=(const PreauthGate&) = delete;

  class Ticket {
   public:
    Ticket(Ticket&& o) noexcept;
    Ticket& operator=(Ticket&& o) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { reset(); }
    // Gives the place back now (the handshake is over).
    void reset() noexcept;

   private:
    friend class PreauthGate;
    Ticket(PreauthGate* gate, std::string address) : gate_(gate), address_(std::move(address)) {}
    PreauthGate* gate_ = nullptr;
    std::string address_;
  };

  enum class Refusal { address, total };
  struct Admission {
    std::optional<Ticket> ticket;  // empty: refused
    Refusal why = Refusal::address;
  };
  // One more connection from `address` (the peer's numeric IP address; counted against
  // preauth_source(address)), or why not.
  Admission admit(const std::string& address);

  std::uint32_t per_address() const noexcept { return per_address_; }
  std::uint32_t total() const noexcept { return total_; }
  // Connections admitted and not yet given back: from `address`, and in all.
  std::uint32_t held(const std::string& address) const;
  std::uint32_t held() const;

 private:
  void release(const std::string& address) noexcept;

  const std::uint32_t per_address_;
  const std::uint32_t total_;
  mutable std::mutex lock_;
  std::map<std::string, std::uint32_t, std::less<>> by_address_;  // only addresses holding > 0
  std::uint32_t held_ = 0;
};

}  // namespace rpcie::dev
