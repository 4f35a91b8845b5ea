// Pre-shared-key authentication: key text and key files (format, permissions, generation),
// challenge-response proofs, session keys and per-frame MACs, and the known-answer vectors
// that docs/auth.md publishes for second implementations.
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../support/skip.hpp"
#include "../../support/temp_dir.hpp"
#include "rpcie/auth.hpp"

namespace auth = rpcie::auth;
namespace fs = std::filesystem;
using auth::FrameMac;
using auth::Key;
using auth::Nonce;
using auth::Proof;
using auth::Role;

namespace {

// 32 bytes 00 01 .. 1f: the key of the known-answer vectors.
constexpr std::string_view kHex32 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

std::string hex_repeat(std::size_t bytes, std::string_view pair = "5a") {
  std::string s;
  for (std::size_t i = 0; i < bytes; ++i) s += pair;
  return s;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (auto b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

Key key_of(std::string_view hex) {
  auto key = auth::key_parse(hex);
  REQUIRE_MESSAGE(key.has_value(), key.error().describe());
  return std::move(*key);
}

Nonce nonce_filled(std::uint8_t value) {
  Nonce n;
  n.fill(value);
  return n;
}

// A fresh directory under the system temp dir, removed with everything in it.
using rpcie::test::TempDir;

void file_write(const std::string& path, std::string_view text, mode_t mode) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    REQUIRE(out.good());
  }
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::string file_read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Sets the process umask for the scope (tests are single-threaded here).
struct UmaskScope {
  mode_t old;
  explicit UmaskScope(mode_t m) : old(::umask(m)) {}
  ~UmaskScope() { ::umask(old); }
};

struct Frame {
  std::vector<std::uint8_t> bytes;
  std::array<std::uint8_t, auth::kMacBytes> mac{};
};

Frame seal(FrameMac& sender, std::string_view text) {
  Frame f{std::vector<std::uint8_t>(text.begin(), text.end()), {}};
  sender.seal(f.bytes, f.mac);
  return f;
}

bool open(FrameMac& receiver, const Frame& f) { return receiver.open(f.bytes, f.mac); }

// Both ends of one connection after a successful handshake.
struct Pair {
  FrameMac client;
  FrameMac server;
};
Pair pair_make(const Key& key, const Nonce& cn = nonce_filled(1), const Nonce& sn = nonce_filled(2)) {
  return {FrameMac(auth::session_key_derive(key, "alice", cn, sn), Role::client),
          FrameMac(auth::session_key_derive(key, "alice", cn, sn), Role::server)};
}

}  // namespace

// --- key_parse -------------------------------------------------------------------------------

TEST_CASE("key_parse decodes a 32-byte and a 64-byte key exactly") {
  Key k32 = key_of(kHex32);
  REQUIRE(k32.bytes().size() == 32);
  for (std::size_t i = 0; i < 32; ++i) CHECK(k32.bytes()[i] == i);
  Key k64 = key_of(hex_repeat(64, "c3"));
  CHECK(k64.bytes().size() == 64);
  CHECK(to_hex(k64.bytes()) == hex_repeat(64, "c3"));
}

TEST_CASE("key_parse ignores whitespace anywhere on the line, even inside a byte") {
  const std::string plain = std::string(kHex32);
  const std::vector<std::string> spaced = {
      plain + "\n",
      "  \t" + plain + " \r\n\n",
      "\n\n" + plain,                                                             // leading blank lines
      plain.substr(0, 10) + " " + plain.substr(10, 1) + "\t" + plain.substr(11),  // inside a byte
      "0001 0203 0405 0607 0809 0a0b 0c0d 0e0f 1011 1213 1415 1617 1819 1a1b 1c1d 1e1f\r\n",
  };
  for (const auto& text : spaced) {
    CAPTURE(text);
    auto key = auth::key_parse(text);
    REQUIRE_MESSAGE(key.has_value(), key.error().describe());
    CHECK(to_hex(key->bytes()) == plain);
  }
}

TEST_CASE("key_parse accepts upper-case hex as the same key") {
  Key lower = key_of(hex_repeat(32, "ab"));
  Key upper = key_of(hex_repeat(32, "AB"));
  Key mixed = key_of(hex_repeat(32, "aB"));
  CHECK(to_hex(upper.bytes()) == to_hex(lower.bytes()));
  CHECK(to_hex(mixed.bytes()) == to_hex(lower.bytes()));
}

TEST_CASE("key_parse accepts exactly kKeyMaxBytes bytes") {
  CHECK(key_of(hex_repeat(auth::kKeyMaxBytes)).bytes().size() == auth::kKeyMaxBytes);
}

TEST_CASE("key_parse refuses malformed keys with EINVAL and never quotes the key") {
  // A recognisable secret so a leak into a message shows.
  const std::string secret = hex_repeat(32, "d7");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {" \n\t\r\n", "empty"},
      {secret + "d", "odd number of hex digits (65)"},
      {secret.substr(0, 20) + "g" + secret.substr(20), "offset 20"},
      {secret.substr(0, 30) + "-" + secret.substr(30), "offset 30"},
      {"0x" + secret, "offset 1"},
      {hex_repeat(31, "d7"), "31 bytes"},
      {hex_repeat(auth::kKeyMaxBytes + 1, "d7"), "at most 128"},
      {secret.substr(0, 32) + "\n" + secret.substr(32), "more than one line"},
      {secret + "\n" + secret + "\n", "more than one line"},
  };
  for (const auto& entry : bad) {
    const std::string& text = entry.first;  // not a structured binding: clang 14 cannot CAPTURE one
    const std::string& why = entry.second;
    CAPTURE(text);
    auto key = auth::key_parse(text);
    REQUIRE_FALSE(key.has_value());
    CHECK(key.error().code == EINVAL);
    CHECK_MESSAGE(key.error().message.find(why) != std::string::npos, key.error().message);
    CHECK(key.error().message.find("d7d7") == std::string::npos);
  }
}

