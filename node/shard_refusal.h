#ifndef HOURGLASS_NODE_SHARD_REFUSAL_H_
#define HOURGLASS_NODE_SHARD_REFUSAL_H_

#include <string>

#include "absl/status/status.h"

namespace hourglass::cluster {
struct ClusterView;
}  // namespace hourglass::cluster

namespace hourglass::node {

// Why node `node_id` refuses the calls of `shard`, one of the cluster's
// `shard_count`, as `view` has it: an UNAVAILABLE status that names the
// shard's primary and the shard count (api::WithPrimary, for the
// hourglass-primary, hourglass-epoch and hourglass-shards trailers) when the
// view knows where it is, and otherwise says what the cluster waits for (the
// shard not created yet, its primary gone while a failover is in progress).
// REQUIRES: the view does not name `node_id` the shard's primary.
absl::Status ShardRefusal(const cluster::ClusterView& view, int shard,
                          int shard_count, const std::string& node_id);

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_SHARD_REFUSAL_H_
