#ifndef HOURGLASS_NODE_PEER_AUTH_H_
#define HOURGLASS_NODE_PEER_AUTH_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "broker/clock.h"

namespace grpc {
class Channel;
class ChannelArguments;
class ChannelCredentials;
class ServerContextBase;
}  // namespace grpc

namespace hourglass::api {
class PeerCertificates;
class PeerSecrets;
}  // namespace hourglass::api

namespace hourglass::broker {
class RateLimitedLog;
}  // namespace hourglass::broker

namespace hourglass::metrics {
class Registry;
}  // namespace hourglass::metrics

namespace hourglass::node {

struct PeerAuthOptions {
  // The CAs of the nodes' certificates (--tls_peer_ca) when the nodes
  // speak mutual TLS; empty otherwise.
  std::string peer_ca_file;
  // The file of the secret the nodes share (--peer_token_file); empty for
  // none.
  std::string peer_token_file;
  // Neither of the two, knowingly (--insecure_peers): every caller is let
  // in. Without it, a node with neither refuses to start.
  bool insecure = false;
  // For log lines.
  std::string node_id;
  // Paces the refusal log (one line per caller and reason every 10 s).
  // Required.
  broker::Clock* clock = nullptr;
  // Counts refusals (hourglass_replication_refused_total). Optional.
  metrics::Registry* metrics = nullptr;
};

// How a cluster's nodes prove to one another that a call comes from a node,
// on both sides: the Replication service lets in only calls that do
// (Check), and the channels to peers make calls that do (Channel). A call
// from a node presents a client certificate signed by --tls_peer_ca
// (mutual TLS), or carries the shared secret of --peer_token_file in its
// metadata, or both when both are set; a client's token never counts.
//
// Thread-safe.
class PeerAuth {
 public:
  // Reads the CA and secret files. Errors: INVALID_ARGUMENT naming both
  // ways when neither is set and options.insecure is not; the files'
  // errors (api::PeerCertificates::FromFile, api::PeerSecrets::FromFile).
  static absl::StatusOr<std::unique_ptr<PeerAuth>> Create(
      PeerAuthOptions options);
  ~PeerAuth();
  PeerAuth(const PeerAuth&) = delete;
  PeerAuth& operator=(const PeerAuth&) = delete;

  // OK if the call comes from a node; otherwise the refusal
  // (UNAUTHENTICATED, or PERMISSION_DENIED for a client's credentials),
  // counted and logged.
  absl::Status Check(const grpc::ServerContextBase& context);

  // A channel to the peer at `target` over `credentials` and `arguments`
  // whose every call carries this node's peer secret, if it has one.
  std::shared_ptr<grpc::Channel> Channel(
      const std::string& target,
      const std::shared_ptr<grpc::ChannelCredentials>& credentials,
      const grpc::ChannelArguments& arguments) const;

  // Reads --peer_token_file again (SIGHUP): its secrets take over, and the
  // count comes back; on error the old ones stay. NOT_FOUND `no
  // --peer_token_file to reload` without one.
  absl::StatusOr<size_t> Reload();

  // How the nodes prove themselves, for the start-up log: "mutual TLS",
  // "a shared secret", "mutual TLS and a shared secret", or "nothing
  // (--insecure_peers)".
  std::string Describe() const;

 private:
  explicit PeerAuth(PeerAuthOptions options);

  const PeerAuthOptions options_;
  std::unique_ptr<api::PeerCertificates> certificates_;
  std::shared_ptr<api::PeerSecrets> secrets_;
  std::unique_ptr<broker::RateLimitedLog> refusals_;
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_PEER_AUTH_H_
