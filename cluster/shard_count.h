#ifndef HOURGLASS_CLUSTER_SHARD_COUNT_H_
#define HOURGLASS_CLUSTER_SHARD_COUNT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cluster/etcd_client.h"

namespace hourglass::cluster {

// The shard count of a cluster created by a node given no --shards.
inline constexpr int kDefaultShardCount = 16;

// A cluster's shard count, as a node agreed on it with etcd.
struct ShardCount {
  // The cluster's shard count (at least 1).
  int count = 0;
  // Whether this node created it: the cluster had none, and this node
  // wrote the count it was given, or kDefaultShardCount.
  bool created = false;
};

// Agrees on cluster `cluster`'s shard count, which is fixed when the
// cluster is created and kept in etcd at
// ShardCountKey(cluster). If the cluster has no count yet, writes `given`,
// or kDefaultShardCount without one (created). Otherwise returns the
// cluster's: adopted when `given` is nullopt. Every node of a cluster must
// route topics by the same count. Errors:
//   INVALID_ARGUMENT     `given` below 1, or a `cluster` that ValidateName
//                        refuses (nothing written).
//   FAILED_PRECONDITION  `given` differs from the cluster's count: "cluster
//                        C has 4 shards, fixed when it was created; this
//                        node was started with --shards=16: give it
//                        --shards=4, or no --shards to take the cluster's".
//   DATA_LOSS            the key holds no count (names the key and value).
//   etcd's errors (UNAVAILABLE while etcd does not answer, ...).
absl::StatusOr<ShardCount> AgreeOnShardCount(EtcdClient& client,
                                             const std::string& cluster,
                                             std::optional<int> given);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_SHARD_COUNT_H_
