// ClusterNode's operator actions on shards (node/cluster_node.h): moving a
// shard to a node (Cluster.MoveShard), and promoting a copy of a shard with
// nothing safe left (Cluster.RecoverShard).

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "cluster/member.h"
#include "cluster/placement.h"
#include "cluster/records.h"
#include "hourglass/v1/cluster.pb.h"
#include "node/cluster_node.h"
#include "spdlog/spdlog.h"

namespace hourglass::node {

absl::Status ClusterNode::CheckShard(int shard) const {
  const ClusterNodeOptions& o = options_;
  if (shard >= 0 && shard < o.shards) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("shard ", shard, " is out of range: cluster ", o.cluster,
                   " has shards 0 to ", o.shards - 1));
}

absl::StatusOr<cluster::ClusterView> ClusterNode::ViewForOperator(
    int shard) const {
  const ClusterNodeOptions& o = options_;
  if (absl::Status valid = CheckShard(shard); !valid.ok()) return valid;
  absl::MutexLock lock(&mu_);
  if (member_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "node ", o.node_id, " has not joined cluster ", o.cluster, " yet"));
  }
  return member_->view();
}

absl::Status ClusterNode::MoveShard(int shard, const std::string& node,
                                    bool undo) {
  const ClusterNodeOptions& o = options_;
  if (undo) {
    if (absl::Status valid = CheckShard(shard); !valid.ok()) return valid;
    return cluster::SetPin(*etcd_, o.cluster, shard, std::nullopt);
  }
  if (absl::Status valid = cluster::ValidateName("node", node); !valid.ok()) {
    return valid;
  }
  absl::StatusOr<cluster::ClusterView> read = ViewForOperator(shard);
  if (!read.ok()) return read.status();
  const cluster::ClusterView& view = *read;
  if (!view.nodes.contains(node)) {
    std::vector<std::string> live;
    for (const auto& [id, record] : view.nodes) live.push_back(id);
    return absl::NotFoundError(
        absl::StrCat("node ", node, " is not a live node of cluster ",
                     o.cluster, " (live: ", absl::StrJoin(live, ", "), ")"));
  }
  if (view.draining.contains(node)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node,
                     " is being drained, so it takes no shard: undo the "
                     "drain first (hourglass cluster drain --node=",
                     node, " --undo)"));
  }
  return cluster::SetPin(*etcd_, o.cluster, shard, node);
}

absl::StatusOr<hourglass::v1::RecoverShardResponse> ClusterNode::RecoverShard(
    int shard, const std::string& node, bool accept_loss) {
  if (absl::Status valid = cluster::ValidateName("node", node); !valid.ok()) {
    return valid;
  }
  absl::StatusOr<cluster::ClusterView> view = ViewForOperator(shard);
  if (!view.ok()) return view.status();
  auto it = view->shards.find(shard);
  if (it == view->shards.end()) {
    return absl::NotFoundError(
        absl::StrCat("shard ", shard, " is not created yet"));
  }
  const cluster::ClusterView::Shard& current = it->second;
  absl::StatusOr<cluster::Recovery> recovery =
      cluster::PlanRecovery(shard, current.record, view->nodes, node);
  if (!recovery.ok()) return recovery.status();
  hourglass::v1::RecoverShardResponse response;
  response.set_copy_epoch(recovery->copy.epoch);
  response.set_copy_index(recovery->copy.index);
  response.set_acknowledged_epoch(current.record.acknowledged.epoch);
  response.set_acknowledged_index(current.record.acknowledged.index);
  response.set_loss(recovery->loss);
  if (!accept_loss) return response;
  absl::StatusOr<cluster::TxnResult> written = etcd_->PutIfModRevision(
      cluster::ShardKey(options_.cluster, shard),
      cluster::EncodeShardRecord(recovery->write), current.mod_revision);
  if (!written.ok()) return written.status();
  if (!written->succeeded) {
    return absl::UnavailableError(
        absl::StrCat("shard ", shard,
                     "'s record changed meanwhile: nothing was done; look "
                     "again (hourglass cluster) and retry"));
  }
  spdlog::warn(
      "cluster: an operator recovered shard {} from node {}'s copy (entry {} "
      "of epoch {}), accepting loss: it leads at epoch {}; {}",
      shard, node, recovery->copy.index, recovery->copy.epoch,
      recovery->write.epoch, recovery->loss);
  response.set_recovered(true);
  response.set_epoch(recovery->write.epoch);
  return response;
}

}  // namespace hourglass::node
