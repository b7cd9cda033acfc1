#ifndef HOURGLASS_API_SERVER_H_
#define HOURGLASS_API_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace hourglass::metrics {
class Registry;
}  // namespace hourglass::metrics

namespace hourglass::broker {
class StoreHealth;
}  // namespace hourglass::broker

namespace hourglass::api {

// The grpc.health.v1 service name that is SERVING only on a node that takes
// writes: a single node while its store takes writes (as the whole
// server's status, ""), a cluster node only while it is the primary of a
// shard and takes writes in every shard it is the primary of
// (node/README.md, "Health"). A load balancer that sends
// calls straight to the primary checks it; Kubernetes' readiness checks "".
inline constexpr char kPrimaryHealthService[] = "hourglass.v1.Primary";

struct ServerOptions {
  // host:port to listen on. Port 0 lets the OS choose one; port() tells
  // which. Default: loopback only.
  std::string listen_address = "127.0.0.1:7070";
  // Largest request accepted, in bytes. Default: 64 MiB.
  int max_receive_bytes = 64 << 20;
  // Services to serve besides health and reflection. Not owned; each must
  // outlive the server.
  std::vector<grpc::Service*> services;

  // TLS. With tls_cert_file and tls_key_file set (PEM files: the
  // certificate chain, server certificate first, and its private key) the
  // server speaks only TLS; both empty (the default) means plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM file of the CAs that sign client certificates. Set, it turns on
  // mutual TLS: a client without a certificate signed by one of them
  // cannot connect. REQUIRES TLS. Default: empty, no client certificates.
  std::string tls_client_ca_file;
  // Cluster mode: PEM file of the CAs that sign the cluster's nodes'
  // certificates (hourglassd's --tls_peer_ca), which peers present as
  // client certificates. Client certificates they sign are accepted
  // besides tls_client_ca's: without tls_client_ca, a certificate is
  // requested and verified if presented, but not required (clients without
  // one still connect). REQUIRES TLS. Default: empty.
  std::string tls_peer_ca_file;

  // Most concurrent calls (HTTP/2 streams) on one client connection; a
  // client past it waits for one of its calls to end. 0 (the default)
  // leaves gRPC's default (no limit).
  int max_streams_per_connection = 0;
  // Memory gRPC may use for connections and calls, in bytes (a
  // grpc::ResourceQuota); under pressure it shrinks buffers and refuses
  // new connections. 0 (the default): no limit.
  size_t grpc_memory_bytes = 0;

  // HTTP/2 keepalive: the server pings every connection each
  // keepalive_time, with calls or without, and closes one whose peer does
  // not answer within keepalive_timeout, ending its calls. So the streams
  // of a peer that died, or that a network stopped reaching, end within
  // about keepalive_time + keepalive_timeout (40 s by default). Clients may
  // ping as often as every 10 s. Defaults: 30 s and 10 s.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);

  // Where every call is counted by method and status code, and timed
  // (api/call_metrics.h). Not owned; must outlive the server. Default:
  // none, nothing counted.
  metrics::Registry* metrics = nullptr;

  // Cluster mode: calls that end UNAVAILABLE naming the primary of their
  // shard (api::WithPrimary) carry it as trailing metadata
  // (api/redirect.h). Default: false (a single node redirects nothing).
  bool redirects = false;

  // What grpc.health.v1 says at start, for "" and kPrimaryHealthService:
  // SERVING if true (the default: a single node serves once it listens),
  // NOT_SERVING if false (a cluster node, until it plays its part in its
  // shards; SetServing changes it).
  bool serving_at_start = true;
};

// True if `address` (host:port, [v6]:port or unix:path, as --listen takes)
// can only be reached from this machine: 127.0.0.0/8, ::1, localhost or a
// unix socket. False for wildcards (0.0.0.0, [::]) and everything else.
bool IsLoopbackAddress(absl::string_view address);

// The gRPC server of hourglassd: grpc.health.v1.Health, server reflection,
// and the Hourglass services.
//
// Thread-safe: every method may be called from any thread.
class Server {
 public:
  // Starts listening. Returns UNAVAILABLE naming the address when it cannot
  // be bound (in use, not a local address, malformed); NOT_FOUND naming a
  // TLS file that cannot be read; INVALID_ARGUMENT for a TLS file that is
  // not PEM of the right kind, a client or peer CA without TLS, or a
  // certificate and key that gRPC refuses.
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Shuts down (see Shutdown) if still running.
  ~Server();

  // The port the server listens on (the OS's choice for port 0).
  int port() const { return port_; }

  // What grpc.health.v1.Health answers for every service it knows (the
  // empty name and kPrimaryHealthService): SERVING or NOT_SERVING. At start
  // as ServerOptions::serving_at_start says; a single hourglassd sets
  // NOT_SERVING while the store refuses writes. Has no effect once Shutdown
  // began.
  void SetServing(bool serving);
  // The same for one service name ("" for the whole server): a cluster
  // node tells "" and kPrimaryHealthService apart. Another name becomes
  // known to health from this call on.
  void SetServing(absl::string_view service, bool serving);

  // Stops accepting calls, lets running calls finish until `grace` has
  // passed, then cancels the rest. Health reports NOT_SERVING from the
  // start of the grace period. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  Server(std::unique_ptr<grpc::Server> server, int port);

  const std::unique_ptr<grpc::Server> server_;
  const int port_;
};

// Makes `server`'s health follow `health` (the Engine's store_health()):
// NOT_SERVING while the store refuses writes, logged as an ERROR with the
// store's failure, SERVING again once it takes them, logged as INFO. Until
// health.Unwatch(), which must come before `server` is destroyed.
void FollowStoreHealth(broker::StoreHealth& health, Server* server);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_SERVER_H_
