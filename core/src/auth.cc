#include "rpcie/auth.hpp"

#include <cassert>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "rpcie/fd.hpp"
#include "rpcie/log.hpp"

namespace rpcie::auth {

static_assert(kMacBytes == crypto_auth_hmacsha256_BYTES);
static_assert(kSessionKeyBytes == crypto_auth_hmacsha256_BYTES);

namespace {

// libsodium must be initialised before randombytes and sodium_malloc; sodium_init() is
// itself thread-safe and idempotent, the static only saves the call.
void sodium_ready() noexcept {
  static const bool ready = sodium_init() >= 0;
  if (!ready) {
    log_write(LogLevel::error, "auth", "libsodium cannot be initialised; no secure randomness, aborting");
    std::abort();
  }
}

// --- HMAC transcripts (docs/auth.md, "Encoding") -------------------------------------------

constexpr std::string_view kDomain = "rpcie-auth-v1";

std::string_view role_label(Role role) noexcept { return role == Role::client ? "client" : "server"; }
Role role_peer(Role role) noexcept { return role == Role::client ? Role::server : Role::client; }

// HMAC-SHA256 over a sequence of fields, each as a u32 little-endian length and its bytes.
// The length prefixes make the encoding injective: no two field lists give the same input.
class Transcript {
 public:
  explicit Transcript(std::span<const std::uint8_t> key) noexcept {
    sodium_ready();
    crypto_auth_hmacsha256_init(&state_, key.data(), key.size());
    field(kDomain);
  }
  ~Transcript() { sodium_memzero(&state_, sizeof state_); }  // holds key-derived pads
  Transcript(const Transcript&) = delete;
  Transcript& operator=(const Transcript&) = delete;

  void field(std::span<const std::uint8_t> bytes) noexcept {
    assert(bytes.size() <= UINT32_MAX);
    const auto n = static_cast<std::uint32_t>(bytes.size());
    const std::uint8_t length[4] = {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8),
                                    static_cast<std::uint8_t>(n >> 16), static_cast<std::uint8_t>(n >> 24)};
    crypto_auth_hmacsha256_update(&state_, length, sizeof length);
    if (!bytes.empty()) crypto_auth_hmacsha256_update(&state_, bytes.data(), bytes.size());
  }
  void field(std::string_view text) noexcept {
    field(std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  }
  void field_u64(std::uint64_t value) noexcept {
    std::uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<std::uint8_t>(value >> (8 * i));
    field(std::span<const std::uint8_t>(le));
  }
  void final(std::span<std::uint8_t, kMacBytes> out) noexcept { crypto_auth_hmacsha256_final(&state_, out.data()); }

 private:
  crypto_auth_hmacsha256_state state_;
};

// --- Files -----------------------------------------------------------------------------------

// Wipes a buffer when it goes out of scope, on every return path.
class Wipe {
 public:
  Wipe(void* data, std::size_t size) noexcept : data_(data), size_(size) {}
  ~Wipe() { sodium_memzero(data_, size_); }
  Wipe(const Wipe&) = delete;
  Wipe& operator=(const Wipe&) = delete;

