#include "rpcie/message_seal.hpp"

#include <openssl/evp.h>
#include <sodium.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "rpcie/log.hpp"

namespace rpcie::auth {

static_assert(kEnvelopeOverhead ==
              crypto_aead_xchacha20poly1305_ietf_NPUBBYTES + crypto_aead_xchacha20poly1305_ietf_ABYTES);
static_assert(kDataKeyBytes == crypto_aead_xchacha20poly1305_ietf_KEYBYTES);

namespace {

constexpr std::size_t kNonceBytes96 = 12;

[[noreturn]] void evp_broken(const char* what) noexcept {
  log_write(LogLevel::error, "seal",
            std::string("OpenSSL EVP failed in ") + what + "; aborting rather than send in clear");
  std::abort();
}

void nonce_fill(std::uint64_t sequence, unsigned char (&nonce)[kNonceBytes96]) noexcept {
  std::memset(nonce, 0, 4);
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<unsigned char>(sequence >> (8 * i));
}

std::uint64_t sequence_read(const std::uint8_t* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

const EVP_CIPHER* cipher_of(Aead aead) noexcept {
  return aead == Aead::aes256gcm ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
}

EVP_CIPHER_CTX* context_make(Aead aead, const std::array<std::uint8_t, kDataKeyBytes>& key, bool encrypt) noexcept {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr || EVP_CipherInit_ex(ctx, cipher_of(aead), nullptr, key.data(), nullptr, encrypt ? 1 : 0) != 1)
    evp_broken("key setup");
  return ctx;
}

}  // namespace

std::uint8_t aead_offer_local() noexcept {
  const bool aes_fast = __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul");
  return static_cast<std::uint8_t>((aes_fast ? static_cast<unsigned>(Aead::aes256gcm) : 0U) |
                                   static_cast<unsigned>(Aead::chacha20poly1305));
}

Aead aead_choose(std::uint8_t offer_a, std::uint8_t offer_b) noexcept {
  const auto gcm = static_cast<std::uint8_t>(Aead::aes256gcm);
  return (offer_a & offer_b & gcm) != 0 ? Aead::aes256gcm : Aead::chacha20poly1305;
}

const char* aead_name(Aead aead) noexcept { return aead == Aead::aes256gcm ? "aes-256-gcm" : "chacha20-poly1305"; }

const char* seal_refusal_name(SealRefusal r) noexcept {
  switch (r) {
    case SealRefusal::too_short:
      return "too short to be sealed";
    case SealRefusal::replayed:
      return "replayed or reordered";
    case SealRefusal::forged:
      return "failed authentication";
  }
  return "refused";
}

namespace {

// Both libraries compute the same AEAD (the same nonce, ciphertext and tag), so which one
// seals a message is this side's choice alone. OpenSSL's EVP is the faster on large
// messages (docs/security.md 7), but each EVP call walks OpenSSL 3's parameter tables:
// ~280 ns to seal 32 bytes with AES-256-GCM against libsodium's ~150 ns from a precomputed
// key schedule (ChaCha20-Poly1305: ~820 against ~400 ns). The crossing is near 512 bytes
// for both; requests and replies, the messages of every round trip, are far below it.
constexpr std::size_t kSmallMessageMax = 512;

static_assert(kSealTagBytes == crypto_aead_aes256gcm_ABYTES &&
              kSealTagBytes == crypto_aead_chacha20poly1305_ietf_ABYTES);
static_assert(kNonceBytes96 == crypto_aead_aes256gcm_NPUBBYTES &&
              kNonceBytes96 == crypto_aead_chacha20poly1305_ietf_NPUBBYTES);

}  // namespace

// One direction's key, as each library wants it.
struct MessageSeal::DirectionKeys {
  EVP_CIPHER_CTX* evp = nullptr;
  // AES-256-GCM's key schedule for libsodium, where it has its AES-NI code (else null, and
  // EVP seals every size); sodium_malloc'd: guarded, wiped when freed.
  crypto_aead_aes256gcm_state* gcm = nullptr;
  std::array<std::uint8_t, kDataKeyBytes> chacha{};

  DirectionKeys(Aead aead, const std::array<std::uint8_t, kDataKeyBytes>& key, bool encrypt)
      : evp(context_make(aead, key, encrypt)) {
    if (aead == Aead::aes256gcm) {
      if (sodium_init() >= 0 && crypto_aead_aes256gcm_is_available() == 1) {
        gcm = static_cast<crypto_aead_aes256gcm_state*>(sodium_malloc(sizeof(crypto_aead_aes256gcm_state)));
        if (gcm == nullptr) std::abort();  // out of memory while setting up keys
        crypto_aead_aes256gcm_beforenm(gcm, key.data());
      }
    } else {
      chacha = key;
    }
  }
  ~DirectionKeys() {
    EVP_CIPHER_CTX_free(evp);  // frees the key schedule it holds (wiped by OpenSSL)
    sodium_free(gcm);          // null-safe
    sodium_memzero(chacha.data(), chacha.size());
  }
  DirectionKeys(const DirectionKeys&) = delete;
  DirectionKeys& operator=(const DirectionKeys&) = delete;

