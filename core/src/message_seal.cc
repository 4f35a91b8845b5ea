#include "rpcie/message_seal.hpp"

#include <openssl/evp.h>
#include <sodium.h>

#include <cstdlib>
#include <cstring>

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

struct MessageSeal::Contexts {
  EVP_CIPHER_CTX* send = nullptr;
  EVP_CIPHER_CTX* receive = nullptr;
  ~Contexts() {
    EVP_CIPHER_CTX_free(send);  // frees the key schedule it holds (wiped by OpenSSL)
    EVP_CIPHER_CTX_free(receive);
  }
};

MessageSeal::MessageSeal(Aead aead, const DataKeys& keys) : aead_(aead), contexts_(std::make_unique<Contexts>()) {
  contexts_->send = context_make(aead, keys.send, true);
  contexts_->receive = context_make(aead, keys.receive, false);
}

MessageSeal::~MessageSeal() = default;

std::size_t MessageSeal::seal(std::span<const std::uint8_t> plain, std::span<std::uint8_t> out) noexcept {
  if (out.size() < plain.size() + kSealOverhead || plain.size() > INT32_MAX) evp_broken("seal (buffer too small)");
  const std::uint64_t sequence = ++send_sequence_;
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(sequence >> (8 * i));
  unsigned char nonce[kNonceBytes96];
  nonce_fill(sequence, nonce);
  EVP_CIPHER_CTX* ctx = contexts_->send;
  int n = 0, tail = 0;
  std::uint8_t* cipher = out.data() + kSealSequenceBytes;
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
  EVP_CIPHER_CTX* ctx = contexts_->receive;
  int n = 0, tail = 0;
  // The tag is checked before the sequence: a forged message with a stale sequence counts as
  // forged, and only a genuine message can be "replayed".
  if (EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, kSealTagBytes, cipher + length) != 1 ||
      EVP_DecryptUpdate(ctx, cipher, &n, cipher, static_cast<int>(length)) != 1 ||
      EVP_DecryptFinal_ex(ctx, cipher + n, &tail) != 1)
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
