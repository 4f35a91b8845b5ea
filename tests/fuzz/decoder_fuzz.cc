// libFuzzer target: proto::message_decode on arbitrary bytes.
//
// Checks, beyond "no crash, no out-of-bounds read, no UB, no leak" (ASan/UBSan):
//  - a failed decode reports one of the documented error codes (EPROTO, EMSGSIZE,
//    EPROTONOSUPPORT);
//  - a successful decode is canonical: re-encoding the decoded message with the decoded
//    request_id gives back exactly the input bytes, message_encoded_size() agrees, the
//    variant alternative matches the header type, and encoding into a buffer one byte too
//    small fails with EMSGSIZE.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "rpcie/protocol.hpp"

namespace {

using namespace rpcie;

[[noreturn]] void die(const char* what, const char* detail) {
  std::fprintf(stderr, "decoder_fuzz: invariant violated: %s (%s)\n", what, detail);
  std::abort();
}

void check(bool ok, const char* what, const char* detail = "") {
  if (!ok) die(what, detail);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> input(data, size);
  auto decoded = proto::message_decode(input);
  if (!decoded) {
    const int code = decoded.error().code;
    check(decoded.error().domain == ErrorDomain::posix, "decode error outside the posix domain",
          decoded.error().message.c_str());
    check(code == EPROTO || code == EMSGSIZE || code == EPROTONOSUPPORT, "undocumented decode error code",
          decoded.error().message.c_str());
    return 0;
  }

  const proto::Decoded& d = *decoded;
  const char* name = proto::msg_type_name(d.header.type);
  check(proto::message_type(d.message) == d.header.type, "variant alternative disagrees with header type", name);
  check(d.header.version == proto::kVersion, "accepted a foreign version", name);
  check((d.header.flags & ~proto::kFlagsKnown) == 0, "accepted unknown header flags", name);
  check(d.header.payload_length == size - proto::kHeaderSize, "payload_length disagrees with the size", name);

  const std::size_t expected_size = proto::message_encoded_size(d.message);
  check(expected_size == size, "message_encoded_size differs from the accepted input's size", name);

  auto encoded = proto::message_encode(d.message, d.header.request_id);
  if (!encoded) die("encoder refuses a message the decoder accepted", encoded.error().message.c_str());
  check(encoded->size() == size, "re-encoded size differs from the input", name);
  // The encoder never sets the MAC flag (the frame layer does): compare with it cleared.
  std::vector<std::uint8_t> canonical(data, data + size);
  canonical[6] = static_cast<std::uint8_t>(canonical[6] & ~proto::kFlagMac);
  check(std::memcmp(encoded->data(), canonical.data(), size) == 0, "re-encoding is not byte-identical (non-canonical)",
        name);

  // The span overload: exact buffer works, one byte short fails with EMSGSIZE.
  std::vector<std::uint8_t> exact(size);
  auto n = proto::message_encode(d.message, d.header.request_id, exact);
  check(n.has_value() && *n == size, "span encode into an exact buffer failed", name);
  std::vector<std::uint8_t> shorter(size - 1);
  auto s = proto::message_encode(d.message, d.header.request_id, shorter);
  check(!s.has_value() && s.error().code == EMSGSIZE, "encode into a short buffer did not fail with EMSGSIZE", name);
  return 0;
}
