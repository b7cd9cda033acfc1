#ifndef HOURGLASS_CMD_HOURGLASSD_CLUSTER_JOIN_H_
#define HOURGLASS_CMD_HOURGLASSD_CLUSTER_JOIN_H_

#include <signal.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cluster/shard_count.h"
#include "node/cluster_node.h"

namespace hourglass::hourglassd {

// The shard count a node agreed on, or the signal that ended its wait.
struct AgreedShards {
  // Set unless `signal` is.
  cluster::ShardCount shards;
  // SIGTERM or SIGINT, when one came while etcd did not answer.
  std::optional<int> signal;
};

// Agrees on the shard count of the cluster of `options` (its etcd
// endpoints, TLS to etcd, and cluster name) before the node builds its
// shards (cluster::AgreeOnShardCount): `given` (--shards) for a cluster
// not created yet, or kDefaultShardCount (16) without it; the cluster's
// count for a cluster that exists, when it equals `given` or `given` is
// nullopt. Logs which. While etcd does not answer it tries again as
// JoinCluster does (a SIGTERM or SIGINT ends the wait and is returned).
// Errors: AgreeOnShardCount's other than etcd's silence, among them
// FAILED_PRECONDITION when `given` is not the cluster's count (the message
// says which to give); INVALID_ARGUMENT if the etcd client cannot be made.
absl::StatusOr<AgreedShards> AgreeOnShardCount(
    const node::ClusterNodeOptions& options, std::optional<int> given,
    const sigset_t& signals);

// Opens the cluster node of `options` once its shard count is settled:
// AgreeOnShardCount's with `given`, or, with options.restore_from, `given`
// or 0 (the snapshot's, ClusterNodeOptions::restore_from). Logs what it
// opened. Null if a SIGTERM or SIGINT among `signals` came while it waited
// for etcd (logged). Errors: AgreeOnShardCount's, ClusterNode::Open's.
absl::StatusOr<std::unique_ptr<node::ClusterNode>> OpenClusterNode(
    node::ClusterNodeOptions options, std::optional<int> given,
    const sigset_t& signals);

// Joins `node`'s cluster as `advertise` (ClusterNode::Join). While etcd
// does not answer (a node
// started before etcd, or during an outage of it) it tries again, the waits
// growing from 0.5 s to 5 s, each failure logged; a SIGTERM or SIGINT among
// `signals` (blocked by the caller) ends the wait and is returned, for the
// caller to shut down as usual. Returns nullopt once joined; errors other
// than etcd's silence (another live node with this --node_id, bad flags)
// as Join gives them. A SIGHUP meanwhile is taken and ignored.
absl::StatusOr<std::optional<int>> JoinCluster(node::ClusterNode& node,
                                               const std::string& advertise,
                                               const sigset_t& signals);

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_CLUSTER_JOIN_H_
