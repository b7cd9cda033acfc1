#ifndef HOURGLASS_NODE_NODE_HEALTH_H_
#define HOURGLASS_NODE_NODE_HEALTH_H_

namespace hourglass::node {

// What a cluster node's grpc.health.v1 says (node/README.md, "Health";
// hourglassd sets it from ClusterNode::WatchHealth).
struct NodeHealth {
  // The whole server's status (""): the node does its part for the shard.
  // It is the primary and takes writes, or a backup in the shard's in-sync
  // set (it holds every acknowledged write, may be promoted, and sends
  // clients to the primary). False before the shard exists, for a backup
  // that is catching up or being rebuilt, for a node that holds no copy,
  // and from the moment the node leaves (SIGTERM, lost lease).
  bool member = false;
  // api::kPrimaryHealthService: the node is the shard's primary, its engine
  // serves clients and its store takes writes.
  bool primary = false;

  bool operator==(const NodeHealth&) const = default;
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_NODE_HEALTH_H_