TEST_CASE("Key::create copies 32..128 bytes, refuses other sizes, and a move leaves the source empty") {
  std::vector<std::uint8_t> raw(40, 0x11);
  auto key = Key::create(raw);
  REQUIRE(key.has_value());
  CHECK(key->bytes().size() == 40);
  CHECK(Key::create(std::vector<std::uint8_t>(31, 1)).error().code == EINVAL);
  CHECK(Key::create(std::vector<std::uint8_t>(129, 1)).error().code == EINVAL);

  Key moved = std::move(*key);
  CHECK(moved.bytes().size() == 40);
  CHECK(key->bytes().empty());
  Key other = key_of(kHex32);
  other = std::move(moved);
  CHECK(other.bytes().size() == 40);
  CHECK(other.bytes()[39] == 0x11);
}

// --- key_load --------------------------------------------------------------------------------

TEST_CASE("key_load reads a 0600 (or 0400) key file") {
  TempDir dir;
  const auto path = dir.file("psk");
  file_write(path, std::string(kHex32) + "\n", 0600);
  auto key = auth::key_load(path);
  REQUIRE_MESSAGE(key.has_value(), key.error().describe());
  CHECK(to_hex(key->bytes()) == kHex32);
  REQUIRE(::chmod(path.c_str(), 0400) == 0);
  CHECK(auth::key_load(path).has_value());
}

TEST_CASE("key_load refuses a key file that group or others may access, saying how to fix it") {
  TempDir dir;
  const auto path = dir.file("psk");
  for (mode_t mode : {0640, 0604, 0644, 0660, 0620, 0602, 0610, 0601, 0666}) {
    CAPTURE(mode);
    file_write(path, kHex32, mode);
    auto key = auth::key_load(path);
    REQUIRE_FALSE(key.has_value());
    CHECK(key.error().code == EACCES);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    CHECK(key.error().message ==
          "key file " + path + " is accessible by group or others (mode " + octal + "); chmod 600 " + path);
  }
}

TEST_CASE("key_load reports a missing file with ENOENT and its path") {
  TempDir dir;
  auto key = auth::key_load(dir.file("nope"));
  REQUIRE_FALSE(key.has_value());
  CHECK(key.error().code == ENOENT);
  CHECK(key.error().message.find(dir.file("nope")) != std::string::npos);
}

TEST_CASE("key_load refuses a directory (EISDIR) and a FIFO (EINVAL, without blocking)") {
  TempDir dir;
  auto key = auth::key_load(dir.path);
  REQUIRE_FALSE(key.has_value());
  CHECK(key.error().code == EISDIR);

  const auto fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  key = auth::key_load(fifo);
  REQUIRE_FALSE(key.has_value());
  CHECK(key.error().code == EINVAL);
}

