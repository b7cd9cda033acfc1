#include "node/cluster_node.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/redirect.h"
#include "cluster/etcd_client.h"
#include "cluster/member.h"
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
  std::unique_ptr<ClusterNode> node(new ClusterNode(std::move(options)));
  const ClusterNodeOptions& o = node->options_;
  absl::StatusOr<std::unique_ptr<storage::MessageStore>> store =
      storage::RocksDbStore::Open({
          .path = o.data_dir + "/shards/0",
          .sync = o.sync,
          .block_cache_bytes = o.block_cache_bytes,
      });
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd =
      cluster::EtcdClient::Create(cluster::EtcdOptions{o.etcd});
  if (!etcd.ok()) return etcd.status();
  node->etcd_ = *std::move(etcd);
  node->gate_ = std::make_unique<PrimaryGate>(
      "this node has not joined its cluster yet");
  node->hint_ = std::make_unique<api::PrimaryHint>();
  node->replication_ = std::make_unique<replication::ReplicationService>();
  ShardHostOptions host;
  host.shard = 0;
  host.node_id = o.node_id;
  host.min_insync = o.min_insync;
  host.engine = o.engine;
  host.clock = o.clock;
  node->host_ = std::make_unique<ShardHost>(node->store_.get(), std::move(host),
                                            node->gate_.get(),
                                            node->hint_.get(),
                                            node->replication_.get());
  return node;
}

ClusterNode::ClusterNode(ClusterNodeOptions options)
    : options_(std::move(options)) {}

ClusterNode::~ClusterNode() { Leave(); }

broker::Broker* ClusterNode::broker() { return gate_.get(); }

std::vector<grpc::Service*> ClusterNode::services() {
  return {replication_->service()};
}

absl::Status ClusterNode::Join(const std::string& address,
                               absl::AnyInvocable<void()> on_lost) {
  cluster::MemberOptions member;
  member.cluster = options_.cluster;
  member.node_id = options_.node_id;
  member.address = address;
  member.lease_ttl = options_.lease_ttl;
  member.shards = options_.shards;
  member.replication_factor = options_.replication_factor;
  cluster::Member::Callbacks callbacks;
  ShardHost* host = host_.get();
  callbacks.position = [host](int) { return host->Position(); };
  callbacks.on_view = [host](const cluster::ClusterView& view) {
    host->OnView(view);
  };
  callbacks.on_lost = [host, on_lost = std::move(on_lost)](
                          absl::Status status) mutable {
    host->StepDown(absl::StrCat("this node lost its etcd lease: ",
                                status.message()));
    if (on_lost) on_lost();
  };
  absl::StatusOr<std::unique_ptr<cluster::Member>> joined =
      cluster::Member::Join(*etcd_, std::move(member), std::move(callbacks));
  if (!joined.ok()) return joined.status();
  member_ = *std::move(joined);
  host_->Attach(member_.get());
  return absl::OkStatus();
}

void ClusterNode::Leave() {
  if (host_ != nullptr) host_->StepDown("this node is shutting down");
  // The member first: it calls into the host.
  member_.reset();
  host_.reset();
  replication_.reset();
  etcd_.reset();
}

}  // namespace hourglass::node
