#include "node/shard_refusal.h"

#include "absl/strings/str_cat.h"
#include "api/redirect.h"
#include "cluster/member.h"

namespace hourglass::node {

absl::Status ShardRefusal(const cluster::ClusterView& view, int shard,
                          int shard_count, const std::string& node_id) {
  auto it = view.shards.find(shard);
  if (it == view.shards.end()) {
    return absl::UnavailableError(
        absl::StrCat("the cluster has not created shard ", shard,
                     " yet (it waits for --replication_factor nodes to join)"));
  }
  const cluster::ShardRecord& record = it->second.record;
  auto primary = view.nodes.find(record.primary);
  if (primary == view.nodes.end()) {
    return absl::UnavailableError(
        absl::StrCat("shard ", shard, "'s primary ", record.primary,
                     " is gone; a failover is in progress, retry shortly"));
  }
  return api::WithPrimary(
      absl::UnavailableError(
          absl::StrCat("node ", node_id, " is not the primary of shard ", shard,
                       ": its primary is ", record.primary, " at ",
                       primary->second.address, " (epoch ", record.epoch, ")")),
      api::Primary{primary->second.address, record.epoch, shard_count});
}

}  // namespace hourglass::node