TEST_CASE("key_load follows a symbolic link and checks the file it leads to") {
  TempDir dir;
  const auto target = dir.file("psk.2024");
  const auto link = dir.file("psk");
  file_write(target, kHex32, 0600);
  REQUIRE(::symlink("psk.2024", link.c_str()) == 0);
  auto key = auth::key_load(link);
  REQUIRE_MESSAGE(key.has_value(), key.error().describe());
  CHECK(to_hex(key->bytes()) == kHex32);

  SUBCASE("the target's mode counts, not the link's") {
    REQUIRE(::chmod(target.c_str(), 0644) == 0);
    auto refused = auth::key_load(link);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == EACCES);
  }
  SUBCASE("a dangling link is ENOENT") {
    REQUIRE(::unlink(target.c_str()) == 0);
    auto refused = auth::key_load(link);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == ENOENT);
  }
}

TEST_CASE("key_load accepts kKeyFileMaxBytes bytes and refuses one more with EFBIG") {
  TempDir dir;
  const auto path = dir.file("psk");
  std::string text = std::string(kHex32) + "\n";
  text += std::string(auth::kKeyFileMaxBytes - text.size(), ' ');
  file_write(path, text, 0600);
  CHECK(auth::key_load(path).has_value());
  file_write(path, text + " ", 0600);
  auto key = auth::key_load(path);
  REQUIRE_FALSE(key.has_value());
  CHECK(key.error().code == EFBIG);
}

TEST_CASE("key_load reports bad content with EINVAL and the path, without quoting it") {
  TempDir dir;
  const auto path = dir.file("psk");
  file_write(path, hex_repeat(16, "e9") + "\n", 0600);
  auto key = auth::key_load(path);
  REQUIRE_FALSE(key.has_value());
  CHECK(key.error().code == EINVAL);
  CHECK(key.error().message.find(path) != std::string::npos);
  CHECK(key.error().message.find("16 bytes") != std::string::npos);
  CHECK(key.error().message.find("e9e9") == std::string::npos);
}

TEST_CASE("key_load refuses a key file owned by another user") {
  if (::geteuid() != 0) {
    rpcie::test::skip("needs root to give a file to another user: key owner check not run");
    return;
  }
  TempDir dir;
  const auto path = dir.file("psk");
  file_write(path, kHex32, 0600);
  REQUIRE(::chown(path.c_str(), 12345, 12345) == 0);
  auto key = auth::key_load(path);
  REQUIRE_FALSE(key.has_value());
  CHECK(key.error().code == EACCES);
  CHECK(key.error().message.find("owned by uid 12345") != std::string::npos);
}

// --- key_generate_file -----------------------------------------------------------------------

TEST_CASE("key_generate_file writes 32 random bytes as one hex line with mode exactly 0600") {
  TempDir dir;
  for (mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0277}}) {
    CAPTURE(mask);
    UmaskScope umask(mask);
    const auto path = dir.file("psk" + std::to_string(mask));
    REQUIRE(auth::key_generate_file(path, false).has_value());
    CHECK(mode_of(path) == 0600);
    const std::string text = file_read(path);
    CHECK(text.size() == 65);
    CHECK(text.back() == '\n');
    auto key = auth::key_load(path);
    REQUIRE_MESSAGE(key.has_value(), key.error().describe());
    CHECK(key->bytes().size() == 32);
  }
}

TEST_CASE("two generated keys differ") {
  TempDir dir;
  REQUIRE(auth::key_generate_file(dir.file("a"), false).has_value());
  REQUIRE(auth::key_generate_file(dir.file("b"), false).has_value());
  CHECK(file_read(dir.file("a")) != file_read(dir.file("b")));
}

TEST_CASE("key_generate_file without overwrite refuses an existing file with EEXIST and leaves it alone") {
  TempDir dir;
  const auto path = dir.file("psk");
  REQUIRE(auth::key_generate_file(path, false).has_value());
  const std::string before = file_read(path);
  auto again = auth::key_generate_file(path, false);
  REQUIRE_FALSE(again.has_value());
  CHECK(again.error().code == EEXIST);
  CHECK(file_read(path) == before);

  SUBCASE("a dangling symbolic link counts as existing and its target is not created") {
    const auto link = dir.file("link");
    REQUIRE(::symlink("elsewhere", link.c_str()) == 0);
    auto r = auth::key_generate_file(link, false);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == EEXIST);
    CHECK_FALSE(fs::exists(dir.file("elsewhere")));
  }
}

