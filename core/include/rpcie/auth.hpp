// Pre-shared-key authentication: key files, the mutual challenge-response of the bootstrap
// connection, and the per-frame MAC that follows it. docs/auth.md gives the handshake and
// the exact bytes under every HMAC, so that a second implementation can interoperate.
//
// The primitives, in the order a connection uses them:
//   key_load()            the PSK (one per client name; /etc/rpcie/psk by default)
//   nonce_random()        each side's fresh challenge
//   proof_compute/verify  HMAC-SHA256(PSK, "rpcie-auth-v1" | "proof" | role | name | nonces)
//   session_key_derive    HMAC-SHA256(PSK, "rpcie-auth-v1" | "session-key" | name | nonces)
//   FrameMac              HMAC-SHA256(session key, ... | sender role | sequence | frame)
//
// Contract common to the whole header:
//  - No exceptions. What can fail returns Result; the rest cannot fail.
//  - libsodium is initialised on first use, once, thread-safely. If it cannot be (no
//    usable randomness), the process aborts, as libsodium requires: nothing here is safe
//    without it.
//  - Secrets (Key, SessionKey) are move-only and wiped (sodium_memzero) when destroyed and
//    when moved from. A moved-from Key is empty, a moved-from SessionKey all zero: neither
//    may be used again except to be assigned to or destroyed.
//  - Error messages name files and lengths, never key material.
//  - Free functions are pure or touch only the file they are given: thread-safe.
//  - Verification (proof_verify, FrameMac::open) compares in constant time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "rpcie/result.hpp"

namespace rpcie::auth {

inline constexpr const char* kDefaultKeyPath = "/etc/rpcie/psk";
inline constexpr std::size_t kKeyMinBytes = 32;        // a key shorter than this is refused
inline constexpr std::size_t kKeyMaxBytes = 128;       // ... and a longer one too
inline constexpr std::size_t kKeyFileMaxBytes = 4096;  // a key file larger than this is refused
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;  // HMAC-SHA256 (crypto_auth_hmacsha256)
inline constexpr std::size_t kSessionKeyBytes = 32;
inline constexpr std::size_t kClientNameMax = 64;
inline constexpr std::size_t kDataKeyBytes = 32;

// --- Keys ------------------------------------------------------------------------------------

// A pre-shared key: kKeyMinBytes .. kKeyMaxBytes secret bytes. The bytes live in a
// sodium_malloc() allocation (guard pages, locked in memory where RLIMIT_MEMLOCK allows, read
// only once filled) that is wiped and freed on destruction. Immutable: a const Key may be used
// by any number of threads at once.
class Key {
 public:
  // Copies `bytes` into a new key. EINVAL when the size is outside kKeyMinBytes ..
  // kKeyMaxBytes, ENOMEM when no secure memory can be had.
  static Result<Key> create(std::span<const std::uint8_t> bytes);

  Key(Key&& other) noexcept;
  Key& operator=(Key&& other) noexcept;
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;
  ~Key();

  // The secret. Valid as long as this Key is alive and not moved from; empty after a move.
  std::span<const std::uint8_t> bytes() const noexcept { return {data_, size_}; }

