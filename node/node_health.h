#ifndef HOURGLASS_NODE_NODE_HEALTH_H_
#define HOURGLASS_NODE_NODE_HEALTH_H_

#include <vector>

namespace hourglass::node {

// What a cluster node's grpc.health.v1 says (node/README.md, "Health";
// hourglassd sets it from ClusterNode::WatchHealth).
struct NodeHealth {
  // The whole server's status (""): the node does its part for every shard
  // whose record names it. For each, it is the primary and takes writes,
  // or a backup in the shard's in-sync set (it holds every acknowledged
  // write, may be promoted, and sends clients to the primary). False
  // before any shard names it (fewer than --replication_factor nodes have
  // joined, or it holds no copy), while any of its backups is catching up
  // or being rebuilt, and from the moment the node leaves (SIGTERM, lost
  // lease).
  bool member = false;
  // api::kPrimaryHealthService: the node is the primary of at least one
  // shard, and of each shard it is the primary of, the engine serves
  // clients and the store takes writes.
  bool primary = false;

  bool operator==(const NodeHealth&) const = default;
};

// One shard's part in its node's health (ShardHost::health).
struct ShardHealth {
  // The shard's record names this node: a replica, or the primary.
  bool named = false;
  bool named_primary = false;
  // For this shard alone: member, the primary taking writes or a backup in
  // the in-sync set; primary, the primary taking writes.
  NodeHealth node;

  bool operator==(const ShardHealth&) const = default;
};

// The node's health from its shards', as NodeHealth says.
NodeHealth OverShards(const std::vector<ShardHealth>& shards);

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_NODE_HEALTH_H_
