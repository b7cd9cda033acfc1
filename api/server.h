#ifndef HOURGLASS_API_SERVER_H_
#define HOURGLASS_API_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace hourglass::api {

struct ServerOptions {
  // host:port to listen on. Port 0 lets the OS choose one; port() tells
  // which. Default: loopback only.
  std::string listen_address = "127.0.0.1:7070";
  // Largest request accepted, in bytes. Default: 64 MiB.
  int max_receive_bytes = 64 << 20;
  // Services to serve besides health and reflection. Not owned; each must
  // outlive the server.
  std::vector<grpc::Service*> services;
};

// The gRPC server of hourglassd: grpc.health.v1.Health, server reflection,
// and the Hourglass services.
//
// Thread-safe: every method may be called from any thread.
class Server {
 public:
  // Starts listening. Returns UNAVAILABLE naming the address when it cannot
  // be bound (in use, not a local address, malformed).
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Shuts down (see Shutdown) if still running.
  ~Server();

  // The port the server listens on (the OS's choice for port 0).
  int port() const { return port_; }

  // Stops accepting calls, lets running calls finish until `grace` has
  // passed, then cancels the rest. Health reports NOT_SERVING from the
  // start of the grace period. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  Server(std::unique_ptr<grpc::Server> server, int port);

  const std::unique_ptr<grpc::Server> server_;
  const int port_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_SERVER_H_
