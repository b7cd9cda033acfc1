#ifndef HOURGLASS_NODE_CLUSTER_NODE_H_
#define HOURGLASS_NODE_CLUSTER_NODE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
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
class Channel;
class Service;
}  // namespace grpc

namespace hourglass::api {
class Authorizer;
class ClusterService;
}  // namespace hourglass::api

namespace hourglass::v1 {
class ClusterMap;
class RecoverShardResponse;
}  // namespace hourglass::v1

namespace hourglass::cluster {
class EtcdClient;
class Member;
struct ClusterView;
}  // namespace hourglass::cluster

namespace hourglass::replication {
class ReplicationService;
}  // namespace hourglass::replication

namespace hourglass::metrics {
class Registry;
}  // namespace hourglass::metrics

namespace prometheus {
struct MetricFamily;
}  // namespace prometheus

namespace hourglass::storage {
class RocksDbResources;
}  // namespace hourglass::storage

namespace hourglass::node {

class PeerAuth;
class PeerCalls;
class PrimaryGate;
class ShardHost;
class ShardRouter;

struct ClusterNodeOptions {
  // --etcd, parsed (cluster::ParseEtcdEndpoints).
  std::vector<std::string> etcd;
  std::string cluster = "hourglass";  // --cluster
  std::string node_id;                // --node_id
  std::string zone;                   // --zone; empty: none
  absl::Duration lease_ttl = absl::Seconds(3);
  // The cluster's shard count, between 1 and ShardRouter::kMaxShards: Open
  // makes a gate per shard and calls are routed by it, so it must be known
  // before Open. hourglassd agrees on it with etcd first
  // (cluster::AgreeOnShardCount: --shards if given, else the cluster's, or
  // 16 for a new cluster); with restore_from, 0 takes the snapshot's.
  // Join refuses a count other than the cluster's. Default: 1.
  int shards = 1;
  int replication_factor = 3;
  int min_insync = 2;
  // How long each shard's store keeps its flushed write-ahead log files
  // (storage::RocksDbStoreOptions::keep_write_log), which a primary's
  // backups catch up from (replication/log_history.h). Default: 2 min.
  absl::Duration replication_log_keep = absl::Minutes(2);
  // --restore_from: a snapshot (`hourglass snapshot` of a cluster, or of a
  // single node) to create a new cluster from. Open checks that etcd holds
  // no cluster of this name (FAILED_PRECONDITION otherwise; UNAVAILABLE if
  // etcd does not answer), copies the snapshot's shards into data_dir
  // (missing or empty; RestoreClusterSnapshot, node/cluster_snapshot.h),
  // and takes the shard count from it (INVALID_ARGUMENT, before copying,
  // if `shards` is another than 0 and the snapshot's). Join then creates the
  // cluster: each shard's record names this node its primary, only replica and
  // only in-sync member, at the epoch after its copy's; the nodes that join
  // become its backups, copying the shards from it. Default: none.
  std::string restore_from;
  // Shard n's store: opened at <data_dir>/shards/<n> (at Open if it exists,
  // otherwise once a shard record first names this node). A relative path
  // is made absolute at Open, from the working directory.
  std::string data_dir;
  bool sync = true;
  // Shared by all the node's stores (storage::RocksDbResources): the block
  // cache (--block_cache_mb) and the memtable budget. Defaults: 64 MiB and
  // 128 MiB.
  size_t block_cache_bytes = size_t{64} << 20;
  size_t write_buffer_bytes = size_t{128} << 20;
  // Most bytes of log entries in one replication request; a larger entry
  // goes in pieces of this size. Must fit, with room to spare, in what the
  // peers' servers receive (hourglassd: the smaller of 4 MiB and half of
  // --max_request_bytes). Default: 4 MiB.
  size_t peer_request_bytes = size_t{4} << 20;
  // The engine run for each shard this node is the primary of.
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
  // The secret the nodes share (--peer_token_file; api::PeerSecrets): the
  // Replication service lets in only calls carrying it, and this node's
  // calls to its peers carry it. With peer_tls too, both are required.
  std::string peer_token_file;
  // Start with neither peer_tls nor peer_token_file (--insecure_peers):
  // anyone who reaches the port may replicate. Without it, Open refuses.
  bool insecure_peers = false;
  // TLS to etcd (--etcd_ca, --etcd_cert, --etcd_key; cluster::EtcdOptions).
  // Default: plaintext.
  client::TlsOptions etcd_tls;
};

// hourglassd as a node of a cluster (node/README.md): a store per shard whose
// record names this node, each with its role (node/shard_host.h); the
// broker the gRPC services call (a ShardRouter in front of a gate per
// shard, which lets calls into the shard's engine while this node is its
// primary); the Replication service of every shard; and, once joined, the
// node's membership in etcd.
//
// Thread-safe.
class ClusterNode {
 public:
  // Opens the stores of the shards whose directories exist (a node that
  // held copies before) and connects to etcd (without joining). Errors: the
  // stores'; INVALID_ARGUMENT for bad options, among them a TLS file that
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
  // services (its refusals name the shard's primary: the server must
  // install api::RedirectFactory), and the services of the cluster.
  broker::Broker* broker();
  std::vector<grpc::Service*> services();

