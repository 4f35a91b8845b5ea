#include "plugin_server.hpp"

#include <cerrno>

#include <sys/stat.h>
#include <unistd.h>

namespace rpcie::k8s {

Result<void> PluginServer::start() {
  if (::unlink(socket_path_.c_str()) != 0 && errno != ENOENT) return fail(errno, "removing " + socket_path_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path_, grpc::InsecureServerCredentials());
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  if (!server_) return fail(EADDRNOTAVAIL, "cannot serve on " + socket_path_);
  struct stat st {};
  if (::stat(socket_path_.c_str(), &st) != 0) return fail(errno, socket_path_ + ": not created");
  socket_inode_ = st.st_ino;
  return {};
}

void PluginServer::shutdown(std::chrono::milliseconds grace) {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
  struct stat st {};
  // Only our own socket: a restarted kubelet may have let another plugin take the name.
  if (::stat(socket_path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) ::unlink(socket_path_.c_str());
}

bool PluginServer::socket_present() const {
  struct stat st {};
  return ::stat(socket_path_.c_str(), &st) == 0 && st.st_ino == socket_inode_;
}

}  // namespace rpcie::k8s
