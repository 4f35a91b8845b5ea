#include "aead.hpp"

#include <array>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "rpcie/auth.hpp"
#include "rpcie/protocol.hpp"

namespace rpcie::bench {

namespace {

auth::SessionKey fixed_session_key() {
  std::array<std::uint8_t, auth::kKeyMinBytes> bytes{};
  bytes.fill(0x5a);
  auto key = auth::Key::create(bytes);
  if (!key) std::abort();  // a fixed valid key: cannot fail
  auth::Nonce client_nonce{}, server_nonce{};
  client_nonce.fill(0xc1);
  server_nonce.fill(0x5e);
  return auth::session_key_derive(*key, "bench", client_nonce, server_nonce);
}

auth::Aead aead_local() { return auth::aead_choose(auth::aead_offer_local(), auth::aead_offer_local()); }

class RawSealer final : public raw::Sealer {
 public:
  explicit RawSealer(auth::Role role) : seal_(aead_local(), auth::data_keys_derive(fixed_session_key(), role)) {}
  std::size_t overhead() const override { return auth::kSealOverhead; }
  void seal(const void* plain, std::size_t len, void* out) override {
    (void)seal_.seal(std::span(static_cast<const std::uint8_t*>(plain), len),
                     std::span(static_cast<std::uint8_t*>(out), len + auth::kSealOverhead));
  }
  bool open(void* sealed, std::size_t len, const void** plain, std::size_t* plain_len) override {
    auto opened = seal_.open(std::span(static_cast<std::uint8_t*>(sealed), len));
    if (!opened) return false;
    *plain = opened->data();
    *plain_len = opened->size();
    return true;
  }

 private:
  auth::MessageSeal seal_;
};

}  // namespace

std::unique_ptr<raw::Sealer> raw_sealer_make(bool initiator) {
  return std::make_unique<RawSealer>(initiator ? auth::Role::client : auth::Role::server);
}

AeadSpeed aead_speed_measure(double seconds) {
  using Stopwatch = std::chrono::steady_clock;
  constexpr std::size_t kPlain = proto::kMaxRmaBytes + proto::kHeaderSize + 17;  // a full rma_put
  constexpr std::size_t kBatch = 256;  // 4 MiB of messages: out of the L2 cache, as on the wire
  AeadSpeed speed;
  speed.aead = aead_local();
  const auto session = fixed_session_key();
  auth::MessageSeal sealer(speed.aead, auth::data_keys_derive(session, auth::Role::client));
  auth::MessageSeal opener(speed.aead, auth::data_keys_derive(session, auth::Role::server));
  std::vector<std::uint8_t> plain(kPlain, 0x11);
  std::vector<std::vector<std::uint8_t>> sealed(kBatch, std::vector<std::uint8_t>(kPlain + auth::kSealOverhead));
  double sealed_bytes = 0, opened_bytes = 0, seal_s = 0, open_s = 0;
  while (seal_s < seconds || open_s < seconds) {
    auto t0 = Stopwatch::now();
    for (auto& s : sealed) (void)sealer.seal(plain, s);
    auto t1 = Stopwatch::now();
    for (auto& s : sealed)
      if (!opener.open(s)) std::abort();  // sealed just now by its own pair: cannot fail
    auto t2 = Stopwatch::now();
    seal_s += std::chrono::duration<double>(t1 - t0).count();
    open_s += std::chrono::duration<double>(t2 - t1).count();
    sealed_bytes += kBatch * kPlain;
    opened_bytes += kBatch * kPlain;
  }
  speed.seal_mbps = sealed_bytes / seal_s / 1e6;
  speed.open_mbps = opened_bytes / open_s / 1e6;
  return speed;
}

}  // namespace rpcie::bench