 private:
  void* data_;
  std::size_t size_;
};

Result<void> bytes_write(int fd, const char* data, std::size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, fmt::format("cannot write key file {}", path));
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Creates the last level of `dir` (mode 0700) if it is missing.
Result<void> directory_ensure(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return fail(ENOTDIR, fmt::format("{} is not a directory", dir));
    return {};
  }
  if (errno != ENOENT) return fail(errno, fmt::format("cannot stat directory {}", dir));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return fail(errno, fmt::format("cannot create directory {} for the key file", dir));
  return {};
}

// So that a new name (create or rename) survives a crash, not only the file's bytes.
Result<void> directory_sync(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return fail(errno, fmt::format("cannot open directory {} to sync it", dir));
  if (::fsync(fd.get()) != 0) return fail(errno, fmt::format("cannot sync directory {}", dir));
  return {};
}

// Writes the key text to an open, empty file and makes it durable and exactly 0600.
Result<void> key_text_store(Fd& fd, std::string_view text, const std::string& path) {
  // The creation mode is masked by the umask; fchmod is not, so the mode is exactly 0600.
  if (::fchmod(fd.get(), 0600) != 0) return fail(errno, fmt::format("cannot chmod key file {}", path));
  if (auto r = bytes_write(fd.get(), text.data(), text.size(), path); !r) return r;
  if (::fsync(fd.get()) != 0) return fail(errno, fmt::format("cannot sync key file {}", path));
  if (fd.close() != 0) return fail(errno, fmt::format("cannot close key file {}", path));
  return {};
}

bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// --- Key -------------------------------------------------------------------------------------

Result<Key> Key::allocate(std::size_t size) {
  sodium_ready();
  auto* data = static_cast<std::uint8_t*>(sodium_malloc(size));
  if (data == nullptr) return fail(ENOMEM, "cannot allocate secure memory for a key");
  std::memset(data, 0, size);  // sodium_malloc fills with a pattern
  return Key(data, size);
}

void Key::protect() noexcept { sodium_mprotect_readonly(data_); }

void Key::release() noexcept {
  if (data_ != nullptr) sodium_free(data_);  // makes the pages writable, wipes, unlocks
  data_ = nullptr;
  size_ = 0;
}

Key::Key(Key&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Key& Key::operator=(Key&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Key::~Key() { release(); }

Result<Key> Key::create(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < kKeyMinBytes || bytes.size() > kKeyMaxBytes)
    return fail(EINVAL, fmt::format("key is {} bytes; it must be {} to {}", bytes.size(), kKeyMinBytes, kKeyMaxBytes));
  auto key = allocate(bytes.size());
  if (!key) return key;
  std::memcpy(key->data_, bytes.data(), bytes.size());
  key->protect();
  return key;
}

Result<Key> key_parse(std::string_view text) {
  // First pass: validate and count, so the secret is decoded once, straight into secure memory.
  std::size_t digits = 0;
  bool line_ended = false;  // a newline came after some digit
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) {
      if (c == '\n' && digits > 0) line_ended = true;
      continue;
    }
    if (hex_value(c) < 0)
      return fail(EINVAL,
                  fmt::format("key has a character that is neither a hex digit nor whitespace at offset {}", i));
    if (line_ended) return fail(EINVAL, "key hex digits span more than one line; a key file holds one key on one line");
    ++digits;
  }
  if (digits == 0) return fail(EINVAL, "key is empty (no hex digits)");
  if (digits % 2 != 0) return fail(EINVAL, fmt::format("key has an odd number of hex digits ({})", digits));
  const std::size_t size = digits / 2;
  if (size < kKeyMinBytes)
    return fail(EINVAL, fmt::format("key is {} bytes; at least {} are needed ({} hex digits; rpcie keygen makes one)",
                                    size, kKeyMinBytes, 2 * kKeyMinBytes));
  if (size > kKeyMaxBytes)
    return fail(EINVAL, fmt::format("key is {} bytes; at most {} are allowed", size, kKeyMaxBytes));

  auto key = Key::allocate(size);
  if (!key) return key;
  std::size_t nibble = 0;
  for (const char c : text) {
    const int v = hex_value(c);
    if (v < 0) continue;  // whitespace: the first pass allowed nothing else
    key->data_[nibble / 2] = static_cast<std::uint8_t>(key->data_[nibble / 2] | (v << (nibble % 2 == 0 ? 4 : 0)));
    ++nibble;
  }
  key->protect();
  return key;
}

