#include "node/cluster_node.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/cluster_service.h"
#include "api/peer_certificates.h"
#include "api/redirect.h"
#include "broker/metrics.h"
#include "broker/store_errors.h"
#include "cluster/etcd_client.h"
#include "cluster/member.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"
#include "hourglass/v1/cluster.pb.h"
#include "node/primary_gate.h"
#include "node/shard_host.h"
#include "replication/replication_service.h"
#include "spdlog/spdlog.h"
#include "storage/rocksdb_store.h"

namespace hourglass::node {

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Open(
    ClusterNodeOptions options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("cluster node: no clock");
  }
  if (options.shards != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shards=", options.shards,
        ": this version runs clusters of one shard; use --shards=1"));
  }
  if (options.min_insync < 1 ||
      options.min_insync > options.replication_factor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min_insync must be between 1 and --replication_factor (",
        options.replication_factor, "), not ", options.min_insync));
  }
  const bool peer_tls = client::UsesTls(options.peer_tls);
  if (peer_tls && options.peer_tls.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "cluster node: TLS between nodes needs the CAs of the nodes' "
        "certificates (--tls_peer_ca, or --tls_client_ca)");
  }
  // Read once: every channel to a peer shares them.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> peer_credentials =
      client::TlsCredentials(options.peer_tls);
  if (!peer_credentials.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer_", peer_credentials.status().message()));
  }
  std::unique_ptr<ClusterNode> node(new ClusterNode(std::move(options)));
  const ClusterNodeOptions& o = node->options_;
  replication::ReplicationService::CallerCheck caller_check;
  if (peer_tls) {
    absl::StatusOr<std::unique_ptr<api::PeerCertificates>> peers =
        api::PeerCertificates::FromFile("--tls_peer_ca", o.peer_tls.ca_file);
    if (!peers.ok()) return peers.status();
    node->peers_ = *std::move(peers);
    node->refusals_ =
        std::make_unique<broker::RateLimitedLog>(absl::Seconds(10), o.clock);
    caller_check = [n = node.get()](const grpc::ServerContextBase& context) {
      return n->CheckPeer(context);
    };
  }
  const std::string store_dir = o.data_dir + "/shards/0";
  auto open_store = [sync = o.sync,
                     cache = o.block_cache_bytes](const std::string& dir)
      -> absl::StatusOr<std::unique_ptr<storage::MessageStore>> {
    return storage::RocksDbStore::Open(
        {.path = dir, .sync = sync, .block_cache_bytes = cache});
  };
  absl::StatusOr<std::unique_ptr<storage::MessageStore>> store =
      open_store(store_dir);
  if (!store.ok()) return store.status();
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd =
      cluster::EtcdClient::Create(
          cluster::EtcdOptions{.endpoints = o.etcd, .tls = o.etcd_tls});
  if (!etcd.ok()) return etcd.status();
  node->etcd_ = *std::move(etcd);
  node->gate_ =
      std::make_unique<PrimaryGate>("this node has not joined its cluster yet");
  node->hint_ = std::make_unique<api::PrimaryHint>();
  node->replication_ = std::make_unique<replication::ReplicationService>(
      std::move(caller_check));
  node->cluster_service_ = std::make_unique<api::ClusterService>(
      [n = node.get()] { return n->Map(); },
      [n = node.get()](const std::string& id, bool drain) {
        return cluster::SetDraining(*n->etcd_, n->options_.cluster, id, drain);
      },
      o.authorizer);
  ShardHostOptions host;
  host.shard = 0;
  host.node_id = o.node_id;
  host.min_insync = o.min_insync;
  host.engine = o.engine;
  host.clock = o.clock;
  host.metrics = o.engine.metrics;
  host.store_dir = store_dir;
  host.open_store = open_store;
  host.peer_channel = [credentials = *std::move(peer_credentials),
                       tls = o.peer_tls](const std::string& address) {
    grpc::ChannelArguments arguments;
    client::SetTlsArguments(tls, arguments);
    return grpc::CreateCustomChannel(address, credentials, arguments);
  };
  auto shard_host = std::make_unique<ShardHost>(
      *std::move(store), std::move(host), node->gate_.get(), node->hint_.get(),
      node->replication_.get());
  node->replication_->SetRebuildHandler(
      [h = shard_host.get()](std::string why) {
        h->RequestRebuild(std::move(why));
      });
  {
    absl::MutexLock lock(&node->mu_);
    node->host_ = std::move(shard_host);
  }
  if (o.engine.metrics != nullptr) {
    node->collector_ = o.engine.metrics->AddCollector(
        [n = node.get()] { n->CollectMetrics(); });
  }
  return node;
}

