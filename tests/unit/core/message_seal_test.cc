// Data-path sealing: keys per direction from the session key, AEAD per message with
// sequence numbers (forged, replayed, reordered and reflected messages refused, the state
// unchanged), both ciphers, and the hello envelope.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <openssl/evp.h>

#include "rpcie/auth.hpp"
#include "rpcie/message_seal.hpp"

using namespace rpcie::auth;
using Bytes = std::vector<std::uint8_t>;

namespace {

SessionKey session_make(std::uint8_t fill) {
  const auto key = Key::create(std::vector<std::uint8_t>(32, fill));
  REQUIRE(key);
  Nonce cn{}, sn{};
  cn.fill(1);
  sn.fill(2);
  return session_key_derive(*key, "alice", cn, sn);
}

struct Pair {
  MessageSeal client;
  MessageSeal server;
};

Pair pair_make(Aead aead, std::uint8_t fill = 7) {
  const SessionKey s = session_make(fill);
  return {MessageSeal(aead, data_keys_derive(s, Role::client)), MessageSeal(aead, data_keys_derive(s, Role::server))};
}

Bytes sealed(MessageSeal& from, const std::string& text) {
  Bytes out(text.size() + kSealOverhead);
  const auto n = from.seal(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()), out);
  CHECK(n == out.size());
  return out;
}

std::string opened(MessageSeal& to, Bytes message) {
  auto r = to.open(message);
  REQUIRE(r);
  return std::string(r->begin(), r->end());
}

}  // namespace

TEST_CASE("both directions open what the other side sealed, with either cipher") {
  for (Aead aead : {Aead::aes256gcm, Aead::chacha20poly1305}) {
    CAPTURE(aead_name(aead));
    Pair p = pair_make(aead);
    CHECK(opened(p.server, sealed(p.client, "mmio_read bar 0 offset 8")) == "mmio_read bar 0 offset 8");
    CHECK(opened(p.client, sealed(p.server, "read_reply 0x1234")) == "read_reply 0x1234");
    CHECK(opened(p.server, sealed(p.client, "")).empty());
    CHECK(p.client.send_sequence() == 2);
    CHECK(p.server.receive_sequence() == 2);
  }
}

// `plain` sealed as message `sequence` under `key` by OpenSSL's EVP, one call at a time: the
// standard AEAD, written apart from MessageSeal (nonce = 4 zero bytes | sequence LE).
Bytes reference_sealed(Aead aead, const std::array<std::uint8_t, kDataKeyBytes>& key, std::uint64_t sequence,
                       const Bytes& plain) {
  Bytes out(kSealSequenceBytes + plain.size() + kSealTagBytes);
  unsigned char nonce[12] = {};
  for (int i = 0; i < 8; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(sequence >> (8 * i));
    nonce[4 + i] = static_cast<unsigned char>(sequence >> (8 * i));
  }
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  REQUIRE(ctx != nullptr);
  int n = 0, tail = 0;
  const bool ok =
      EVP_EncryptInit_ex(ctx, aead == Aead::aes256gcm ? EVP_aes_256_gcm() : EVP_chacha20_poly1305(), nullptr,
                         key.data(), nonce) == 1 &&
      EVP_EncryptUpdate(ctx, out.data() + kSealSequenceBytes, &n, plain.data(), static_cast<int>(plain.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx, out.data() + kSealSequenceBytes + n, &tail) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kSealTagBytes),
                          out.data() + kSealSequenceBytes + plain.size()) == 1;
  EVP_CIPHER_CTX_free(ctx);
  REQUIRE(ok);
  return out;
}

TEST_CASE("every size seals to the standard AEAD, small messages (another library) as large ones") {
  // Small messages take libsodium, large ones OpenSSL; a peer may use either for any size,
  // so each must produce (and accept) exactly the standard construction.
  for (Aead aead : {Aead::aes256gcm, Aead::chacha20poly1305}) {
    CAPTURE(aead_name(aead));
    const SessionKey s = session_make(9);
    const DataKeys client_keys = data_keys_derive(s, Role::client);
    MessageSeal client(aead, client_keys);
    MessageSeal server(aead, data_keys_derive(s, Role::server));
    std::uint64_t sequence = 0;
    for (std::size_t size : {0, 1, 60, 511, 512, 513, 1024, 4096, 65536}) {
      CAPTURE(size);
      Bytes plain(size);
      for (std::size_t i = 0; i < size; ++i) plain[i] = static_cast<std::uint8_t>(i * 7 + size);
      Bytes out(size + kSealOverhead);
      REQUIRE(client.seal(plain, out) == out.size());
      ++sequence;
      const Bytes reference = reference_sealed(aead, client_keys.send, sequence, plain);
      CHECK(out == reference);
      Bytes altered = reference;
      altered[kSealSequenceBytes + size / 2] ^= 0x01;  // ciphertext, or the tag when empty
      CHECK(server.open(altered).error() == SealRefusal::forged);
      Bytes received = reference;
      auto r = server.open(received);
      REQUIRE(r);
      CHECK(Bytes(r->begin(), r->end()) == plain);
    }
  }
}