  // libsodium for a small message; false: the caller uses EVP.
  bool small_seal(Aead aead, std::span<const std::uint8_t> plain, std::uint8_t* cipher,
                  const unsigned char* nonce) const noexcept {
    if (plain.size() > kSmallMessageMax) return false;
    std::uint8_t* tag = cipher + plain.size();
    if (aead == Aead::aes256gcm) {
      if (gcm == nullptr) return false;
      return crypto_aead_aes256gcm_encrypt_detached_afternm(cipher, tag, nullptr, plain.data(), plain.size(), nullptr,
                                                            0, nullptr, nonce, gcm) == 0;
    }
    return crypto_aead_chacha20poly1305_ietf_encrypt_detached(cipher, tag, nullptr, plain.data(), plain.size(), nullptr,
                                                              0, nullptr, nonce, chacha.data()) == 0;
  }
  // Opens in place; nullopt: not small (the caller uses EVP), else whether it authenticated.
  std::optional<bool> small_open(Aead aead, std::uint8_t* cipher, std::size_t length,
                                 const unsigned char* nonce) const noexcept {
    if (length > kSmallMessageMax) return std::nullopt;
    const std::uint8_t* tag = cipher + length;
    if (aead == Aead::aes256gcm) {
      if (gcm == nullptr) return std::nullopt;
      return crypto_aead_aes256gcm_decrypt_detached_afternm(cipher, nullptr, cipher, length, tag, nullptr, 0, nonce,
                                                            gcm) == 0;
    }
    return crypto_aead_chacha20poly1305_ietf_decrypt_detached(cipher, nullptr, cipher, length, tag, nullptr, 0, nonce,
                                                              chacha.data()) == 0;
  }
};

struct MessageSeal::Contexts {
  DirectionKeys send;
  DirectionKeys receive;
  Contexts(Aead aead, const DataKeys& keys) : send(aead, keys.send, true), receive(aead, keys.receive, false) {}
};

MessageSeal::MessageSeal(Aead aead, const DataKeys& keys)
    : aead_(aead), contexts_(std::make_unique<Contexts>(aead, keys)) {}

MessageSeal::~MessageSeal() = default;

std::size_t MessageSeal::seal(std::span<const std::uint8_t> plain, std::span<std::uint8_t> out) noexcept {
  if (out.size() < plain.size() + kSealOverhead || plain.size() > INT32_MAX) evp_broken("seal (buffer too small)");
  const std::uint64_t sequence = ++send_sequence_;
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(sequence >> (8 * i));
  unsigned char nonce[kNonceBytes96];
  nonce_fill(sequence, nonce);
  std::uint8_t* cipher = out.data() + kSealSequenceBytes;
  if (contexts_->send.small_seal(aead_, plain, cipher, nonce)) return plain.size() + kSealOverhead;
  EVP_CIPHER_CTX* ctx = contexts_->send.evp;
  int n = 0, tail = 0;
  if (EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) != 1 ||
      EVP_EncryptUpdate(ctx, cipher, &n, plain.data(), static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx, cipher + n, &tail) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kSealTagBytes, cipher + plain.size()) != 1)
    evp_broken("seal");
  return plain.size() + kSealOverhead;
}

tl::expected<std::span<std::uint8_t>, SealRefusal> MessageSeal::open(std::span<std::uint8_t> sealed) noexcept {
  if (sealed.size() < kSealOverhead || sealed.size() - kSealOverhead > INT32_MAX)
    return tl::unexpected(SealRefusal::too_short);
  const std::uint64_t sequence = sequence_read(sealed.data());
  const std::size_t length = sealed.size() - kSealOverhead;
  std::uint8_t* cipher = sealed.data() + kSealSequenceBytes;
  unsigned char nonce[kNonceBytes96];
  nonce_fill(sequence, nonce);
  // The tag is checked before the sequence: a forged message with a stale sequence counts as
  // forged, and only a genuine message can be "replayed".
  const auto small = contexts_->receive.small_open(aead_, cipher, length, nonce);
  if (small && !*small) return tl::unexpected(SealRefusal::forged);
  EVP_CIPHER_CTX* ctx = contexts_->receive.evp;
  int n = 0, tail = 0;
  if (!small && (EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) != 1 ||
                 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, kSealTagBytes, cipher + length) != 1 ||
                 EVP_DecryptUpdate(ctx, cipher, &n, cipher, static_cast<int>(length)) != 1 ||
                 EVP_DecryptFinal_ex(ctx, cipher + n, &tail) != 1))
    return tl::unexpected(SealRefusal::forged);
  if (sequence <= receive_sequence_) return tl::unexpected(SealRefusal::replayed);
  receive_sequence_ = sequence;
  return std::span<std::uint8_t>(cipher, length);
}

std::vector<std::uint8_t> envelope_seal(std::span<const std::uint8_t, kDataKeyBytes> key,
                                        std::span<const std::uint8_t> plain) {
  std::vector<std::uint8_t> out(plain.size() + kEnvelopeOverhead);
  if (sodium_init() < 0) std::abort();  // no randomness: nothing here is safe
  randombytes_buf(out.data(), crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
  unsigned long long n = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(out.data() + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES, &n,
                                             plain.data(), plain.size(), nullptr, 0, nullptr, out.data(), key.data());
  return out;
}

bool envelope_open(std::span<const std::uint8_t, kDataKeyBytes> key, std::span<const std::uint8_t> sealed,
                   std::vector<std::uint8_t>& plain) {
  if (sealed.size() < kEnvelopeOverhead) return false;
  plain.resize(sealed.size() - kEnvelopeOverhead);
  unsigned long long n = 0;
  const std::size_t npub = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;
  return crypto_aead_xchacha20poly1305_ietf_decrypt(plain.data(), &n, nullptr, sealed.data() + npub,
                                                    sealed.size() - npub, nullptr, 0, sealed.data(), key.data()) == 0;
}

}  // namespace rpcie::auth