ClusterNode::ClusterNode(ClusterNodeOptions options)
    : options_(std::move(options)) {}

absl::Status ClusterNode::CheckPeer(const grpc::ServerContextBase& context) {
  absl::Status verdict = peers_->Check(context);
  if (verdict.ok()) return verdict;
  if (options_.engine.metrics != nullptr) {
    options_.engine.metrics->Counters(metrics::Metric::kReplicationRefusedTotal)
        .Add({})
        .Increment();
  }
  // A refused primary tries again every 200 ms: a line per caller and
  // reason every 10 s.
  const std::string peer = context.peer();
  if (std::optional<uint64_t> unlogged =
          refusals_->Allow(absl::StrCat(peer, " ", verdict.message()))) {
    spdlog::warn(
        "cluster: node {} refused a call to its Replication service from {} "
        "({} more refused since the last such line): {}",
        options_.node_id, peer, *unlogged, std::string(verdict.message()));
  }
  return verdict;
}

ClusterNode::~ClusterNode() {
  if (options_.engine.metrics != nullptr) {
    options_.engine.metrics->RemoveCollector(collector_);
  }
  Leave();
}

void ClusterNode::CollectMetrics() {
  metrics::Registry& registry = *options_.engine.metrics;
  const std::string shard = "0";
  absl::MutexLock lock(&mu_);
  if (host_ == nullptr) return;
  const ShardHost::Role role = host_->role();
  for (const auto& [name, value] :
       {std::pair{"primary", ShardHost::Role::kPrimary},
        std::pair{"backup", ShardHost::Role::kBackup},
        std::pair{"none", ShardHost::Role::kNone}}) {
    registry.Gauges(metrics::Metric::kClusterRole)
        .Add({shard, name})
        .Set(role == value ? 1 : 0);
  }
  registry.Gauges(metrics::Metric::kReplicationPosition)
      .Add({shard})
      .Set(static_cast<double>(host_->position()));
  const uint64_t sent = replication_->checkpoints_sent();
  registry.Counters(metrics::Metric::kReplicationCheckpointsTotal)
      .Add({shard, "sent"})
      .Increment(static_cast<double>(sent - checkpoints_sent_));
  checkpoints_sent_ = sent;
  if (member_ != nullptr) {
    const cluster::ClusterView view = member_->view();
    registry.Gauges(metrics::Metric::kClusterController)
        .Add({})
        .Set(view.controller == options_.node_id ? 1 : 0);
    auto record = view.shards.find(0);
    if (record != view.shards.end()) {
      registry.Gauges(metrics::Metric::kClusterEpoch)
          .Add({shard})
          .Set(static_cast<double>(record->second.record.epoch));
      registry.Gauges(metrics::Metric::kClusterInSync)
          .Add({shard})
          .Set(static_cast<double>(record->second.record.isr.size()));
    }
  }
  // Lag, from the primary only; a backup no longer reported reads 0.
  std::vector<std::string> reported;
  const absl::Time now = absl::Now();
  if (std::optional<ShardHost::Progress> progress = host_->progress()) {
    for (const ShardHost::BackupProgress& b : progress->backups) {
      const int64_t behind =
          std::max<int64_t>(0, progress->last_index - b.applied_index);
      registry.Gauges(metrics::Metric::kReplicationLagEntries)
          .Add({shard, b.node})
          .Set(static_cast<double>(behind));
      registry.Gauges(metrics::Metric::kReplicationLagBytes)
          .Add({shard, b.node})
          .Set(static_cast<double>(b.lag_bytes));
      double seconds = 0;
      if (behind > 0) {
        seconds = b.last_heard == absl::InfinitePast()
                      ? 0
                      : absl::ToDoubleSeconds(now - b.last_heard);
      }
      registry.Gauges(metrics::Metric::kReplicationLagSeconds)
          .Add({shard, b.node})
          .Set(seconds);
      reported.push_back(b.node);
    }
  }
  for (const std::string& gone : lag_backups_) {
    if (std::find(reported.begin(), reported.end(), gone) != reported.end()) {
      continue;
    }
    for (metrics::Metric m : {metrics::Metric::kReplicationLagEntries,
                              metrics::Metric::kReplicationLagBytes,
                              metrics::Metric::kReplicationLagSeconds}) {
      registry.Gauges(m).Add({shard, gone}).Set(0);
    }
  }
  lag_backups_ = std::move(reported);
}

