#include "node/cluster_node.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "api/cluster_service.h"
#include "broker/metrics.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "cluster/member.h"
#include "cluster/record_checks.h"
#include "cluster/records.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"
#include "hourglass/v1/cluster.pb.h"
#include "node/cluster_snapshot.h"
#include "node/peer_auth.h"
#include "node/peer_calls.h"
#include "node/primary_gate.h"
#include "node/shard_host.h"
#include "node/shard_refusal.h"
#include "node/shard_router.h"
#include "replication/replication_service.h"
#include "spdlog/spdlog.h"
#include "storage/rocksdb_store.h"

namespace hourglass::node {
namespace {

// ClusterNodeOptions::restore_from: checks that `options.cluster` does not
// exist in etcd yet, restores the snapshot into `options.data_dir` and sets
// `options.shards` to its count. Returns the epochs of the shards' copies.
absl::StatusOr<std::vector<int64_t>> RestoreNewCluster(
    cluster::EtcdClient& etcd, ClusterNodeOptions& options) {
  absl::StatusOr<cluster::GetResult> existing =
      etcd.Get(cluster::ShardCountKey(options.cluster));
  if (!existing.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "--restore_from creates a new cluster, and etcd must answer to say "
        "that cluster ",
        options.cluster, " does not exist yet: ", existing.status().message()));
  }
  if (existing->kv.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster ", options.cluster, " exists in etcd (with ",
        existing->kv->value,
        " shards): --restore_from creates a new cluster; give this node a "
        "--cluster name of its own, or start it without --restore_from"));
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<RestoredCluster> restored = RestoreClusterSnapshot(
      options.restore_from, options.data_dir, options.shards);
  if (!restored.ok()) return restored.status();
  const int shards = static_cast<int>(restored->epochs.size());
  spdlog::info(
      "cluster: node {} restored snapshot {} ({} shard{}, {} bytes) into {} "
      "in {}; it creates cluster {} with them as it joins",
      options.node_id, options.restore_from, shards, shards == 1 ? "" : "s",
      restored->bytes, options.data_dir,
      absl::FormatDuration(absl::Now() - start), options.cluster);
  options.shards = shards;
  return std::move(restored->epochs);
}

