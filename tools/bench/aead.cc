#include "aead.hpp"

#include <array>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "rpcie/auth.hpp"
#include "rpcie/protocol.hpp"

namespace rpcie::bench {

AeadSpeed aead_speed_measure(double seconds) {
  using Clock = std::chrono::steady_clock;
  constexpr std::size_t kPlain = proto::kMaxRmaBytes + proto::kHeaderSize + 17;  // a full rma_put
  constexpr std::size_t kBatch = 256;  // 4 MiB of messages: out of the L2 cache, as on the wire
  AeadSpeed speed;
  speed.aead = auth::aead_choose(auth::aead_offer_local(), auth::aead_offer_local());
  std::array<std::uint8_t, auth::kKeyMinBytes> bytes{};
  bytes.fill(0x5a);
  auto key = auth::Key::create(bytes);
  if (!key) std::abort();  // a fixed valid key: cannot fail
  const auto session = auth::session_key_derive(*key, "bench", auth::nonce_random(), auth::nonce_random());
  auth::MessageSeal sealer(speed.aead, auth::data_keys_derive(session, auth::Role::client));
  auth::MessageSeal opener(speed.aead, auth::data_keys_derive(session, auth::Role::server));
  std::vector<std::uint8_t> plain(kPlain, 0x11);
  std::vector<std::vector<std::uint8_t>> sealed(kBatch, std::vector<std::uint8_t>(kPlain + auth::kSealOverhead));
  double sealed_bytes = 0, opened_bytes = 0, seal_s = 0, open_s = 0;
  while (seal_s < seconds || open_s < seconds) {
    auto t0 = Clock::now();
    for (auto& s : sealed) (void)sealer.seal(plain, s);
    auto t1 = Clock::now();
    for (auto& s : sealed)
      if (!opener.open(s)) std::abort();  // sealed just now by its own pair: cannot fail
    auto t2 = Clock::now();
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
