// The control socket between the rpcie CLI and rpcie-hostd: a UNIX stream socket (a path
// name, default /run/rpcie.sock, access by file mode). One request per connection: the
// client writes one JSON object on one line, hostd answers with one JSON object on one line
// and closes. Requests ({"op": ...}):
//   {"op":"attach","host":H,"port":P,"export":E,"dma_window":BYTES,"data_path":"sealed|open|auto"}
//       (port, dma_window and data_path optional; data_path absent: hostd's --data-path)
//       -> {"device":"rpcie0","path":"/dev/rpcie0","sysfs":"<mount>/pci/devices/<bdf>"}
//   {"op":"detach","device":"rpcie0"} | {"op":"detach","all":true} -> {"detached":[names]}
//   {"op":"status"} -> {"attachments":[{...}]}   (fields in docs/rpcie-hostd.md)
//   {"op":"mmio_ring","bdf":B} -> {"ring_bytes":N,"timeout_ms":T} with a memfd (SCM_RIGHTS); the
//       connection then stays open for the ring's life (librpcie-mmio.so; docs/rpcie-hostd.md)
// A failed request is answered {"error":TEXT,"errno":N}. Lines are at most kMaxLine bytes.
// Thread-safety: the functions here keep no state.
//
// Why in core: it is the contract between two programs of different folders, the CLI
// (tools/) and hostd (frontend/), and dependencies flow only from those folders into core;
// neither may include the other's headers.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie::control {

inline constexpr const char* kDefaultSocket = "/run/rpcie.sock";
inline constexpr std::size_t kMaxLine = 1 << 20;

// `flag` if not empty, else $RPCIE_CONTROL if set and not empty, else kDefaultSocket.
std::string socket_path_resolve(std::string_view flag);

// Sends `request` and returns the answer. Errors: ENOENT / ECONNREFUSED (no hostd listens:
// the message says so), EACCES (socket mode), ETIMEDOUT, EPROTO (not JSON). An answer
// carrying "error" is returned as that error (its errno, EIO when absent).
Result<nlohmann::json> call(const std::string& socket_path, const nlohmann::json& request, Deadline deadline);

// An answer line as call() reads it: EPROTO when it is not a JSON object; an object with
// "error" is that error (its "errno" when a positive integer, else EIO; its text when a
// string); else the object.
Result<nlohmann::json> answer_parse(std::string_view line);

// Line I/O on a connected stream socket, for both ends. line_read: up to '\n' (not
// included), EPROTO beyond kMaxLine, ECONNRESET at end of stream before a newline.
Result<std::string> line_read(int fd, Deadline deadline);
Result<void> line_write(int fd, std::string_view line, Deadline deadline);

// `message` as one line of JSON, for either end to send. Never throws: a string that is
// not valid UTF-8 (a text cut inside a character, bytes a peer sent) has its bad bytes
// replaced by U+FFFD instead of making nlohmann::json::dump() throw.
std::string json_line(const nlohmann::json& message);

// The error answer for `e`.
nlohmann::json error_answer(const Error& e);

}  // namespace rpcie::control
