#include "api/server.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace hourglass::api {

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options) {
  // Both switches are process-wide in gRPC and only affect servers built
  // after them; setting them again is harmless.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  // Without this, gRPC binds with SO_REUSEPORT and a second broker on the
  // same port would silently share its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  for (grpc::Service* service : options.services)
    builder.RegisterService(service);
  builder.AddListeningPort(options.listen_address,
                           grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on \"", options.listen_address,
                     "\": address in use, malformed or not local"));
  }
  return std::unique_ptr<Server>(new Server(std::move(server), port));
}

Server::Server(std::unique_ptr<grpc::Server> server, int port)
    : server_(std::move(server)), port_(port) {}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

void Server::Shutdown(absl::Duration grace) {
  // grpc::Server::Shutdown is itself idempotent and thread-safe.
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

}  // namespace hourglass::api
