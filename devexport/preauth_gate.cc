#include "preauth_gate.hpp"

#include <utility>

namespace rpcie::dev {

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
  std::lock_guard held(lock_);
  if (held_ >= total_) return {std::nullopt, Refusal::total};
  auto& n = by_address_[address];
  if (n >= per_address_) return {std::nullopt, Refusal::address};
  ++n;
  ++held_;
  return {Ticket(this, address), Refusal::address};
}

void PreauthGate::release(const std::string& address) noexcept {
  std::lock_guard held(lock_);
  auto it = by_address_.find(address);
  if (it == by_address_.end()) return;  // cannot happen: every ticket was counted here
  if (--it->second == 0) by_address_.erase(it);
  --held_;
}

std::uint32_t PreauthGate::held(const std::string& address) const {
  std::lock_guard held(lock_);
  auto it = by_address_.find(address);
  return it == by_address_.end() ? 0 : it->second;
}

std::uint32_t PreauthGate::held() const {
  std::lock_guard held(lock_);
  return held_;
}

}  // namespace rpcie::dev