Result<Key> key_load(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return fail(errno, fmt::format("cannot open key file {}", path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(errno, fmt::format("cannot stat key file {}", path));
  if (S_ISDIR(st.st_mode)) return fail(EISDIR, fmt::format("key file {} is a directory", path));
  if (!S_ISREG(st.st_mode)) return fail(EINVAL, fmt::format("key file {} is not a regular file", path));
  const uid_t self = ::geteuid();
  if (st.st_uid != self && st.st_uid != 0)
    return fail(EACCES, fmt::format("key file {} is owned by uid {}, not by this user (uid {}) or root", path,
                                    st.st_uid, self));
  if ((st.st_mode & 077) != 0)
    return fail(EACCES, fmt::format("key file {} is accessible by group or others (mode {:04o}); chmod 600 {}", path,
                                    st.st_mode & 07777, path));
  if (st.st_size > static_cast<off_t>(kKeyFileMaxBytes))
    return fail(EFBIG,
                fmt::format("key file {} is {} bytes; at most {} are allowed", path, st.st_size, kKeyFileMaxBytes));

  // One byte more than the cap, to notice a file that grew since fstat.
  char text[kKeyFileMaxBytes + 1];
  Wipe wipe(text, sizeof text);
  std::size_t size = 0;
  while (size < sizeof text) {
    ssize_t n = ::read(fd.get(), text + size, sizeof text - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, fmt::format("cannot read key file {}", path));
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  if (size > kKeyFileMaxBytes) return fail(EFBIG, fmt::format("key file {} is over {} bytes", path, kKeyFileMaxBytes));
  auto key = key_parse(std::string_view(text, size));
  if (!key) return fail(key.error().code, fmt::format("key file {}: {}", path, key.error().message));
  return key;
}

Result<void> key_generate_file(const std::string& path, bool overwrite) {
  sodium_ready();
  if (path.empty()) return fail(ENOENT, "key file path is empty");
  const std::string dir = parent_of(path);
  if (auto r = directory_ensure(dir); !r) return r;

  std::uint8_t secret[kKeyMinBytes];
  char text[2 * kKeyMinBytes + 1];  // hex digits, then '\n' where sodium_bin2hex puts its NUL
  Wipe wipe_secret(secret, sizeof secret);
  Wipe wipe_text(text, sizeof text);
  randombytes_buf(secret, sizeof secret);
  sodium_bin2hex(text, sizeof text, secret, sizeof secret);
  text[2 * kKeyMinBytes] = '\n';
  const std::string_view contents(text, sizeof text);

  if (!overwrite) {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) {
      if (errno == EEXIST) return fail(EEXIST, fmt::format("key file {} already exists; not overwriting it", path));
      return fail(errno, fmt::format("cannot create key file {}", path));
    }
    if (auto r = key_text_store(fd, contents, path); !r) {
      ::unlink(path.c_str());  // no partial key left behind
      return r;
    }
    return directory_sync(dir);
  }

  std::string temp = path + ".XXXXXX";
  Fd fd(::mkostemp(temp.data(), O_CLOEXEC));  // created 0600, in the same directory
  if (fd.get() < 0) return fail(errno, fmt::format("cannot create a temporary file next to key file {}", path));
  auto stored = key_text_store(fd, contents, temp);
  if (stored && ::rename(temp.c_str(), path.c_str()) != 0)
    stored = fail(errno, fmt::format("cannot rename {} to key file {}", temp, path));
  if (!stored) {
    ::unlink(temp.c_str());
    return stored;
  }
  return directory_sync(dir);
}

bool client_name_valid(std::string_view name) noexcept {
  if (name.empty() || name.size() > kClientNameMax) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// --- Challenge-response ----------------------------------------------------------------------

namespace {

// A value bound to one handshake (docs/auth.md): labels saying what it is for, then the
// client's name and both challenges.
void handshake_mac(const Key& key, std::initializer_list<std::string_view> labels, std::string_view client_name,
                   const Nonce& client_nonce, const Nonce& server_nonce,
                   std::span<std::uint8_t, kMacBytes> out) noexcept {
  Transcript t(key.bytes());
  for (const std::string_view label : labels) t.field(label);
  t.field(client_name);
  t.field(client_nonce);
  t.field(server_nonce);
  t.final(out);
}

}  // namespace

Nonce nonce_random() noexcept {
  sodium_ready();
  Nonce nonce;
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

Proof proof_compute(const Key& key, Role who_proves, std::string_view client_name, const Nonce& client_nonce,
                    const Nonce& server_nonce) noexcept {
  Proof proof;
  handshake_mac(key, {"proof", role_label(who_proves)}, client_name, client_nonce, server_nonce, proof);
  return proof;
}

bool proof_verify(const Key& key, Role who_proves, std::string_view client_name, const Nonce& client_nonce,
                  const Nonce& server_nonce, const Proof& proof) noexcept {
  const Proof expected = proof_compute(key, who_proves, client_name, client_nonce, server_nonce);
  return sodium_memcmp(expected.data(), proof.data(), expected.size()) == 0;
}

// --- Session key and frame MACs --------------------------------------------------------------

SessionKey::SessionKey(SessionKey&& other) noexcept : bytes_(other.bytes_) {
  sodium_memzero(other.bytes_.data(), other.bytes_.size());
}

SessionKey& SessionKey::operator=(SessionKey&& other) noexcept {
  if (this != &other) {
    bytes_ = other.bytes_;
    sodium_memzero(other.bytes_.data(), other.bytes_.size());
  }
  return *this;
}

SessionKey::~SessionKey() { sodium_memzero(bytes_.data(), bytes_.size()); }

SessionKey session_key_derive(const Key& key, std::string_view client_name, const Nonce& client_nonce,
                              const Nonce& server_nonce) noexcept {
  SessionKey session;
  handshake_mac(key, {"session-key"}, client_name, client_nonce, server_nonce, session.bytes_);
  return session;
}

namespace {

// The one definition of a frame's MAC (docs/auth.md, "Frame MAC"), for seal and open alike.
void frame_mac_compute(const SessionKey& key, Role sender, std::uint64_t sequence, std::span<const std::uint8_t> frame,
                       std::span<std::uint8_t, kMacBytes> mac) noexcept {
  Transcript t(key.bytes());
  t.field("frame");
  t.field(role_label(sender));
  t.field_u64(sequence);
  t.field(frame);
  t.final(mac);
}

}  // namespace

void FrameMac::seal(std::span<const std::uint8_t> frame, std::span<std::uint8_t, kMacBytes> mac) noexcept {
  frame_mac_compute(key_, self_, send_sequence_, frame, mac);
  ++send_sequence_;
}

bool FrameMac::open(std::span<const std::uint8_t> frame, std::span<const std::uint8_t> mac) noexcept {
  if (mac.size() != kMacBytes || frame.size() > UINT32_MAX) return false;
  std::array<std::uint8_t, kMacBytes> expected;
  frame_mac_compute(key_, role_peer(self_), receive_sequence_, frame, expected);
  if (sodium_memcmp(expected.data(), mac.data(), kMacBytes) != 0) return false;
  ++receive_sequence_;
  return true;
}

}  // namespace rpcie::auth

namespace rpcie::auth {

// --- Data-path keys --------------------------------------------------------------------------

DataKeys::DataKeys(DataKeys&& other) noexcept : send(other.send), receive(other.receive) {
  sodium_memzero(other.send.data(), other.send.size());
  sodium_memzero(other.receive.data(), other.receive.size());
}

DataKeys& DataKeys::operator=(DataKeys&& other) noexcept {
  if (this != &other) {
    send = other.send;
    receive = other.receive;
    sodium_memzero(other.send.data(), other.send.size());
    sodium_memzero(other.receive.data(), other.receive.size());
  }
  return *this;
}

DataKeys::~DataKeys() {
  sodium_memzero(send.data(), send.size());
  sodium_memzero(receive.data(), receive.size());
}

namespace {

void data_key_compute(const SessionKey& session, Role sender, std::span<std::uint8_t, kDataKeyBytes> out) noexcept {
  Transcript t(session.bytes());
  t.field("data-key");
  t.field(role_label(sender));
  t.final(out);
}

}  // namespace

DataKeys data_keys_derive(const SessionKey& session, Role self) noexcept {
  DataKeys keys;
  data_key_compute(session, self, keys.send);
  data_key_compute(session, role_peer(self), keys.receive);
  return keys;
}

HelloKey::HelloKey(HelloKey&& other) noexcept : bytes(other.bytes) {
  sodium_memzero(other.bytes.data(), other.bytes.size());
}

HelloKey::~HelloKey() { sodium_memzero(bytes.data(), bytes.size()); }

HelloKey hello_key_derive(const SessionKey& session) noexcept {
  HelloKey key;
  Transcript t(session.bytes());
  t.field("hello-key");
  t.final(key.bytes);
  return key;
}

}  // namespace rpcie::auth