  // A new channel to the node whose gRPC address (--advertise) is
  // `address`, speaking as this node speaks to its peers: TLS with its
  // client certificate when the nodes use TLS, and the peer secret in its
  // calls' metadata. The console forwards calls on it (api/admin_http.h),
  // each carrying its caller's token, which the node there checks.
  std::shared_ptr<grpc::Channel> PeerChannel(const std::string& address) const;

  // The shards whose stores are open on this node, in order.
  std::vector<int> hosted_shards() const;

  // Joins the cluster advertising `address` (--advertise, or the address
  // the server listens on). The node stays a member until Leave: if etcd
  // ends its lease (an outage, a pause), the member joins again under a new
  // one (cluster::Member), and its shards keep their roles meanwhile.
  // A shard's record that counts this node as an eligible copy while the
  // node holds no copy of the shard (its data dir was lost) is mended first
  // (compare-and-set): the node leaves the eligible copies, which it can no
  // longer be. Errors: Member::Join's; and UNAVAILABLE, without joining,
  // while a shard's record names this node its primary or an in-sync backup
  // but the node holds no copy of the shard (the caller retries until the
  // cluster has promoted another copy, or the primary has taken this node
  // out of the in-sync set: joined, it could be promoted from an empty
  // copy), or while such a record changed under the mend.
  absl::Status Join(const std::string& address);
  // Stops serving and leaves the cluster (its node key goes at once).
  void Leave();

  // Calls `listener` with the node's health now (not serving before Join),
  // then at each change until Leave, which tells it that the node serves
  // no more before the hand-over (node/node_health.h, node/README.md
  // "Health": over every shard whose record names this node). On a shard
  // host's thread, or Leave's caller, one call at a time; it must not block
  // nor call the node. hourglassd sets grpc.health.v1 from it.
  void WatchHealth(absl::AnyInvocable<void(NodeHealth)> listener);

  const std::string& node_id() const { return options_.node_id; }
  const std::string& cluster() const { return options_.cluster; }
  // The data dir, made absolute by Open.
  const std::string& data_dir() const { return options_.data_dir; }
  // The cluster's shard count (ClusterNodeOptions::shards, or a restored
  // snapshot's).
  int shard_count() const { return options_.shards; }
  // TLS between the nodes (ClusterNodeOptions::peer_tls): the server
  // accepts client certificates its ca_file signs.
  const client::TlsOptions& peer_tls() const { return options_.peer_tls; }
  // Reads --peer_token_file again (SIGHUP); PeerAuth::Reload.
  absl::StatusOr<size_t> ReloadPeerSecrets();
  // How the nodes prove who they are to one another (PeerAuth::Describe).
  std::string PeerAuthSummary() const;

  // What Cluster.GetClusterMap answers (api/hourglass/v1/cluster.proto).
  hourglass::v1::ClusterMap Map() const;
  // What Cluster.MoveShard does: pins `shard` to `node` (cluster::SetPin),
  // or with `undo` removes its pin, after checking them against this
  // node's view of the cluster. Errors, as cluster.proto lists them:
  // INVALID_ARGUMENT for a shard outside 0 to --shards - 1 or a malformed
  // node id, NOT_FOUND for a node not alive, FAILED_PRECONDITION for a
  // node being drained, UNAVAILABLE before Join; etcd's. Blocks for the
  // etcd write.
  absl::Status MoveShard(int shard, const std::string& node, bool undo);
  // What Cluster.RecoverShard does: plans the promotion of `node`'s copy of
  // `shard` (cluster::PlanRecovery) against this node's view and, with
  // `accept_loss`, writes it (compare-and-set) and logs it. Errors, as
  // cluster.proto lists them; UNAVAILABLE before Join; etcd's. Blocks for
  // the etcd write.
  absl::StatusOr<hourglass::v1::RecoverShardResponse> RecoverShard(
      int shard, const std::string& node, bool accept_loss);

 private:
  // INVALID_ARGUMENT for a shard outside 0 to --shards - 1, naming them.
  absl::Status CheckShard(int shard) const;
  // The view operator actions on `shard` are checked against: CheckShard's
  // error, UNAVAILABLE before Join.
  absl::StatusOr<cluster::ClusterView> ViewForOperator(int shard) const;
  explicit ClusterNode(ClusterNodeOptions options);