TEST_CASE("the ciphertext hides the message") {
  Pair p = pair_make(Aead::aes256gcm);
  const std::string secret = "region key 0x00c0ffee00c0ffee";
  const Bytes m = sealed(p.client, secret);
  CHECK(std::search(m.begin(), m.end(), secret.begin(), secret.end()) == m.end());
  CHECK(std::search(m.begin(), m.end(), secret.begin() + 11, secret.end()) == m.end());
}

TEST_CASE("a forged, altered, reflected or short message is refused and changes nothing") {
  Pair p = pair_make(Aead::chacha20poly1305);
  const Bytes good = sealed(p.client, "config_write 0x04");
  SUBCASE("one bit flipped anywhere") {
    for (std::size_t i = 0; i < good.size(); ++i) {
      Bytes bad = good;
      bad[i] ^= 0x20;
      auto r = p.server.open(bad);
      REQUIRE_FALSE(r);
      CHECK(r.error() == SealRefusal::forged);
    }
  }
  SUBCASE("sealed by someone with another session key") {
    Pair other = pair_make(Aead::chacha20poly1305, 9);
    Bytes foreign = sealed(other.client, "config_write 0x04");
    auto r = p.server.open(foreign);
    REQUIRE_FALSE(r);
    CHECK(r.error() == SealRefusal::forged);
  }
  SUBCASE("reflected back to its sender") {
    Bytes reflected = good;
    auto r = p.client.open(reflected);
    REQUIRE_FALSE(r);
    CHECK(r.error() == SealRefusal::forged);
  }
  SUBCASE("shorter than the overhead") {
    Bytes tiny(kSealOverhead - 1, 0);
    auto r = p.server.open(tiny);
    REQUIRE_FALSE(r);
    CHECK(r.error() == SealRefusal::too_short);
  }
  CHECK(p.server.receive_sequence() == 0);
  CHECK(opened(p.server, good) == "config_write 0x04");  // the genuine one still opens
}

TEST_CASE("a replayed or reordered message is refused; a gap is allowed") {
  Pair p = pair_make(Aead::aes256gcm);
  const Bytes first = sealed(p.client, "first");
  const Bytes second = sealed(p.client, "second");
  Bytes skipped_over = sealed(p.client, "never sent");
  const Bytes fourth = sealed(p.client, "fourth");
  CHECK(opened(p.server, first) == "first");
  Bytes replay = first;
  auto again = p.server.open(replay);
  REQUIRE_FALSE(again);
  CHECK(again.error() == SealRefusal::replayed);
  CHECK(opened(p.server, second) == "second");
  CHECK(opened(p.server, fourth) == "fourth");  // the third was lost: allowed
  auto late = p.server.open(skipped_over);      // ... but it may not arrive after the fourth
  REQUIRE_FALSE(late);
  CHECK(late.error() == SealRefusal::replayed);
  CHECK(p.server.receive_sequence() == 4);
}

TEST_CASE("data keys differ per direction and per session; the hello key is shared") {
  const SessionKey s = session_make(7);
  const DataKeys c = data_keys_derive(s, Role::client), v = data_keys_derive(s, Role::server);
  CHECK(c.send == v.receive);
  CHECK(c.receive == v.send);
  CHECK(c.send != c.receive);
  const SessionKey t = session_make(8);
  CHECK(data_keys_derive(t, Role::client).send != c.send);
  CHECK(hello_key_derive(s).bytes == hello_key_derive(s).bytes);
  CHECK(hello_key_derive(s).bytes != c.send);
  CHECK(hello_key_derive(s).bytes != hello_key_derive(t).bytes);
}

TEST_CASE("aead_choose takes AES-256-GCM only when both offer it") {
  const auto gcm = static_cast<std::uint8_t>(Aead::aes256gcm), cc = static_cast<std::uint8_t>(Aead::chacha20poly1305);
  CHECK(aead_choose(gcm | cc, gcm | cc) == Aead::aes256gcm);
  CHECK(aead_choose(gcm | cc, cc) == Aead::chacha20poly1305);
  CHECK(aead_choose(cc, gcm | cc) == Aead::chacha20poly1305);
  CHECK((aead_offer_local() & cc) != 0);
}

TEST_CASE("the hello envelope opens with its key only, and hides its content") {
  const SessionKey s = session_make(7), t = session_make(8);
  const std::string text = "fabric address and region keys";
  const Bytes plain(text.begin(), text.end());
  const Bytes env = envelope_seal(hello_key_derive(s).bytes, plain);
  CHECK(env.size() == plain.size() + kEnvelopeOverhead);
  CHECK(std::search(env.begin(), env.end(), plain.begin(), plain.end()) == env.end());
  Bytes out;
  CHECK(envelope_open(hello_key_derive(s).bytes, env, out));
  CHECK(out == plain);
  CHECK_FALSE(envelope_open(hello_key_derive(t).bytes, env, out));
  Bytes bad = env;
  bad[bad.size() / 2] ^= 1;  // a ciphertext byte (back() trips a false -Wstringop-overflow at -O3)
  CHECK_FALSE(envelope_open(hello_key_derive(s).bytes, bad, out));
  CHECK_FALSE(envelope_open(hello_key_derive(s).bytes, Bytes(kEnvelopeOverhead - 1), out));
}
