#ifndef HOURGLASS_CLUSTER_KEYS_H_
#define HOURGLASS_CLUSTER_KEYS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace hourglass::cluster {

// The keys a cluster keeps in etcd, all under one prefix per cluster
// (README.md here has what each holds):
//   /hourglass/<cluster>/nodes/<node_id>   a node's address, under its lease
//   /hourglass/<cluster>/controller        the controller election
//   /hourglass/<cluster>/shards/<n>        a shard's epoch and replicas
//   /hourglass/<cluster>/shard_count       the shard count, in decimal
//   /hourglass/<cluster>/drains/<node_id>  a node being emptied (no value)
//   /hourglass/<cluster>/pins/<n>          the node shard n is moved to
// <cluster> is --cluster (default "hourglass"), <node_id> --node_id.

// Checks a cluster name or node id: 1 to 200 of [A-Za-z0-9._-], so that it
// never contains the "/" that separates key parts. INVALID_ARGUMENT, naming
// `what` ("--cluster", "--node_id") and the value, otherwise.
absl::Status ValidateName(std::string_view what, std::string_view name);

// "/hourglass/<cluster>/". REQUIRES: ValidateName accepts `cluster`, as for
// every function below.
std::string ClusterPrefix(std::string_view cluster);
// "/hourglass/<cluster>/controller".
std::string ControllerKey(std::string_view cluster);
// "/hourglass/<cluster>/nodes/", the prefix of every node's key.
std::string NodesPrefix(std::string_view cluster);
// "/hourglass/<cluster>/nodes/<node_id>".
std::string NodeKey(std::string_view cluster, std::string_view node_id);
// "/hourglass/<cluster>/shards/<shard>", the shard in decimal.
std::string ShardKey(std::string_view cluster, int shard);
// "/hourglass/<cluster>/shard_count": how many shards the cluster has,
// written once, by the first member to join (--shards).
std::string ShardCountKey(std::string_view cluster);
// "/hourglass/<cluster>/drains/<node_id>": present while the node is being
// drained (`hourglass cluster drain`): the controller moves its replicas to
// other nodes. Not under a lease: a drain outlives restarts until undone.
std::string DrainKey(std::string_view cluster, std::string_view node_id);
// "/hourglass/<cluster>/pins/": the prefix of every pin's key.
std::string PinsPrefix(std::string_view cluster);
// "/hourglass/<cluster>/pins/<shard>", the shard in decimal: its value is
// the id of the node an operator moved the shard to (`hourglass cluster
// move`); the controller keeps the shard's primary there while that node
// is alive and not draining (rebalance.h). Not under a lease: a pin
// outlives restarts until undone.
std::string PinKey(std::string_view cluster, int shard);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_KEYS_H_