absl::Status NotJoinedYet() {
  return absl::UnavailableError("this node has not joined its cluster yet");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Open(
    ClusterNodeOptions options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("cluster node: no clock");
  }
  // The checkpoints a primary sends are made beside its stores, and RocksDB
  // makes them only at an absolute path.
  std::error_code cwd_error;
  std::filesystem::path data_dir =
      std::filesystem::absolute(options.data_dir, cwd_error).lexically_normal();
  if (cwd_error) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster node: cannot make data dir \"", options.data_dir,
                     "\" absolute: ", cwd_error.message()));
  }
  if (data_dir.filename().empty()) data_dir = data_dir.parent_path();
  options.data_dir = data_dir.string();
  const bool snapshot_count =
      options.shards == 0 && !options.restore_from.empty();
  if (!snapshot_count &&
      (options.shards < 1 || options.shards > ShardRouter::kMaxShards)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shards must be between 1 and ", ShardRouter::kMaxShards,
                     ", not ", options.shards));
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
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd =
      cluster::EtcdClient::Create(cluster::EtcdOptions{
          .endpoints = options.etcd, .tls = options.etcd_tls});
  if (!etcd.ok()) return etcd.status();
  std::vector<int64_t> restored_epochs;
  if (!options.restore_from.empty()) {
    absl::StatusOr<std::vector<int64_t>> restored =
        RestoreNewCluster(**etcd, options);
    if (!restored.ok()) return restored.status();
    restored_epochs = *std::move(restored);
  }
  std::unique_ptr<ClusterNode> node(new ClusterNode(std::move(options)));
  const ClusterNodeOptions& o = node->options_;
  node->etcd_ = *std::move(etcd);
  node->restored_epochs_ = std::move(restored_epochs);
  absl::StatusOr<std::unique_ptr<PeerAuth>> peer_auth =
      PeerAuth::Create({.peer_ca_file = peer_tls ? o.peer_tls.ca_file : "",
                        .peer_token_file = o.peer_token_file,
                        .insecure = o.insecure_peers,
                        .node_id = o.node_id,
                        .clock = o.clock,
                        .metrics = o.engine.metrics});
  if (!peer_auth.ok()) return peer_auth.status();
  node->peer_auth_ = *std::move(peer_auth);
  // The shards' memtables share the write buffer budget: with many of
  // them, RocksDB's default arena blocks (2-4 MiB each, for each of 10
  // tables a store) would fill it by themselves (RocksDbResources::Options).
  node->resources_ = storage::RocksDbResources::Create(
      {.block_cache_bytes = o.block_cache_bytes,
       .write_buffer_bytes = o.write_buffer_bytes,
       .arena_block_bytes = o.shards > 1 ? size_t{256} << 10 : 0});
  node->peer_channel_ = [credentials = *std::move(peer_credentials),
                         tls = o.peer_tls,
                         auth = node->peer_auth_](const std::string& address) {
    grpc::ChannelArguments arguments;
    client::SetTlsArguments(tls, arguments);
    return auth->Channel(address, credentials, arguments);
  };
  std::vector<PrimaryGate*> gates;
  for (int shard = 0; shard < o.shards; ++shard) {
    node->gates_.push_back(std::make_unique<PrimaryGate>(
        "this node has not joined its cluster yet"));
    gates.push_back(node->gates_.back().get());
  }
  node->peer_calls_ =
      std::make_unique<PeerCalls>(node->peer_channel_, o.node_id);
  node->router_ =
      std::make_unique<ShardRouter>(std::move(gates), node->peer_calls_.get());
  node->replication_ = std::make_unique<replication::ReplicationService>(
      o.shards,
      [auth = node->peer_auth_](const grpc::ServerContextBase& context) {
        return auth->Check(context);
      });
  node->replication_->SetRecordChecks(
      [n = node.get()](int shard, int64_t epoch, const std::string& primary) {
        std::optional<cluster::ClusterView> view = n->View();
        if (!view.has_value()) return NotJoinedYet();
        return cluster::ConfirmHello(*view, shard, epoch, primary);
      },
      [n = node.get()](int shard, const std::string& asker, bool snapshot) {
        std::optional<cluster::ClusterView> view = n->View();
        if (!view.has_value()) return NotJoinedYet();
        return cluster::MayFetchCheckpoint(*view, shard, asker, snapshot);
      });
  node->replication_->SetStatsHandler(
      [router = node->router_.get()](
          const replication::v1::ShardStatsRequest& request,
          replication::v1::ShardStatsResponse* response) {
        return PeerCalls::Serve(*router, request, response);
      });
  node->cluster_service_ = std::make_unique<api::ClusterService>(
      [n = node.get()] { return n->Map(); },
      [n = node.get()](const std::string& id, bool drain) {
        return cluster::SetDraining(*n->etcd_, n->options_.cluster, id, drain);
      },
      [n = node.get()](int shard, const std::string& id, bool undo) {
        return n->MoveShard(shard, id, undo);
      },
      [n = node.get()](int shard, const std::string& id, bool accept_loss) {
        return n->RecoverShard(shard, id, accept_loss);
      },
      o.authorizer);
  // The copies this node held before: open now, so that a store that
  // cannot open stops the node at once, and so that the node can report
  // its positions as soon as it joins.
  for (int shard = 0; shard < o.shards; ++shard) {
    // A copy whose removal a crash cut short (ShardHost::BecomeNone).
    std::error_code ignored;
    std::filesystem::remove_all(RemovedCopyDir(ShardDir(o.data_dir, shard)),
                                ignored);
    if (!std::filesystem::exists(ShardDir(o.data_dir, shard))) continue;
    absl::StatusOr<std::unique_ptr<ShardHost>> host = node->OpenHost(shard);
    if (!host.ok()) return host.status();
    node->AddHost(shard, *std::move(host));
  }
  if (o.engine.metrics != nullptr) {
    node->collector_ = o.engine.metrics->AddCollector(
        [n = node.get()] { n->CollectMetrics(); });
    node->source_ = o.engine.metrics->AddSource(
        [n = node.get()] { return n->ShardFamilies(); });
  }
  return node;
}

