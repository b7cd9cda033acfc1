#ifndef HOURGLASS_NODE_CLUSTER_NODE_H_
#define HOURGLASS_NODE_CLUSTER_NODE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/broker.h"
#include "broker/clock.h"
#include "broker/engine.h"
#include "client/tls.h"
#include "node/node_health.h"
#include "storage/message_store.h"

namespace grpc {
class ServerContextBase;
class Service;
}  // namespace grpc

namespace hourglass::api {
class Authorizer;
class ClusterService;
class PeerCertificates;
class PrimaryHint;
}  // namespace hourglass::api

namespace hourglass::v1 {
class ClusterMap;
}  // namespace hourglass::v1

namespace hourglass::cluster {
class EtcdClient;
class Member;
}  // namespace hourglass::cluster

namespace hourglass::replication {
class ReplicationService;
}  // namespace hourglass::replication

namespace hourglass::broker {
class RateLimitedLog;
}  // namespace hourglass::broker

namespace hourglass::node {

class PrimaryGate;
class ShardHost;

struct ClusterNodeOptions {
  // --etcd, parsed (cluster::ParseEtcdEndpoints).
  std::vector<std::string> etcd;
  std::string cluster = "hourglass";  // --cluster
  std::string node_id;                // --node_id
  absl::Duration lease_ttl = absl::Seconds(3);
  int shards = 1;
  int replication_factor = 3;
  int min_insync = 2;
  // The shard's store: opened at <data_dir>/shards/0.
  std::string data_dir;
  bool sync = true;
  size_t block_cache_bytes = 64 << 20;
  // The engine run while this node is the shard's primary.
  broker::Engine::Options engine;
  broker::Clock* clock = nullptr;  // Required.
  // Who may read the cluster map (null: everyone). Must outlive the node.
  const api::Authorizer* authorizer = nullptr;
  // TLS between the nodes, set when the gRPC server speaks TLS. With
  // UsesTls(peer_tls), the channels to peers speak TLS, verify the peer's
  // certificate against peer_tls.ca_file (--tls_peer_ca) for the host of
  // its advertised address or peer_tls.server_name
  // (--tls_peer_server_name), and present peer_tls.cert_file and key_file
  // (the node's own --tls_cert and --tls_key) as client certificate; and
  // the Replication service lets in only callers whose certificate chains
  // to peer_tls.ca_file (api::PeerCertificates). ca_file is then required.
  // Default: plaintext, and every caller let in (a private network).
  client::TlsOptions peer_tls;
  // TLS to etcd (--etcd_ca, --etcd_cert, --etcd_key; cluster::EtcdOptions).
  // Default: plaintext.
  client::TlsOptions etcd_tls;
};

// hourglassd as a node of a cluster (CLUSTER.md), with one shard (issue 21,
// part 1): the shard's store, the broker the gRPC services call (a gate
// that lets them into the engine while this node is the primary), the
// Replication service, and, once joined, the node's membership in etcd and
// the shard's role (node/shard_host.h).
//
// Thread-safe.
class ClusterNode {
 public:
  // Opens the store and connects to etcd (without joining). Errors: the
  // store's; INVALID_ARGUMENT for bad options, among them a TLS file that
  // cannot be read (named by its option: `peer_tls.ca_file: cannot read
  // ...`), a peer CA file without a certificate, or peer TLS without
  // peer_tls.ca_file.
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Open(
      ClusterNodeOptions options);
  // Leaves (if joined) and closes.
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // What the gRPC server needs: the broker for the Broker and Admin
  // services, the services of the cluster, and where to redirect clients.
  broker::Broker* broker();
  std::vector<grpc::Service*> services();
  const api::PrimaryHint* hint() const { return hint_.get(); }

  // Joins the cluster advertising `address` (--advertise, or the address
  // the server listens on). `on_lost` runs once if the node's lease is
  // lost later (it no longer serves by then). Errors: Member::Join's.
  absl::Status Join(const std::string& address,
                    absl::AnyInvocable<void()> on_lost);
  // Stops serving and leaves the cluster (its node key goes at once).
  void Leave();

  // Calls `listener` with the node's health now (not serving before Join),
  // then at each change until Leave, which tells it that the node serves
  // no more before the hand-over (node/node_health.h). On the shard host's
  // thread, or Leave's caller, one call at a time; it must not block nor
  // call the node. hourglassd sets grpc.health.v1 from it.
  void WatchHealth(absl::AnyInvocable<void(NodeHealth)> listener);

  const std::string& node_id() const { return options_.node_id; }
  const std::string& cluster() const { return options_.cluster; }
  // TLS between the nodes (ClusterNodeOptions::peer_tls): the server
  // accepts client certificates its ca_file signs.
  const client::TlsOptions& peer_tls() const { return options_.peer_tls; }

  // What Cluster.GetClusterMap answers (api/hourglass/v1/cluster.proto).
  hourglass::v1::ClusterMap Map() const;

 private:
  explicit ClusterNode(ClusterNodeOptions options);

  const ClusterNodeOptions options_;
  std::unique_ptr<cluster::EtcdClient> etcd_;
  std::unique_ptr<PrimaryGate> gate_;
  std::unique_ptr<api::PrimaryHint> hint_;
  // Set by Open with peer TLS, constant after: who may call the
  // Replication service, and when a refusal is logged.
  std::unique_ptr<api::PeerCertificates> peers_;
  std::unique_ptr<broker::RateLimitedLog> refusals_;
  // The Replication service's caller check: peers_'s verdict, a refusal
  // counted and logged (rate-limited). On gRPC threads.
  absl::Status CheckPeer(const grpc::ServerContextBase& context);
  std::unique_ptr<replication::ReplicationService> replication_;
  std::unique_ptr<api::ClusterService> cluster_service_;
  // Sets the cluster's gauges (a metrics collector: at each scrape).
  void CollectMetrics();

  uint64_t collector_ = 0;  // In options_.engine.metrics, if any.
  // The collector's: backups whose lag gauges it set, and the checkpoints
  // sent it has counted.
  std::vector<std::string> lag_backups_;
  uint64_t checkpoints_sent_ = 0;

  // Replaced only by Join and Leave; read by Map from gRPC threads.
  mutable absl::Mutex mu_;
  std::unique_ptr<ShardHost> host_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<cluster::Member> member_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_CLUSTER_NODE_H_