 private:
  friend Result<Key> key_parse(std::string_view text);
  static Result<Key> allocate(std::size_t size);  // zeroed, writable until protect()
  void protect() noexcept;                        // makes the bytes read-only
  Key(std::uint8_t* data, std::size_t size) noexcept : data_(data), size_(size) {}
  void release() noexcept;

  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// The text of a key file -> Key. The text is hex digits (either case), two per byte,
// kKeyMinBytes .. kKeyMaxBytes bytes. Whitespace (space, tab, CR, LF, VT, FF) is ignored
// anywhere — between bytes, inside a byte, before, after — but every hex digit must be on
// one line: a newline between two digits is refused, so that two keys pasted into one file
// never silently become one longer key. Leading and trailing blank lines, CRLF line ends and
// a missing final newline are all fine. No comments.
// Errors, all EINVAL, none quoting the text: empty, a character that is neither hex nor
// whitespace (its offset is given), digits on more than one line, an odd number of digits,
// too few or too many bytes. ENOMEM when no secure memory can be had.
Result<Key> key_parse(std::string_view text);

// Reads and parses the key file at `path`. Symbolic links are followed: every check below
// is made on the file actually opened (fstat of the descriptor), so a link cannot smuggle in
// a file that would be refused by its own name, and links such as Kubernetes secret volumes
// or a `psk -> psk.2024` rotation keep working. Refused, in this order:
//  - cannot be opened: that errno (ENOENT, EACCES, ELOOP, ...), message with the path;
//  - not a regular file: EISDIR for a directory, EINVAL otherwise (FIFOs are opened
//    non-blocking, so a FIFO fails here instead of hanging);
//  - owned by someone other than the effective user or root: EACCES (another user owning
//    the file can read and replace the key);
//  - any permission bit for group or others (mode & 077): EACCES with "key file PATH is
//    accessible by group or others (mode 0644); chmod 600 PATH";
//  - larger than kKeyFileMaxBytes: EFBIG;
//  - read error: that errno; content refused by key_parse(): EINVAL, "key file PATH: ...".
Result<Key> key_load(const std::string& path);

// Writes a new random key of kKeyMinBytes bytes to `path` as 64 lower-case hex digits and a
// newline (what `rpcie keygen [FILE]` does), mode exactly 0600 whatever the umask, owned by
// the caller, flushed with fsync (the file and its directory) before returning.
//  - overwrite false: created with O_CREAT|O_EXCL (O_EXCL never follows a symlink); EEXIST
//    when anything exists at `path`. A failure after creation removes the file.
//  - overwrite true: written to a temporary file (mode 0600) in the same directory and
//    renamed over `path`, so readers see the old key or the new one, never a partial one.
//    A symbolic link at `path` is replaced by the file, its target left alone.
//  - The parent directory is created if missing (only the last level, mode 0700: nobody but
//    the owner needs to list it); ENOENT if its own parent is missing too. An existing
//    directory is left as it is.
// Other errors: the errno of the failing call, message with the path.
Result<void> key_generate_file(const std::string& path, bool overwrite);

// A client name: 1 .. kClientNameMax characters of [A-Za-z0-9_.@-]. The server looks a
// client's key up by it; it enters every proof and the session key.
bool client_name_valid(std::string_view name) noexcept;

// --- Challenge-response ----------------------------------------------------------------------

using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kMacBytes>;

enum class Role { client, server };

// A fresh random nonce (randombytes_buf). Each side draws one per connection, never reused.
Nonce nonce_random() noexcept;

// The proof that `who_proves` knows `key`, for this client name and this pair of nonces:
// HMAC-SHA256 keyed with the PSK over a length-prefixed transcript (docs/auth.md, "Proof").
// Role, name and both nonces are all bound, so a proof can never stand for another role (no
// reflection), another client or another connection (no replay). `client_name` should have
// passed client_name_valid(); it is not checked here.
Proof proof_compute(const Key& key, Role who_proves, std::string_view client_name, const Nonce& client_nonce,
                    const Nonce& server_nonce) noexcept;
// True when `proof` is proof_compute() of the same inputs. Constant time (sodium_memcmp).
bool proof_verify(const Key& key, Role who_proves, std::string_view client_name, const Nonce& client_nonce,
                  const Nonce& server_nonce, const Proof& proof) noexcept;

// --- Session key and frame MACs --------------------------------------------------------------

// The per-connection MAC key: kSessionKeyBytes bytes, wiped on destruction and when moved
// from. Made only by session_key_derive().
class SessionKey {
 public:
  SessionKey(SessionKey&& other) noexcept;
  SessionKey& operator=(SessionKey&& other) noexcept;
  SessionKey(const SessionKey&) = delete;
  SessionKey& operator=(const SessionKey&) = delete;
  ~SessionKey();

  std::span<const std::uint8_t, kSessionKeyBytes> bytes() const noexcept { return bytes_; }