TEST_CASE("key_generate_file with overwrite replaces the key, keeps 0600 and leaves no temporary file") {
  TempDir dir;
  const auto path = dir.file("psk");
  file_write(path, kHex32, 0644);  // an old, too-open key
  REQUIRE(auth::key_generate_file(path, true).has_value());
  CHECK(mode_of(path) == 0600);
  const std::string first = file_read(path);
  CHECK(first != kHex32);
  REQUIRE(auth::key_generate_file(path, true).has_value());
  CHECK(mode_of(path) == 0600);
  CHECK(file_read(path) != first);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);

  SUBCASE("a symbolic link is replaced by the file; its target is untouched") {
    const auto target = dir.file("target");
    const auto link = dir.file("link");
    file_write(target, kHex32, 0600);
    REQUIRE(::symlink("target", link.c_str()) == 0);
    REQUIRE(auth::key_generate_file(link, true).has_value());
    CHECK(fs::is_regular_file(fs::symlink_status(link)));
    CHECK(file_read(target) == kHex32);
  }
}

TEST_CASE("key_generate_file creates a missing parent directory with mode 0700, but not a whole path") {
  TempDir dir;
  UmaskScope umask(022);
  const auto path = dir.file("rpcie/psk");
  REQUIRE(auth::key_generate_file(path, false).has_value());
  CHECK(mode_of(dir.file("rpcie")) == 0700);
  CHECK(auth::key_load(path).has_value());

  auto deep = auth::key_generate_file(dir.file("a/b/psk"), false);
  REQUIRE_FALSE(deep.has_value());
  CHECK(deep.error().code == ENOENT);

  file_write(dir.file("plain"), "x", 0600);
  auto not_dir = auth::key_generate_file(dir.file("plain/psk"), false);
  REQUIRE_FALSE(not_dir.has_value());
  CHECK(not_dir.error().code == ENOTDIR);
}

// --- client names and nonces -----------------------------------------------------------------

TEST_CASE("client_name_valid takes 1..64 characters of [A-Za-z0-9_.@-]") {
  CHECK(auth::client_name_valid("alice"));
  CHECK(auth::client_name_valid("node-07.rack_2@lab"));
  CHECK(auth::client_name_valid(std::string(64, 'x')));
  CHECK_FALSE(auth::client_name_valid(""));
  CHECK_FALSE(auth::client_name_valid(std::string(65, 'x')));
  for (std::string_view bad :
       std::initializer_list<std::string_view>{"a b", "a/b", "a:b", "a\nb", "é", std::string_view("a\0b", 3)}) {
    CAPTURE(bad);
    CHECK_FALSE(auth::client_name_valid(bad));
  }
}

TEST_CASE("nonce_random gives a different nonce each time") { CHECK(auth::nonce_random() != auth::nonce_random()); }

// --- proofs ----------------------------------------------------------------------------------

TEST_CASE("a proof verifies only with the same key, role, name and nonces") {
  const Key key = key_of(kHex32);
  const Key other_key = key_of(hex_repeat(32, "01"));
  const Nonce cn = nonce_filled(0xaa), sn = nonce_filled(0xbb);
  const Proof proof = auth::proof_compute(key, Role::client, "alice", cn, sn);
  CHECK(auth::proof_verify(key, Role::client, "alice", cn, sn, proof));

  Nonce cn_flipped = cn, sn_flipped = sn;
  cn_flipped[31] ^= 1;
  sn_flipped[0] ^= 0x80;
  Proof proof_flipped = proof;
  proof_flipped[17] ^= 4;
  CHECK_FALSE(auth::proof_verify(other_key, Role::client, "alice", cn, sn, proof));
  CHECK_FALSE(auth::proof_verify(key, Role::server, "alice", cn, sn, proof));
  CHECK_FALSE(auth::proof_verify(key, Role::client, "alicf", cn, sn, proof));
  CHECK_FALSE(auth::proof_verify(key, Role::client, "alice", cn_flipped, sn, proof));
  CHECK_FALSE(auth::proof_verify(key, Role::client, "alice", cn_flipped, sn_flipped, proof));
  CHECK_FALSE(auth::proof_verify(key, Role::client, "alice", cn, sn_flipped, proof));
  CHECK_FALSE(auth::proof_verify(key, Role::client, "alice", sn, cn, proof));  // nonces swapped
  CHECK_FALSE(auth::proof_verify(key, Role::client, "alice", cn, sn, proof_flipped));
}

