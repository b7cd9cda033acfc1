#ifndef HOURGLASS_CLUSTER_PLACEMENT_H_
#define HOURGLASS_CLUSTER_PLACEMENT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "cluster/records.h"

namespace hourglass::cluster {

// What the controller decided for one shard: a new record to write by
// compare-and-set, or nothing (with why, while it waits).
struct ShardPlan {
  // The record to write; nullopt to leave the shard as it is.
  std::optional<ShardRecord> write;
  // Why: the change made ("created", "promoted b after a's lease ended",
  // "replaced c by d") or what it waits for. Logged by the controller.
  std::string reason;
};

struct PlacementOptions {
  // Replicas per shard (--replication_factor).
  int replication_factor = 3;
  // --min_insync: below it, copies that leave the in-sync set stay
  // eligible for promotion (KeepEligible).
  int min_insync = 2;
  // Whether the controller has waited long enough for the in-sync backups
  // of a shard whose primary is gone to report their positions: before,
  // it promotes only once every one alive has reported; after, the most
  // advanced of those that did.
  bool position_wait_over = false;
};

// The controller's decision for shard `shard`, whose record is `current`
// (nullopt: not created yet), given the nodes alive now (by node id; their
// records carry the positions reported). A pure function: the rules are
//
//   - No record: once `replication_factor` nodes are alive, create it at
//     epoch 1 with that many replicas, all in sync (every copy is empty);
//     the primary and order rotate with the shard number, over the nodes
//     with their zones (NodeRecord::zone) interleaved, so that a shard's
//     replicas spread over the zones.
//   - The primary alive: replace each replica whose node is gone by a live
//     node holding none of the shard, while there is one, from the zones
//     holding the fewest of the shard's replicas first (the newcomer is
//     not in the ISR until it has caught up; the primary adds it), once
//     the primary has taken the gone one out of the ISR; then,
//     the same way, add live nodes while the shard has fewer than
//     `replication_factor` replicas (a cluster restored from a snapshot
//     starts each shard on the restoring node alone).
//   - The primary alive and a leader transfer under way (`transfer_to`,
//     set by rebalance.h): once the primary has reported, in its node
//     record under the current epoch, the index where it stopped writing
//     (the target holds everything up to it durably), make the target
//     primary at epoch + 1, the in-sync set unchanged but for the order.
//     The transfer is given up (transfer_to cleared) if the target is gone
//     or out of the in-sync set; nothing else changes meanwhile.
//   - The primary gone (its node's lease ended, or it gave the shard back:
//     no primary in the record): promote, at epoch + 1, the in-sync backup
//     alive whose copy ends highest, by (last epoch, index), as reported
//     under the current epoch (ties: the lowest node id). It waits for every
//     one alive to report unless the wait is over (`position_wait_over`),
//     and for at least one. The new ISR is the new primary and the in-sync
//     backups that reported; the old primary stays a replica (to be
//     rebuilt) unless a spare node replaces it.
//   - The primary gone and no in-sync backup alive: promote the same way
//     among the eligible copies alive (ShardRecord::eligible: each holds
//     every acknowledged write). The new ISR is the new primary and the
//     eligible copies that reported an end of the same epoch (prefixes of
//     its copy); the others stay eligible. None alive either: nothing can
//     be promoted without losing acknowledged writes, so the shard waits
//     (an operator may accept the loss: `hourglass cluster recover`).
//
// Every record it writes keeps the eligible copies by KeepEligible, and a
// replica that is eligible is never replaced by a spare: it may be the
// last copy of an acknowledged write.
ShardPlan PlanShard(int shard, const std::optional<ShardRecord>& current,
                    const std::map<std::string, NodeRecord>& alive,
                    const PlacementOptions& options);

// Brings `next.eligible`, for a change of the shard's record from `from` to
// `next`, to what it must be (a pure function; the primary's in-sync set
// changes and the controller's writes both use it):
//   - a member of `from`'s in-sync set that is not in `next`'s becomes
//     eligible when `next`'s in-sync set is smaller than `min_insync`: it
//     held every acknowledged write when it left, and no write can be
//     acknowledged while the set is that small;
//   - a member of `next`'s in-sync set, or a node that is not one of
//     `next`'s replicas, is not eligible;
//   - none is eligible once `next`'s in-sync set has `min_insync` members or
//     more: writes can then be acknowledged without the eligible copies.
void KeepEligible(const ShardRecord& from, ShardRecord& next, int min_insync);

// The positions node `node` reports in its node record
// (NodeRecord::positions) for the controller, given the shards' records and
// the nodes alive now; a pure function, called on every view
// (Member::ReportPositions):
//
//   - a replica of a shard whose primary is gone (or gave the shard back)
//     reports where its copy ends (`position`: the epoch and index of its
//     last entry applied), at the shard's epoch: PlanShard promotes the
//     most advanced in-sync (or eligible) one, and an operator's recovery
//     (PlanRecovery) may promote any;
//   - the primary of a shard with a leader transfer under way reports,
//     once it has stopped writing and the target holds its whole log
//     (`handed_over`), where its log ends, for PlanShard to finish it.
//
// Each report is of the copy as it is now: one that grows (entries still
// arriving from the old primary's stream) is reported again, and one
// whose reason has passed (the primary came back, the transfer was given
// up or finished) is withdrawn. A report kept from before would let the
// controller promote a backup less advanced than it said, or finish a
// later transfer at the same epoch before the primary stopped writing.
// Shards for which a callback gives nullopt have no report.
std::map<int, Position> PositionsToReport(
    std::string_view node, const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    absl::FunctionRef<std::optional<LogEnd>(int shard)> position,
    absl::FunctionRef<std::optional<int64_t>(int shard)> handed_over);

// An operator's promotion of a named copy (`hourglass cluster recover`),
// for a shard that has nothing safe left to promote, and what it may lose.
struct Recovery {
  // The record to write (compare-and-set): `node` the primary at the next
  // epoch, alone in the in-sync set, no copy eligible.
  ShardRecord write;
  // Where `node`'s copy ends, as it reported.
  LogEnd copy;
  // The most advanced copy another node reported, if one did.
  std::string best_node;
  LogEnd best;
  // What the promotion may lose, in a sentence.
  std::string loss;
};

// Plans the recovery of shard `shard` (record `current`, nodes alive now,
// with the positions they report) from node `node`'s copy. A pure
// function. Errors:
//   FAILED_PRECONDITION  the shard's primary is alive; or an in-sync or
//                        eligible copy is alive, which the controller
//                        promotes without loss (the message names it).
//   NOT_FOUND            `node` is not alive, or has not reported its copy
//                        of the shard at its epoch (replicas report once
//                        they see the primary gone).
absl::StatusOr<Recovery> PlanRecovery(
    int shard, const ShardRecord& current,
    const std::map<std::string, NodeRecord>& alive, const std::string& node);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_PLACEMENT_H_