 private:
  friend SessionKey session_key_derive(const Key&, std::string_view, const Nonce&, const Nonce&) noexcept;
  SessionKey() = default;
  std::array<std::uint8_t, kSessionKeyBytes> bytes_{};
};

// HMAC-SHA256(PSK, "rpcie-auth-v1" | "session-key" | name | client nonce | server nonce),
// docs/auth.md "Session key". Its label differs from the proofs', so knowing proofs (they
// travel in clear) tells nothing of the session key.
SessionKey session_key_derive(const Key& key, std::string_view client_name, const Nonce& client_nonce,
                              const Nonce& server_nonce) noexcept;

// --- Data-path keys (message_seal.hpp uses them) -------------------------------------------

// The two data-path keys of one side: HMAC-SHA256(session key, "rpcie-auth-v1" |
// "data-key" | sender role) for each direction. Wiped on destruction.
struct DataKeys {
  std::array<std::uint8_t, kDataKeyBytes> send{};
  std::array<std::uint8_t, kDataKeyBytes> receive{};
  DataKeys() = default;
  DataKeys(const DataKeys&) = delete;
  DataKeys& operator=(const DataKeys&) = delete;
  DataKeys(DataKeys&& other) noexcept;
  DataKeys& operator=(DataKeys&& other) noexcept;
  ~DataKeys();
};
DataKeys data_keys_derive(const SessionKey& session, Role self) noexcept;
// The key that seals hello / hello_ack on the bootstrap connection (HMAC-SHA256(session
// key, "rpcie-auth-v1" | "hello-key")): the same on both sides. Wiped on destruction.
struct HelloKey {
  std::array<std::uint8_t, kDataKeyBytes> bytes{};
  HelloKey() = default;
  HelloKey(const HelloKey&) = delete;
  HelloKey& operator=(const HelloKey&) = delete;
  HelloKey(HelloKey&& other) noexcept;  // wipes `other`
  HelloKey& operator=(HelloKey&&) = delete;
  ~HelloKey();
};
HelloKey hello_key_derive(const SessionKey& session) noexcept;

// The MAC state of one side of one connection. Each frame's MAC covers the sender's role
// (direction), the frame's sequence number in that direction (from 0) and the frame bytes
// (docs/auth.md, "Frame MAC"). So a frame that is altered, replayed, reordered, dropped
// from the middle of the stream, or reflected back to its sender fails to open.
//
// Threads: seal() touches only the send state and open() only the receive state, so one
// thread may seal while another opens. Two concurrent seal()s, or two concurrent open()s,
// are a data race; so is reading send_sequence() / receive_sequence() from any thread but
// the one sealing / opening.
class FrameMac {
 public:
  FrameMac(SessionKey key, Role self) noexcept : key_(std::move(key)), self_(self) {}

  // Writes the MAC of `frame` as the next frame this side sends, and advances the send
  // sequence. Frames must then be sent in the order they were sealed. `frame` is at most
  // 2^32 - 1 bytes (a bootstrap frame is at most proto::kMaxMessage).
  void seal(std::span<const std::uint8_t> frame, std::span<std::uint8_t, kMacBytes> mac) noexcept;

  // True when `mac` is the peer's MAC of `frame` as the next frame expected from it; only
  // then the receive sequence advances. A false frame (bad MAC, wrong size of `mac`, replayed
  // or out of order) leaves the state as it was, so the caller drops it and the next genuine
  // frame still opens.
  [[nodiscard]] bool open(std::span<const std::uint8_t> frame, std::span<const std::uint8_t> mac) noexcept;

  // Frames sealed so far / frames opened so far (the next sequence numbers).
  std::uint64_t send_sequence() const noexcept { return send_sequence_; }
  std::uint64_t receive_sequence() const noexcept { return receive_sequence_; }

  // The data-path keys of this side, and the hello envelope key, from this connection's
  // session key. Thread-safe (read only).
  DataKeys data_keys() const noexcept { return data_keys_derive(key_, self_); }
  HelloKey hello_key() const noexcept { return hello_key_derive(key_); }

 private:
  SessionKey key_;
  Role self_;
  std::uint64_t send_sequence_ = 0;
  std::uint64_t receive_sequence_ = 0;
};

}  // namespace rpcie::auth