TEST_CASE("the server's proof differs from the client's, so neither can be reflected as the other") {
  const Key key = key_of(kHex32);
  const Nonce cn = nonce_filled(3), sn = nonce_filled(4);
  const Proof client = auth::proof_compute(key, Role::client, "alice", cn, sn);
  const Proof server = auth::proof_compute(key, Role::server, "alice", cn, sn);
  CHECK(client != server);
  CHECK_FALSE(auth::proof_verify(key, Role::client, "alice", cn, sn, server));
  CHECK_FALSE(auth::proof_verify(key, Role::server, "alice", cn, sn, client));
}

TEST_CASE("the name is length-prefixed: moving bytes between name and label changes the proof") {
  const Key key = key_of(kHex32);
  const Nonce cn = nonce_filled(5), sn = nonce_filled(6);
  CHECK(auth::proof_compute(key, Role::client, "ab", cn, sn) != auth::proof_compute(key, Role::client, "a", cn, sn));
  CHECK(auth::proof_compute(key, Role::client, "", cn, sn) != auth::proof_compute(key, Role::client, "x", cn, sn));
}

// --- session keys ----------------------------------------------------------------------------

TEST_CASE("session keys depend on every input and differ from the proofs") {
  const Key key = key_of(kHex32);
  const Key other_key = key_of(hex_repeat(32, "01"));
  const Nonce cn = nonce_filled(7), sn = nonce_filled(8), n9 = nonce_filled(9);
  const auto base = to_hex(auth::session_key_derive(key, "alice", cn, sn).bytes());
  CHECK(to_hex(auth::session_key_derive(key, "alice", cn, sn).bytes()) == base);
  CHECK(to_hex(auth::session_key_derive(key, "alice", n9, sn).bytes()) != base);
  CHECK(to_hex(auth::session_key_derive(key, "alice", cn, n9).bytes()) != base);
  CHECK(to_hex(auth::session_key_derive(key, "bob", cn, sn).bytes()) != base);
  CHECK(to_hex(auth::session_key_derive(other_key, "alice", cn, sn).bytes()) != base);
  CHECK(to_hex(auth::proof_compute(key, Role::client, "alice", cn, sn)) != base);
  CHECK(to_hex(auth::proof_compute(key, Role::server, "alice", cn, sn)) != base);
}

TEST_CASE("a moved-from session key is wiped") {
  auto a = auth::session_key_derive(key_of(kHex32), "alice", nonce_filled(1), nonce_filled(2));
  const auto before = to_hex(a.bytes());
  auto b = std::move(a);
  CHECK(to_hex(b.bytes()) == before);
  CHECK(to_hex(a.bytes()) == std::string(64, '0'));  // NOLINT(bugprone-use-after-move): checking the wipe
}

// --- frame MACs ------------------------------------------------------------------------------

TEST_CASE("frames sealed by one side open in order on the other, both ways") {
  const Key key = key_of(kHex32);
  auto [client, server] = pair_make(key);
  for (int i = 0; i < 5; ++i) {
    CHECK(open(server, seal(client, "request " + std::to_string(i))));
    CHECK(open(client, seal(server, "reply " + std::to_string(i))));
  }
  CHECK(open(server, seal(client, "")));  // an empty frame is a frame too
  CHECK(client.send_sequence() == 6);
  CHECK(server.receive_sequence() == 6);
  CHECK(server.send_sequence() == 5);
  CHECK(client.receive_sequence() == 5);
}

TEST_CASE("a frame with one byte changed, or a changed or short MAC, does not open") {
  const Key key = key_of(kHex32);
  auto [client, server] = pair_make(key);
  Frame f = seal(client, "mmio_write bar0 0x10");
  SUBCASE("frame byte") {
    f.bytes[3] ^= 1;
    CHECK_FALSE(open(server, f));
  }
  SUBCASE("frame truncated") {
    f.bytes.pop_back();
    CHECK_FALSE(open(server, f));
  }
  SUBCASE("MAC byte") {
    f.mac[31] ^= 0x40;
    CHECK_FALSE(open(server, f));
  }
  SUBCASE("MAC too short") { CHECK_FALSE(server.open(f.bytes, std::span<const std::uint8_t>(f.mac).first(31))); }
  CHECK(server.receive_sequence() == 0);
}

