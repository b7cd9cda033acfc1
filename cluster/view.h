#ifndef HOURGLASS_CLUSTER_VIEW_H_
#define HOURGLASS_CLUSTER_VIEW_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "cluster/records.h"

namespace hourglass::cluster {

// The cluster as a member last read it from etcd.
struct ClusterView {
  struct Shard {
    ShardRecord record;
    int64_t mod_revision = 0;  // For compare-and-set.
  };
  // The etcd revision the view is at.
  int64_t revision = 0;
  // The live nodes, by id.
  std::map<std::string, NodeRecord> nodes;
  // The shards created, by number.
  std::map<int, Shard> shards;
  // The node id of the controller; empty while there is none.
  std::string controller;
  // The nodes being drained (keys.h DrainKey), alive or not.
  std::set<std::string> draining;
  // The shards an operator moved (keys.h PinKey): shard -> node id, alive
  // or not.
  std::map<int, std::string> pins;
};

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_VIEW_H_