absl::StatusOr<std::unique_ptr<ShardHost>> ClusterNode::OpenHost(int shard) {
  const ClusterNodeOptions& o = options_;
  auto open_store = [sync = o.sync, resources = resources_,
                     keep = o.replication_log_keep](const std::string& dir)
      -> absl::StatusOr<std::unique_ptr<storage::MessageStore>> {
    // Backups' copies append to their memtables (Replica::Open); each copy
    // keeps its log for the backups it may ship to (ReplicatedStore).
    return storage::RocksDbStore::Open({.path = dir,
                                        .sync = sync,
                                        .shared = resources,
                                        .switchable_memtables = true,
                                        .keep_write_log = keep});
  };
  const std::string store_dir = ShardDir(o.data_dir, shard);
  absl::StatusOr<std::unique_ptr<storage::MessageStore>> store =
      open_store(store_dir);
  if (!store.ok()) return store.status();
  ShardHostOptions host;
  host.shard = shard;
  host.shard_count = static_cast<int>(gates_.size());
  host.node_id = o.node_id;
  host.min_insync = o.min_insync;
  host.engine = o.engine;
  if (o.engine.metrics != nullptr) {
    // The engine's metrics go to a registry of the shard's own, which the
    // node's renders with the shard label (ShardFamilies).
    absl::MutexLock lock(&mu_);
    std::unique_ptr<metrics::Registry>& registry = shard_metrics_[shard];
    if (registry == nullptr) registry = std::make_unique<metrics::Registry>();
    host.engine.metrics = registry.get();
  }
  host.clock = o.clock;
  host.metrics = o.engine.metrics;
  host.store_dir = store_dir;
  host.open_store = std::move(open_store);
  host.peer_channel = peer_channel_;
  host.peer_request_bytes = o.peer_request_bytes;
  return std::make_unique<ShardHost>(*std::move(store), std::move(host),
                                     gates_[shard].get(), replication_.get());
}

void ClusterNode::AddHost(int shard, std::unique_ptr<ShardHost> host) {
  ShardHost* const h = host.get();
  replication_->SetRebuildHandler(
      shard, [h](std::string why) { h->RequestRebuild(std::move(why)); });
  h->WatchHealth(
      [this, shard](ShardHealth health) { OnShardHealth(shard, health); });
  cluster::Member* member = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!leaving_) {
      member = member_.get();
      hosts_[shard] = std::move(host);
    }
  }
  if (host != nullptr) {  // The node is leaving: the host never served.
    host.reset();
    replication_->SetRebuildHandler(shard, nullptr);
    return;
  }
  // Join attaches the hosts it finds; those made after, here.
  if (member != nullptr) h->Attach(member);
}

std::vector<ShardHost*> ClusterNode::Hosts() const {
  absl::MutexLock lock(&mu_);
  std::vector<ShardHost*> hosts;
  for (const auto& [shard, host] : hosts_) hosts.push_back(host.get());
  return hosts;
}

ShardHost* ClusterNode::HostOf(int shard) const {
  absl::MutexLock lock(&mu_);
  auto it = hosts_.find(shard);
  return it == hosts_.end() ? nullptr : it->second.get();
}

std::vector<int> ClusterNode::hosted_shards() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> shards;
  for (const auto& [shard, host] : hosts_) shards.push_back(shard);
  return shards;
}

void ClusterNode::OnView(const cluster::ClusterView& view) {
  std::vector<bool> hosted(gates_.size(), false);
  {
    absl::MutexLock lock(&mu_);
    if (leaving_) return;
    for (const auto& [shard, host] : hosts_) hosted[shard] = true;
  }
  for (const auto& [shard, s] : view.shards) {
    if (shard < 0 || shard >= static_cast<int>(gates_.size())) {
      if (std::exchange(told_shard_count_, true)) continue;
      spdlog::error(
          "cluster: node {} serves {} shards, but cluster {} has shard {}: "
          "every node of a cluster needs the cluster's shard count",
          options_.node_id, gates_.size(), options_.cluster, shard);
      continue;
    }
    if (hosted[shard] || (s.record.primary != options_.node_id &&
                          !s.record.IsReplica(options_.node_id))) {
      continue;
    }
    absl::StatusOr<std::unique_ptr<ShardHost>> host = OpenHost(shard);
    if (!host.ok()) {
      spdlog::error("cluster: node {} cannot open its copy of shard {}: {}",
                    options_.node_id, shard,
                    std::string(host.status().message()));
      continue;
    }
    spdlog::info("cluster: node {} holds a copy of shard {} from now on, in {}",
                 options_.node_id, shard, ShardDir(options_.data_dir, shard));
    AddHost(shard, *std::move(host));
    hosted[shard] = true;
  }
  for (ShardHost* host : Hosts()) host->OnView(view);
  // The hosts keep their gates; the others refuse, naming the primary.
  for (size_t shard = 0; shard < gates_.size(); ++shard) {
    if (hosted[shard]) continue;
    auto it = view.shards.find(static_cast<int>(shard));
    if (it != view.shards.end() &&
        it->second.record.primary == options_.node_id) {
      gates_[shard]->Close(absl::UnavailableError(
          absl::StrCat("node ", options_.node_id, " is the primary of shard ",
                       shard, " but cannot open its copy (see its log)")));
      continue;
    }
    gates_[shard]->Close(ShardRefusal(view, static_cast<int>(shard),
                                      static_cast<int>(gates_.size()),
                                      options_.node_id));
  }
}

