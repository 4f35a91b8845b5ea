// libFuzzer target: both ends of the control socket (rpcie/control.hpp) on one line of
// JSON each:
//  - hostd's: ControlServer::request_answer, with a handler that parses attach requests
//    with the real attach_request_parse (detach, status and mmio_ring need a FUSE tree and
//    attached devices: answered "unknown op" here);
//  - the CLI's: control::answer_parse (what call() makes of hostd's line) and, for an
//    object it returns, control_answer_print for attach, detach and status, text and JSON.
//
// Input: one byte of control (bit 0: the handler throws a JSON type error, as a handler
// that reads a field of the wrong type would; bits 1-2: the page-size multiple of the
// window cap), then the line.
//
// Checks, beyond the sanitizers' (and that no exception escapes):
//  - every answer is a JSON object; an error answer has a string "error" and an integer
//    "errno" > 0; a request that is not an object with a string "op" never reaches the
//    handler and is EINVAL;
//  - an accepted attach has a host and export that pass the name checks, a port 1-65535
//    and a window that is a positive page multiple no larger than the cap;
//  - answer_parse returns an object, or an error with a code > 0;
//  - printing an answer never throws, whatever its fields hold.
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

#include "attach_request.hpp"
#include "control_server.hpp"
#include "control_text.hpp"
#include "dev_links.hpp"
#include "fuzz_check.hpp"
#include "rpcie/control.hpp"

namespace {

using namespace rpcie;
using nlohmann::json;

void check(bool ok, const char* what, const std::string& detail = "") {
  if (!ok) fuzz::die("control_fuzz", what, detail);
}

void error_answer_check(const json& a) {
  check(a.is_object(), "an answer is not a JSON object", control::json_line(a));
  if (!a.contains("error")) return;
  check(a["error"].is_string(), "an error answer without a string \"error\"", control::json_line(a));
  check(a.contains("errno") && a["errno"].is_number_integer() && a["errno"].get<long long>() > 0,
        "an error answer without a positive integer \"errno\"", control::json_line(a));
}

void hostd_side(std::string_view line, std::uint8_t control) {
  const long page = ::sysconf(_SC_PAGESIZE);
  hostd::AttachPolicy policy;
  policy.window_default = static_cast<std::size_t>(page);
  policy.window_max = static_cast<std::size_t>(page) * (1u + ((control >> 1) & 3u));
  bool reached = false;
  const hostd::ControlServer::Handler handler = [&](const json& r, const ucred&) -> hostd::ControlServer::Reply {
    reached = true;
    check(r.is_object() && r.contains("op") && r["op"].is_string(), "the handler got a request without a string op");
    if (control & 1) throw json::type_error::create(302, "type must be string, but is number", nullptr);
    if (r["op"].get<std::string>() != "attach") return {.answer = {{"error", "unknown op"}, {"errno", EINVAL}}};
    auto p = hostd::attach_request_parse(r, policy);
    if (!p) {
      check(p.error().code == EINVAL, "attach refused with a code other than EINVAL", p.error().message);
      return {.answer = control::error_answer(p.error())};
    }
    check(hostd::host_name_check(p->host).has_value(), "attach accepted a bad host", p->host);
    check(hostd::export_name_check(p->export_name).has_value(), "attach accepted a bad export name", p->export_name);
    check(p->port >= 1, "attach accepted port 0");
    check(p->window_size > 0 && p->window_size % static_cast<std::size_t>(page) == 0 &&
              p->window_size <= policy.window_max,
          "attach accepted a window that is not a page multiple within the cap", std::to_string(p->window_size));
    return {.answer = {{"host", p->host}, {"port", p->port}, {"export", p->export_name}}};
  };
  const ucred peer{.pid = ::getpid(), .uid = ::getuid(), .gid = ::getgid()};
  auto reply = hostd::ControlServer::request_answer(line, peer, handler);
  error_answer_check(reply.answer);
  if (!reached) {
    check(reply.answer.contains("error") && reply.answer["errno"] == EINVAL,
          "a request refused before the handler is not EINVAL", control::json_line(reply.answer));
  }
  check(reply.fds.empty() && !reply.keep, "a plain answer carries descriptors or keeps the connection");
  (void)control::json_line(reply.answer);  // the line serve() sends
}

void cli_side(std::string_view line) {
  static std::FILE* sink = std::fopen("/dev/null", "w");
  check(sink != nullptr, "cannot open /dev/null");
  auto answer = control::answer_parse(line);
  if (!answer) {
    check(answer.error().code > 0, "answer_parse failed with a code <= 0", answer.error().message);
    return;
  }
  check(answer->is_object() && !answer->contains("error"), "answer_parse returned a non-object or an error object");
  for (auto command : {cli::ControlCommand::attach, cli::ControlCommand::detach, cli::ControlCommand::status})
    for (bool as_json : {false, true}) {
      auto printed = cli::control_answer_print(command, *answer, as_json, sink, sink);
      check(printed || printed.error().code == EPROTO, "printing an answer failed with a code other than EPROTO");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view line(reinterpret_cast<const char*>(data) + 1, size - 1);
  hostd_side(line, data[0]);
  cli_side(line);
  return 0;
}
