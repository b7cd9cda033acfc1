#include "cluster/record_checks.h"

#include "absl/strings/str_cat.h"

namespace hourglass::cluster {

absl::Status ConfirmHello(const ClusterView& view, int shard, int64_t epoch,
                          const std::string& primary) {
  auto it = view.shards.find(shard);
  const int64_t known = it == view.shards.end() ? 0 : it->second.record.epoch;
  if (epoch > known) {
    return absl::UnavailableError(
        absl::StrCat("this node has not seen epoch ", epoch, " of shard ",
                     shard, " yet (it knows epoch ", known, "): try again"));
  }
  const ShardRecord& record = it->second.record;
  if (epoch < known || record.primary != primary) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", shard, " is not led by ", primary, " at epoch ", epoch,
        ": its record names ",
        record.primary.empty() ? std::string("no primary")
                               : absl::StrCat("primary ", record.primary),
        " at epoch ", known));
  }
  return absl::OkStatus();
}

absl::Status MayFetchCheckpoint(const ClusterView& view, int shard,
                                const std::string& node, bool snapshot) {
  if (snapshot) {
    if (view.nodes.contains(node)) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat("a snapshot of shard ", shard,
                     " goes only to a live node "
                     "of the cluster, and ",
                     node.empty() ? std::string("the caller named none")
                                  : absl::StrCat(node, " is not one")));
  }
  auto it = view.shards.find(shard);
  if (it != view.shards.end() && it->second.record.IsReplica(node)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("a checkpoint of shard ", shard,
                   " goes only to a replica the shard's record names, and ",
                   node.empty() ? std::string("the caller named none")
                                : absl::StrCat(node, " is not one")));
}

}  // namespace hourglass::cluster