broker::Broker* ClusterNode::broker() { return gate_.get(); }

std::vector<grpc::Service*> ClusterNode::services() {
  return {replication_->service(), cluster_service_.get()};
}

absl::Status ClusterNode::Join(const std::string& address,
                               absl::AnyInvocable<void()> on_lost) {
  cluster::MemberOptions member;
  member.cluster = options_.cluster;
  member.node_id = options_.node_id;
  member.address = address;
  member.lease_ttl = options_.lease_ttl;
  member.shards = options_.shards;
  member.min_insync = options_.min_insync;
  member.replication_factor = options_.replication_factor;
  cluster::Member::Callbacks callbacks;
  ShardHost* host;
  {
    absl::MutexLock lock(&mu_);
    host = host_.get();
  }
  callbacks.position = [host](int) { return host->Position(); };
  callbacks.handed_over = [host](int) { return host->HandedOver(); };
  callbacks.on_view = [host](const cluster::ClusterView& view) {
    host->OnView(view);
  };
  callbacks.on_lost =
      [host, on_lost = std::move(on_lost)](absl::Status status) mutable {
        host->StepDown(
            absl::StrCat("this node lost its etcd lease: ", status.message()));
        if (on_lost) on_lost();
      };
  absl::StatusOr<std::unique_ptr<cluster::Member>> joined =
      cluster::Member::Join(*etcd_, std::move(member), std::move(callbacks));
  if (!joined.ok()) return joined.status();
  host->Attach(joined->get());
  absl::MutexLock lock(&mu_);
  member_ = *std::move(joined);
  return absl::OkStatus();
}

void ClusterNode::WatchHealth(absl::AnyInvocable<void(NodeHealth)> listener) {
  absl::MutexLock lock(&mu_);
  if (host_ != nullptr) host_->WatchHealth(std::move(listener));
}

hourglass::v1::ClusterMap ClusterNode::Map() const {
  hourglass::v1::ClusterMap map;
  map.set_cluster(options_.cluster);
  map.set_node(options_.node_id);
  map.set_hash("fnv1a-64");
  map.set_shard_count(static_cast<uint32_t>(options_.shards));
  absl::MutexLock lock(&mu_);
  if (member_ == nullptr) return map;
  const cluster::ClusterView view = member_->view();
  map.set_controller(view.controller);
  for (const auto& [id, node] : view.nodes) {
    hourglass::v1::ClusterNode& out = *map.add_nodes();
    out.set_id(id);
    out.set_address(node.address);
  }
  for (const std::string& id : view.draining) map.add_draining(id);
  const std::optional<ShardHost::Progress> progress = host_->progress();
  const absl::Time now = absl::Now();
  for (const auto& [number, shard] : view.shards) {
    hourglass::v1::ShardInfo& out = *map.add_shards();
    out.set_shard(static_cast<uint32_t>(number));
    out.set_epoch(shard.record.epoch);
    out.set_primary(shard.record.primary);
    for (const std::string& r : shard.record.replicas) out.add_replicas(r);
    for (const std::string& r : shard.record.isr) out.add_isr(r);
    if (shard.record.primary != options_.node_id || !progress.has_value()) {
      continue;
    }
    out.set_last_index(progress->last_index);
    for (const ShardHost::BackupProgress& b : progress->backups) {
      hourglass::v1::ReplicaLag& lag = *out.add_lag();
      lag.set_node(b.node);
      lag.set_applied_index(b.applied_index);
      lag.set_durable_index(b.durable_index);
      lag.set_lag_entries(
          std::max<int64_t>(0, progress->last_index - b.applied_index));
      if (b.last_heard != absl::InfinitePast()) {
        lag.set_seconds_since_heard(absl::ToDoubleSeconds(now - b.last_heard));
      }
      lag.set_in_sync(b.in_sync);
    }
  }
  return map;
}

void ClusterNode::Leave() {
  std::unique_ptr<cluster::Member> member;
  std::unique_ptr<ShardHost> host;
  {
    absl::MutexLock lock(&mu_);
    member = std::move(member_);
    host = std::move(host_);
  }
  if (host != nullptr) host->StepDown("this node is shutting down");
  // The member first: it calls into the host.
  member.reset();
  host.reset();
}

}  // namespace hourglass::node