void ClusterNode::OnShardHealth(int shard, const ShardHealth& health) {
  absl::MutexLock lock(&health_mu_);
  shard_health_[shard] = health;
  std::vector<ShardHealth> all;
  for (const auto& [n, h] : shard_health_) all.push_back(h);
  const NodeHealth now = OverShards(all);
  if (now == told_) return;
  told_ = now;
  if (health_listener_) health_listener_(now);
}

ClusterNode::ClusterNode(ClusterNodeOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<size_t> ClusterNode::ReloadPeerSecrets() {
  return peer_auth_->Reload();
}

std::string ClusterNode::PeerAuthSummary() const {
  return peer_auth_->Describe();
}

ClusterNode::~ClusterNode() {
  if (options_.engine.metrics != nullptr) {
    options_.engine.metrics->RemoveCollector(collector_);
    options_.engine.metrics->RemoveCollector(source_);
  }
  Leave();
}

broker::Broker* ClusterNode::broker() { return router_.get(); }

std::vector<grpc::Service*> ClusterNode::services() {
  return {replication_->service(), cluster_service_.get()};
}

absl::Status ClusterNode::HoldsEveryShardItIsInSyncFor() {
  for (int shard = 0; shard < options_.shards; ++shard) {
    if (HostOf(shard) != nullptr) continue;  // A copy was here at start.
    absl::StatusOr<cluster::GetResult> read =
        etcd_->Get(cluster::ShardKey(options_.cluster, shard));
    if (!read.ok()) return read.status();
    if (!read->kv.has_value()) continue;
    absl::StatusOr<cluster::ShardRecord> record =
        cluster::DecodeShardRecord(read->kv->value);
    if (!record.ok()) return record.status();
    const std::string lost =
        absl::StrCat("but this node holds no copy of it (",
                     ShardDir(options_.data_dir, shard),
                     " is missing: a lost or wiped --data_dir?)");
    // Leading from an empty copy would lose the shard: its backups would
    // rebuild themselves from it. Without this node's lease the controller
    // promotes one of them, and this node then joins as a backup.
    if (record->primary == options_.node_id) {
      return absl::UnavailableError(absl::StrCat(
          "shard ", shard, "'s record names this node its primary (epoch ",
          record->epoch, "), ", lost,
          "; it joins once the cluster has promoted another copy"));
    }
    // An in-sync backup may be promoted: alive with an empty copy, it
    // could be the only one left when the primary dies. The primary takes
    // a backup that does not answer out of the in-sync set (its lag
    // timeout); this node then joins, and is rebuilt.
    if (record->InIsr(options_.node_id)) {
      return absl::UnavailableError(absl::StrCat(
          "shard ", shard, "'s in-sync set names this node (epoch ",
          record->epoch, ", primary ", record->primary, "), ", lost,
          "; it joins once the primary has taken it out of the in-sync set"));
    }
    // An eligible copy may be promoted when no in-sync one is left: this
    // node, not being one any more, says so before it joins.
    if (record->IsEligible(options_.node_id)) {
      cluster::ShardRecord next = *record;
      std::erase(next.eligible, options_.node_id);
      absl::StatusOr<cluster::TxnResult> written = etcd_->PutIfModRevision(
          cluster::ShardKey(options_.cluster, shard),
          cluster::EncodeShardRecord(next), read->kv->mod_revision);
      if (!written.ok()) return written.status();
      if (!written->succeeded) {
        return absl::UnavailableError(
            absl::StrCat("shard ", shard,
                         "'s record changed while this node took itself "
                         "out of its eligible copies; trying again"));
      }
      spdlog::warn(
          "cluster: node {} is no longer an eligible copy of shard {} (epoch "
          "{}), {}",
          options_.node_id, shard, record->epoch, lost);
    }
  }
  return absl::OkStatus();
}

absl::Status ClusterNode::Join(const std::string& address) {
  if (absl::Status holds = HoldsEveryShardItIsInSyncFor(); !holds.ok()) {
    return holds;
  }
  cluster::MemberOptions member;
  member.cluster = options_.cluster;
  member.node_id = options_.node_id;
  member.address = address;
  member.zone = options_.zone;
  member.lease_ttl = options_.lease_ttl;
  member.shards = options_.shards;
  member.min_insync = options_.min_insync;
  member.replication_factor = options_.replication_factor;
  for (size_t shard = 0; shard < restored_epochs_.size(); ++shard) {
    cluster::ShardRecord record;
    record.epoch = restored_epochs_[shard] + 1;
    record.primary = options_.node_id;
    record.replicas = {options_.node_id};
    record.isr = {options_.node_id};
    member.create_with[static_cast<int>(shard)] = std::move(record);
  }
  cluster::Member::Callbacks callbacks;
  callbacks.position = [this](int shard) -> std::optional<cluster::LogEnd> {
    ShardHost* host = HostOf(shard);
    return host == nullptr ? std::nullopt : host->Position();
  };
  callbacks.handed_over = [this](int shard) -> std::optional<int64_t> {
    ShardHost* host = HostOf(shard);
    return host == nullptr ? std::nullopt : host->HandedOver();
  };
  callbacks.on_view = [this](const cluster::ClusterView& view) {
    OnView(view);
  };
  absl::StatusOr<std::unique_ptr<cluster::Member>> joined =
      cluster::Member::Join(*etcd_, std::move(member), std::move(callbacks));
  if (!joined.ok()) return joined.status();
  cluster::Member* const m = joined->get();
  std::vector<ShardHost*> hosts;
  {
    absl::MutexLock lock(&mu_);
    member_ = *std::move(joined);
    for (const auto& [shard, host] : hosts_) hosts.push_back(host.get());
  }
  // Hosts made from now on are attached as they are made (AddHost).
  for (ShardHost* host : hosts) host->Attach(m);
  return absl::OkStatus();
}

void ClusterNode::WatchHealth(absl::AnyInvocable<void(NodeHealth)> listener) {
  absl::MutexLock lock(&health_mu_);
  health_listener_ = std::move(listener);
  health_listener_(told_);
}

std::optional<cluster::ClusterView> ClusterNode::View() const {
  absl::MutexLock lock(&mu_);
  if (member_ == nullptr) return std::nullopt;
  return member_->view();
}

std::shared_ptr<grpc::Channel> ClusterNode::PeerChannel(
    const std::string& address) const {
  return peer_channel_(address);
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
    out.set_zone(node.zone);
  }
  for (const std::string& id : view.draining) map.add_draining(id);
  for (const auto& [shard, id] : view.pins) {
    hourglass::v1::ShardPin& pin = *map.add_pins();
    pin.set_shard(static_cast<uint32_t>(shard));
    pin.set_node(id);
  }
  const absl::Time now = absl::Now();
  for (const auto& [number, shard] : view.shards) {
    hourglass::v1::ShardInfo& out = *map.add_shards();
    out.set_shard(static_cast<uint32_t>(number));
    out.set_epoch(shard.record.epoch);
    out.set_primary(shard.record.primary);
    for (const std::string& r : shard.record.replicas) out.add_replicas(r);
    for (const std::string& r : shard.record.isr) out.add_isr(r);
    out.set_transfer_to(shard.record.transfer_to);
    for (const std::string& r : shard.record.eligible) out.add_eligible(r);
    auto host = hosts_.find(number);
    if (shard.record.primary != options_.node_id || host == hosts_.end()) {
      continue;
    }
    const std::optional<ShardHost::Progress> progress =
        host->second->progress();
    if (!progress.has_value()) continue;
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
  std::map<int, std::unique_ptr<ShardHost>> hosts;
  {
    absl::MutexLock lock(&mu_);
    leaving_ = true;
    member = std::move(member_);
    hosts = std::move(hosts_);
    hosts_.clear();
  }
  for (auto& [shard, host] : hosts) {
    host->StepDown("this node is shutting down");
  }
  // The member first: it calls into the hosts.
  member.reset();
  for (auto& [shard, host] : hosts) {
    host.reset();
    replication_->SetRebuildHandler(shard, nullptr);
  }
}

}  // namespace hourglass::node
