#include "preauth_gate.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <utility>

namespace rpcie::dev {

std::string preauth_source(const std::string& address) {
  in6_addr a{};
  if (address.find(':') == std::string::npos || inet_pton(AF_INET6, address.c_str(), &a) != 1) return address;
  char text[INET6_ADDRSTRLEN] = {};
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    inet_ntop(AF_INET, a.s6_addr + 12, text, sizeof text);
    return text;
  }
  std::memset(a.s6_addr + 8, 0, 8);
  inet_ntop(AF_INET6, &a, text, sizeof text);
  return std::string(text) + "/64";
}

PreauthGate::Ticket::Ticket(Ticket&& o) noexcept
    : gate_(std::exchange(o.gate_, nullptr)), address_(std::move(o.address_)) {}

PreauthGate::Ticket& PreauthGate::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    reset();
    gate_ = std::exchange(o.gate_, nullptr);
    address_ = std::move(o.address_);
  }
  return *this;
}

void PreauthGate::Ticket::reset() noexcept {
  if (gate_) std::exchange(gate_, nullptr)->release(address_);
}

PreauthGate::Admission PreauthGate::admit(const std::string& address) {
  std::string source = preauth_source(address);
  std::lock_guard held(lock_);
  if (held_ >= total_) return {std::nullopt, Refusal::total};
  auto& n = by_address_[source];
  if (n >= per_address_) return {std::nullopt, Refusal::address};
  ++n;
  ++held_;
  return {Ticket(this, std::move(source)), Refusal::address};
}

void PreauthGate::release(const std::string& address) noexcept {
  std::lock_guard held(lock_);
  auto it = by_address_.find(address);
  if (it == by_address_.end()) return;  // cannot happen: every ticket was counted here
  if (--it->second == 0) by_address_.erase(it);
  --held_;
}

std::uint32_t PreauthGate::held(const std::string& address) const {
  const std::string source = preauth_source(address);
  std::lock_guard held(lock_);
  auto it = by_address_.find(source);
  return it == by_address_.end() ? 0 : it->second;
}

std::uint32_t PreauthGate::held() const {
  std::lock_guard held(lock_);
  return held_;
}

}  // namespace rpcie::dev
