// rpcie::auth::MessageSeal — authenticated encryption of data-path messages with sequence
// numbers (docs/auth.md, "Data path").
//
// Each side of an authenticated attachment holds one MessageSeal: a key to seal what it
// sends and another to open what it receives, both derived from the bootstrap's session key
// (data_keys_derive), so they are fresh per connection and different per direction.
//
// A sealed message is
//     sequence (u64 LE) | ciphertext (as long as the message) | tag (kSealTagBytes)
// with the AEAD nonce = 4 zero bytes | sequence (LE). Sequences start at 1 and grow by one
// per sealed message. open() accepts only a sequence greater than every one it accepted
// before, so a replayed or reordered message is refused as surely as a forged one; a gap
// (a message the sender sealed but never sent) is allowed.
//
// Ciphers: AES-256-GCM where both sides' CPUs have AES and carry-less multiply
// instructions, else ChaCha20-Poly1305 (aead_offer_local / aead_choose). OpenSSL's EVP
// implementation, measured faster here than libsodium's (docs/security.md 7), except on
// messages of at most 512 bytes (every request and reply of a round trip), where EVP's
// per-call overhead dominates and libsodium computes the same AEAD in half the time.
//
// Thread-safety: none; the owner serialises (the Channel calls seal() and open() under its
// lock). seal() touches only the send state, open() only the receive state.
// Errors: seal() cannot fail for a message of at most 2^31 bytes (EVP failure aborts: it
// means a broken library, and sending in clear is not an option). open() returns a
// SealRefusal, never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "rpcie/auth.hpp"
#include "rpcie/result.hpp"

namespace rpcie::auth {

inline constexpr std::size_t kSealTagBytes = 16;
inline constexpr std::size_t kSealSequenceBytes = 8;
inline constexpr std::size_t kSealOverhead = kSealSequenceBytes + kSealTagBytes;

enum class Aead : std::uint8_t { aes256gcm = 1, chacha20poly1305 = 2 };
// Bit mask of Aead values a side can use at full speed (SealedHello.aead): AES-256-GCM only with
// AES-NI and PCLMULQDQ; ChaCha20-Poly1305 always.
std::uint8_t aead_offer_local() noexcept;
// The cipher both sides use: AES-256-GCM if both offer it, else ChaCha20-Poly1305. Both
// sides compute it from the two offers, so no further message is needed.
Aead aead_choose(std::uint8_t offer_a, std::uint8_t offer_b) noexcept;
const char* aead_name(Aead aead) noexcept;

enum class SealRefusal { too_short, replayed, forged };
const char* seal_refusal_name(SealRefusal r) noexcept;

class MessageSeal {
 public:
  MessageSeal(Aead aead, const DataKeys& keys);
  ~MessageSeal();
  MessageSeal(const MessageSeal&) = delete;
  MessageSeal& operator=(const MessageSeal&) = delete;

  Aead aead() const noexcept { return aead_; }

  // Seals `plain` as the next message into `out`, which must hold plain.size() +
  // kSealOverhead bytes. Returns the sealed size.
  std::size_t seal(std::span<const std::uint8_t> plain, std::span<std::uint8_t> out) noexcept;

  // Opens a sealed message in place: on success returns the plaintext, a view into
  // `sealed` (at offset kSealSequenceBytes), and advances the receive sequence. On refusal
  // the state is unchanged and `sealed` may hold garbage.
  tl::expected<std::span<std::uint8_t>, SealRefusal> open(std::span<std::uint8_t> sealed) noexcept;

  std::uint64_t send_sequence() const noexcept { return send_sequence_; }        // last sealed
  std::uint64_t receive_sequence() const noexcept { return receive_sequence_; }  // last opened

 private:
  struct DirectionKeys;
  struct Contexts;
  Aead aead_;
  std::unique_ptr<Contexts> contexts_;
  std::uint64_t send_sequence_ = 0;
  std::uint64_t receive_sequence_ = 0;
};

// One-shot sealing for the bootstrap's hello envelope (XChaCha20-Poly1305 with a random
// 24-byte nonce, libsodium): nonce | ciphertext | tag. open_once fails (false) on a forged or
// short envelope.
inline constexpr std::size_t kEnvelopeOverhead = 24 + 16;
std::vector<std::uint8_t> envelope_seal(std::span<const std::uint8_t, kDataKeyBytes> key,
                                        std::span<const std::uint8_t> plain);
bool envelope_open(std::span<const std::uint8_t, kDataKeyBytes> key, std::span<const std::uint8_t> sealed,
                   std::vector<std::uint8_t>& plain);

}  // namespace rpcie::auth
