#ifndef HOURGLASS_CLUSTER_REBALANCE_H_
#define HOURGLASS_CLUSTER_REBALANCE_H_

#include <map>
#include <optional>
#include <set>
#include <string>

#include "cluster/records.h"

namespace hourglass::cluster {

struct RebalanceOptions {
  // Replicas per shard (--replication_factor). Default: 3.
  int replication_factor = 3;
  // Fewest members of a shard's in-sync set (--min_insync). Default: 2.
  int min_insync = 2;
};

// One change of one shard record, to write by compare-and-set.
struct RebalanceStep {
  int shard = 0;
  ShardRecord write;
  // What it does, for the controller's log: "shard 3: adds d to move a
  // replica from b (draining)".
  std::string reason;
};

// The controller's next step in moving replicas and leads toward the layout
// Balance (balance.h) gives for the nodes alive that are not draining, when
// no shard needs PlanShard (placement.h): every shard exists, with its
// primary alive. A pure function of its arguments. A replica moves in two
// steps, one shard at a time over the whole cluster:
//
//   1. add: the new node joins the shard's replicas, not the in-sync set
//      (the shard then has one replica more than replication_factor). Its
//      copy is rebuilt from the primary's checkpoint and tails the log;
//      the primary adds it to the in-sync set once it has caught up.
//   2. drop: once every node the layout wants is in the in-sync set, the
//      replica the layout no longer wants leaves the replicas and the
//      in-sync set: a gone or draining one first, else the one whose drop
//      leaves the cluster closest to balanced (of those that tie, the one
//      step 1 added the node to replace, as the layout of the cluster
//      before the add names it), but never the node step 1 added while
//      another can go (dropping it, or breaking a tie against the one it
//      replaces, would leave a layout from which the next step adds the
//      dropped node back). The
//      in-sync set then has at least as many members as before the move,
//      so a move never takes it below min_insync.
//
// A shard with a move under way is finished before another starts: while
// one has more replicas than replication_factor, the step is its drop (or
// nothing, while its new node catches up).
//
// Once no replica needs to move, primaries do, by leader transfer: a
// primary that is draining, or that the layout's leads put elsewhere
// (Balance evens the leads per node), is asked to hand its shard over to
// an in-sync backup: the step sets transfer_to, and PlanShard
// (placement.h) finishes it. A drained primary's shard moves its lead
// first and its replica after.
//
// Only a healthy shard starts a step: its primary alive, and every replica
// alive and in sync but those draining. A leader transfer starts only once
// the primary reports no position at the shard's epoch (one left from a
// transfer given up is withdrawn first: placement.h PositionsToReport).
// nullopt when the cluster is where the layout wants it, or no step can
// start now.
//
// Pins (`pins`: shard -> node id, keys.h PinKey, set by `hourglass cluster
// move --shard=N --to=NODE`) hold while their node is alive and not
// draining. A pinned shard moves to its node before any other step starts,
// the way any replica moves, and keeps it as primary:
//
//   1. add: if the node holds no copy, it joins the replicas (as above);
//   2. drop: once it is in sync, one old replica leaves: never the
//      primary nor the pinned node; a gone or draining one first, else
//      the one whose drop leaves the cluster closest to balanced. The
//      replica count is back to replication_factor;
//   3. transfer: the primary hands the lead over to the pinned node
//      (transfer_to), which PlanShard finishes.
//
// (With replication_factor 1 the lead moves before the old copy leaves:
// there is no other copy to drop.) Balance then counts the pinned node as
// the shard's fixed lead, so no later step moves the lead or the node's
// copy away; the shard's backups may still move, and other shards' leads
// even out around it. A pin whose node is gone or draining holds nothing:
// the shard fails over (PlanShard) and is placed as any other; once the
// node is back (or no longer draining) the shard moves to it again.
std::optional<RebalanceStep> PlanRebalance(
    const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining,
    const std::map<int, std::string>& pins, const RebalanceOptions& options);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_REBALANCE_H_