  // Opens shard `shard`'s store and its host (not yet attached).
  absl::StatusOr<std::unique_ptr<ShardHost>> OpenHost(int shard);
  // The member's view: hosts for the shards that name this node first (the
  // store opened), then the view to every host, and the refusals of the
  // gates of shards this node holds no copy of. On the member's thread.
  void OnView(const cluster::ClusterView& view);
  // Hosts made after Join: watched for health, attached, given the view.
  void AddHost(int shard, std::unique_ptr<ShardHost> host);
  // A host told of its shard's health: the node's, over every shard, to
  // the listener if it changed.
  void OnShardHealth(int shard, const ShardHealth& health);
  // The hosts now (for calls outside mu_: hosts live until Leave returns,
  // and Leave runs after no callback can, so a pointer taken under mu_
  // stays good in a member callback).
  std::vector<ShardHost*> Hosts() const;
  // Shard `shard`'s host, or null if this node has none (same lifetime).
  ShardHost* HostOf(int shard) const;
  // OK unless a shard's record in etcd names this node its primary or an
  // in-sync backup while the node opened no copy of the shard at start (a
  // lost data dir): UNAVAILABLE, saying so. Blocks on etcd.
  absl::Status HoldsEveryShardItIsInSyncFor();

  const ClusterNodeOptions options_;
  std::unique_ptr<cluster::EtcdClient> etcd_;
  // Constant after Open: with restore_from, the epoch of each shard's
  // restored copy (RestoredCluster::epochs); otherwise empty.
  std::vector<int64_t> restored_epochs_;
  // Constant after Open: the stores' shared cache and memtable budget, the
  // gates (one per shard), how the router asks the other primaries for
  // stats, and the router in front of the gates.
  std::shared_ptr<storage::RocksDbResources> resources_;
  std::vector<std::unique_ptr<PrimaryGate>> gates_;
  std::unique_ptr<PeerCalls> peer_calls_;
  std::unique_ptr<ShardRouter> router_;
  // How a host reaches a peer (ShardHostOptions::peer_channel).
  std::function<std::shared_ptr<grpc::Channel>(const std::string&)>
      peer_channel_;
  // Set by Open, constant after: who may call the Replication service,
  // and what this node's calls to its peers carry. Shared with the peer
  // channels, which may outlive the node.
  std::shared_ptr<PeerAuth> peer_auth_;
  std::unique_ptr<replication::ReplicationService> replication_;
  std::unique_ptr<api::ClusterService> cluster_service_;
  // Sets the cluster's gauges (a metrics collector: at each scrape).
  void CollectMetrics();
  // The member's view; nullopt before the node joined.
  std::optional<cluster::ClusterView> View() const;

  // The member thread's: whether OnView logged that the cluster has a
  // shard beyond this node's shard count (it logs it once).
  bool told_shard_count_ = false;

  // Sets one shard's gauges (CollectMetrics).
  void CollectShard(int shard, ShardHost& host,
                    const cluster::ClusterView* view);

  // The families of the engines of the shards this node is the primary
  // of, each sample with the shard label (a source of the node's registry:
  // the metrics of a shard whose engine runs elsewhere are not shown).
  std::vector<prometheus::MetricFamily> ShardFamilies();

  uint64_t collector_ = 0;  // In options_.engine.metrics, if any.
  uint64_t source_ = 0;     // ShardFamilies, in options_.engine.metrics.
  // The collector's, by shard: backups whose lag gauges it set, and the
  // checkpoints sent it has counted.
  std::map<int, std::vector<std::string>> lag_backups_;
  std::map<int, uint64_t> checkpoints_sent_;

  // Hosts are added by Open and the member's thread, and go only in Leave;
  // the member is set by Join and goes in Leave. Read by Map from gRPC
  // threads.
  mutable absl::Mutex mu_;
  std::map<int, std::unique_ptr<ShardHost>> hosts_ ABSL_GUARDED_BY(mu_);
  // Each hosted shard's engine's metrics (with options_.engine.metrics);
  // made with the host, kept until the node goes.
  std::map<int, std::unique_ptr<metrics::Registry>> shard_metrics_
      ABSL_GUARDED_BY(mu_);
  std::unique_ptr<cluster::Member> member_ ABSL_GUARDED_BY(mu_);
  // Set by Leave: no host is made any more.
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;

  // The node's health: each shard's as its host last told, the listener,
  // and what it was told last. Held while it is told, so that changes
  // arrive in order; taken after a host's own health lock, never before.
  absl::Mutex health_mu_;
  std::map<int, ShardHealth> shard_health_ ABSL_GUARDED_BY(health_mu_);
  absl::AnyInvocable<void(NodeHealth)> health_listener_
      ABSL_GUARDED_BY(health_mu_);
  NodeHealth told_ ABSL_GUARDED_BY(health_mu_);
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_CLUSTER_NODE_H_
