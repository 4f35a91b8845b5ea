// Small gRPC helpers shared by the plugin's clients and servers.
// Thread-safety: no state.
#pragma once

#include <cerrno>
#include <string>

#include <grpcpp/grpcpp.h>

#include "rpcie/deadline.hpp"
#include "rpcie/result.hpp"

namespace rpcie::k8s {

// A channel to the UNIX socket `path`.
inline std::shared_ptr<grpc::Channel> unix_channel(const std::string& path) {
  return grpc::CreateChannel("unix://" + path, grpc::InsecureChannelCredentials());
}

// `ctx` to end at `deadline` (gRPC takes a system_clock point).
inline void context_deadline_set(grpc::ClientContext& ctx, Deadline deadline) {
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline.remaining()));
}

// A failed call as an Error: "<what>: <gRPC's message>".
inline tl::unexpected<Error> status_fail(const grpc::Status& s, const std::string& what) {
  const int code = s.error_code() == grpc::StatusCode::UNAVAILABLE         ? ECONNREFUSED
                   : s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? ETIMEDOUT
                                                                           : EIO;
  return fail(code, what + ": " + s.error_message());
}

}  // namespace rpcie::k8s
