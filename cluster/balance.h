#ifndef HOURGLASS_CLUSTER_BALANCE_H_
#define HOURGLASS_CLUSTER_BALANCE_H_

#include <set>
#include <string>
#include <vector>

namespace hourglass::cluster {

// Where the replicas of many shards should live (cluster/README.md; issue 22's
// placement): the target the controller moves a cluster toward, one
// replica move or leader transfer at a time. Pure functions of their
// arguments; nothing here talks to etcd or knows positions (failover stays
// PlanShard's, in placement.h).

// A node the layout may use.
struct BalanceNode {
  std::string id;
  // Its --zone; empty when zones are not used.
  std::string zone;
};

// Shard n's replicas are shards[n], its primary first.
struct Layout {
  std::vector<std::vector<std::string>> shards;

  friend bool operator==(const Layout&, const Layout&) = default;
};

struct BalanceOptions {
  // Replicas per shard (--replication_factor). Default: 3.
  int replication_factor = 3;
  // Shards (indexes into Layout::shards) whose lead stays with their first
  // replica, if it is alive: those an operator moved (`hourglass cluster
  // move`, rebalance.h). Step 3 passes no lead of theirs; the others' leads
  // even out around them. Default: none.
  std::set<int> fixed_leads;
};

// The layout to move toward from `current` with the nodes `alive` (at
// least one). In three steps:
//
//   1. Replicas on nodes not in `alive` are dropped (a dropped primary's
//      place goes to the next replica in order), and every shard is filled
//      up to replication_factor (or to the number of nodes, if fewer) with
//      the alive nodes holding the fewest replicas that do not hold it.
//   2. While one node holds at least two replicas more than another, a
//      backup replica moves from the most loaded node that can give one to
//      the least loaded node that can take it. Primaries do not move here.
//   3. While one node leads at least two shards more than another, leads
//      pass (leader transfers: no data moves) from the former toward the
//      latter: a shard's lead only to one of its own replicas, along the
//      shortest chain of shards that links the two nodes. The leads of
//      options.fixed_leads never pass.
//
// With zones (any node's zone not empty), a shard's replicas are spread
// over them as evenly as they can be: no zone holds more than
// ceil(replication_factor / zones) of one shard's replicas, so that with
// three zones and three replicas losing a zone keeps two. Steps 1 and 2
// never break that, and step 1 restores it where a node of a zone that
// has fewer can take a backup from a zone that has more.
//
// The result moves few replicas: those of nodes gone, and about as many as
// a joining node's fair share (replicas / nodes). Deterministic: ties go to
// the lowest node id and the lowest shard number.
Layout Balance(const Layout& current, const std::vector<BalanceNode>& alive,
               const BalanceOptions& options);

// Replicas in `to` that `from` did not have on the same node, over all
// shards: what a change of layout copies. REQUIRES: same shard count.
int ReplicasAdded(const Layout& from, const Layout& to);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_BALANCE_H_