TEST_CASE("a replayed or reordered frame does not open") {
  const Key key = key_of(kHex32);
  auto [client, server] = pair_make(key);
  Frame f0 = seal(client, "zero");
  Frame f1 = seal(client, "one");
  Frame f2 = seal(client, "two");
  CHECK_FALSE(open(server, f1));  // ahead of its turn
  CHECK(open(server, f0));
  CHECK_FALSE(open(server, f0));  // replay
  CHECK_FALSE(open(server, f2));  // f1 skipped
  CHECK(open(server, f1));
  CHECK(open(server, f2));
  CHECK_FALSE(open(server, f2));
}

TEST_CASE("a forged frame is dropped and the next genuine frame still opens") {
  const Key key = key_of(kHex32);
  auto [client, server] = pair_make(key);
  CHECK(open(server, seal(client, "first")));
  Frame forged{std::vector<std::uint8_t>{'a', 't', 't', 'a', 'c', 'k'}, {}};
  forged.mac.fill(0x42);
  CHECK_FALSE(open(server, forged));
  CHECK(server.receive_sequence() == 1);
  CHECK(open(server, seal(client, "second")));
}

TEST_CASE("a frame sealed by the client cannot be reflected back to the client") {
  const Key key = key_of(kHex32);
  auto [client, server] = pair_make(key);
  Frame f = seal(client, "attach 0000:03:00.0");
  CHECK_FALSE(open(client, f));  // the client expects server->client frames, sequence 0
  CHECK(open(server, f));
  Frame g = seal(server, "ok");
  CHECK_FALSE(open(server, g));
  CHECK(open(client, g));
}

TEST_CASE("frames of another connection (other nonces) do not open") {
  const Key key = key_of(kHex32);
  auto one = pair_make(key, nonce_filled(1), nonce_filled(2));
  auto two = pair_make(key, nonce_filled(1), nonce_filled(3));
  CHECK_FALSE(open(two.server, seal(one.client, "hello")));
}

TEST_CASE("one thread may seal while another opens on the same FrameMac") {
  const Key key = key_of(kHex32);
  Pair p = pair_make(key);
  FrameMac& client = p.client;
  FrameMac& server = p.server;
  constexpr int kFrames = 200;
  std::vector<Frame> to_client;
  for (int i = 0; i < kFrames; ++i) to_client.push_back(seal(server, "s" + std::to_string(i)));
  std::vector<Frame> to_server(kFrames);
  int opened = 0;
  std::thread receiver([&] {
    for (const auto& f : to_client) opened += open(client, f) ? 1 : 0;
  });
  for (int i = 0; i < kFrames; ++i) to_server[i] = seal(client, "c" + std::to_string(i));
  receiver.join();
  CHECK(opened == kFrames);
  for (const auto& f : to_server) CHECK(open(server, f));
}

// --- known-answer vectors (docs/auth.md, "Test vectors") --------------------------------------

TEST_CASE("proofs, session key and frame MACs match the published test vectors") {
  const Key key = key_of(kHex32);
  const Nonce cn = nonce_filled(0xaa), sn = nonce_filled(0xbb);
  CHECK(to_hex(auth::proof_compute(key, Role::client, "alice", cn, sn)) ==
        "06b448fc6bbcd043fac179d1bf25fc51f7c14d9b7e280ee4879551bd1a11eb93");
  CHECK(to_hex(auth::proof_compute(key, Role::server, "alice", cn, sn)) ==
        "abcd701d46391a7d67ad3ee6b767c6d283494db3e4d12d2db6e31fd07d7335ba");
  CHECK(to_hex(auth::session_key_derive(key, "alice", cn, sn).bytes()) ==
        "a1a14ce6eb1b937f39df65c548efbaeef620caa052ff54bc2f255a53ecae3d41");

  FrameMac client(auth::session_key_derive(key, "alice", cn, sn), Role::client);
  FrameMac server(auth::session_key_derive(key, "alice", cn, sn), Role::server);
  CHECK(to_hex(seal(client, "hello").mac) == "73291aada7455f5f466d71c91c47aba4e9b31ede687b51b055f4c2c7828e6b41");
  CHECK(to_hex(seal(client, "").mac) == "8048bee1fb2d2a0f06d273ddd37e3ff54bdc6d636019ddf1ed15925cfc395a49");
  CHECK(to_hex(seal(server, "hello").mac) == "99489c6d372653dee42831e2a593bff0c637df61958a17e9d414ee67495532b4");
}
