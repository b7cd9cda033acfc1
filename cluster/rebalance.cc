#include "cluster/rebalance.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/balance.h"

namespace hourglass::cluster {
namespace {

bool Contains(const std::vector<std::string>& nodes, const std::string& node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

std::vector<std::string> Without(std::vector<std::string> nodes,
                                 const std::string& node) {
  nodes.erase(std::remove(nodes.begin(), nodes.end(), node), nodes.end());
  return nodes;
}

// Whether `record` may start a step: its primary alive, every replica
// alive and in sync but those draining (they are leaving), and no copy
// eligible (the in-sync set is below --min_insync; PlanShard's to mend).
bool Healthy(const ShardRecord& record,
             const std::map<std::string, NodeRecord>& alive,
             const std::set<std::string>& draining) {
  bool healthy = alive.contains(record.primary) && record.eligible.empty();
  for (const std::string& node : record.replicas) {
    healthy &=
        draining.contains(node) || (alive.contains(node) && record.InIsr(node));
  }
  return healthy;
}

// Whether `record`'s primary still reports, at the shard's epoch, where it
// stopped writing for a leader transfer that was given up: until it
// withdraws that (PositionsToReport, placement.h), a new transfer must not
// start, or PlanShard would finish it on the old report while the primary
// still writes.
bool HandOverReported(int shard, const ShardRecord& record,
                      const std::map<std::string, NodeRecord>& alive) {
  auto primary = alive.find(record.primary);
  if (primary == alive.end()) return false;
  auto position = primary->second.positions.find(shard);
  return position != primary->second.positions.end() &&
         position->second.epoch == record.epoch;
}

// The pins that hold now: of shards that exist, to nodes alive and not
// draining.
std::map<int, std::string> ActivePins(
    const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining,
    const std::map<int, std::string>& pins) {
  std::map<int, std::string> active;
  for (const auto& [shard, node] : pins) {
    if (shards.contains(shard) && alive.contains(node) &&
        !draining.contains(node)) {
      active[shard] = node;
    }
  }
  return active;
}

// Whether shard `shard` is pinned (`active`) to a node that does not lead
// it yet: the pin's steps move it, and no other.
bool PinPending(int shard, const ShardRecord& record,
                const std::map<int, std::string>& active) {
  auto pin = active.find(shard);
  return pin != active.end() && pin->second != record.primary;
}

// What Balance starts from: the shards' replicas (shard n at index n: the
// shards are numbered from 0 without gaps when every one exists), a pinned
// node that holds its shard first, as if it led it already, with that
// lead fixed. A pinned node that does not hold its shard yet is left out
// of it until it has joined its replicas (the pin's first step).
struct Start {
  Layout layout;
  BalanceOptions options;
};
Start StartOf(const std::map<int, ShardRecord>& shards,
              const std::map<int, std::string>& active,
              const RebalanceOptions& options) {
  Start start;
  start.options.replication_factor = options.replication_factor;
  for (const auto& [number, record] : shards) {
    std::vector<std::string> replicas = record.replicas;
    auto pin = active.find(number);
    if (pin != active.end() && Contains(replicas, pin->second)) {
      replicas = Without(std::move(replicas), pin->second);
      replicas.insert(replicas.begin(), pin->second);
      start.options.fixed_leads.insert(
          static_cast<int>(start.layout.shards.size()));
    }
    start.layout.shards.push_back(std::move(replicas));
  }
  return start;
}

// How far `start` is from balanced: the replicas Balance would add.
int Distance(const Start& start, const std::vector<BalanceNode>& nodes) {
  return ReplicasAdded(start.layout,
                       Balance(start.layout, nodes, start.options));
}

// The first of `record`'s backups that `want` (Balance's replicas for the
// shard) does not hold: the one a replica move takes the place of. Empty
// when the layout keeps every backup.
std::string Leaving(const ShardRecord& record,
                    const std::vector<std::string>& want) {
  for (const std::string& node : record.replicas) {
    if (node != record.primary && !Contains(want, node)) return node;
  }
  return std::string();
}

// The replica the move under way in `shard` (its last replica the node it
// added) takes the place of: what the add step named, from the layout
// Balance gives for the cluster as it was before the add. Empty if that
// layout keeps every replica (the cluster changed since).
std::string MovedFrom(int shard, const std::map<int, ShardRecord>& shards,
                      const std::map<int, std::string>& active,
                      const std::vector<BalanceNode>& nodes,
                      const RebalanceOptions& options) {
  std::map<int, ShardRecord> before = shards;
  ShardRecord& record = before.at(shard);
  record.replicas.pop_back();
  const Start start = StartOf(before, active, options);
  const Layout target = Balance(start.layout, nodes, start.options);
  return Leaving(
      record, target.shards[std::distance(before.begin(), before.find(shard))]);
}

// Step 2 for `shard`, which has a replica more than it should: the
// replica to drop, and the step, or nullopt while the replicas that stay
// are not all in sync (or no replica but its primary and its pinned node
// could go).
std::optional<RebalanceStep> Drop(
    int shard, const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining,
    const std::map<int, std::string>& active,
    const std::vector<BalanceNode>& nodes, const RebalanceOptions& options) {
  const ShardRecord& record = shards.at(shard);
  auto pin = active.find(shard);
  // Gone nodes first, then draining ones, then the one whose drop leaves
  // the cluster closest to balanced; of those that tie, the one the move
  // was for (MovedFrom), else the lowest node id. Never the primary, nor
  // the node the shard is pinned to, and the node the move added (the last
  // replica) only if it is gone or draining or no other can go. Balance is
  // greedy: its distance may tie or favour dropping the newcomer, and a
  // tie broken against the replica the move was for leaves a layout from
  // which the next step adds the dropped node back, forever; nor is its
  // layout stable enough to always drop that replica whatever the
  // distance (from either of two layouts it may want the other).
  const std::string& added = record.replicas.back();
  const std::string moved_from =
      MovedFrom(shard, shards, active, nodes, options);
  std::string drop;
  int best = std::numeric_limits<int>::max();
  std::vector<std::string> candidates(record.replicas.begin() + 1,
                                      record.replicas.end());
  std::sort(candidates.begin(), candidates.end());
  for (const std::string& node : candidates) {
    if (pin != active.end() && node == pin->second) continue;
    // Twice the distance, less one for the replica the move was for.
    int score;
    if (!alive.contains(node)) {
      score = -3;
    } else if (draining.contains(node)) {
      score = -2;
    } else if (node == added) {
      score = std::numeric_limits<int>::max() - 1;  // Only if none else.
    } else {
      Start start = StartOf(shards, active, options);
      std::vector<std::string>& replicas =
          start.layout
              .shards[std::distance(shards.begin(), shards.find(shard))];
      replicas = Without(replicas, node);
      score = 2 * Distance(start, nodes) - (node == moved_from ? 1 : 0);
    }
    if (score < best) {
      best = score;
      drop = node;
    }
  }
  if (drop.empty()) return std::nullopt;
  ShardRecord write = record;
  write.replicas = Without(record.replicas, drop);
  for (const std::string& node : write.replicas) {
    if (!record.InIsr(node)) return std::nullopt;  // Still catching up.
  }
  write.isr = Without(record.isr, drop);
  return RebalanceStep{
      shard, std::move(write),
      absl::StrCat("shard ", shard, ": ", drop, " leaves its replicas (",
                   absl::StrJoin(record.replicas, ","), " -> ",
                   absl::StrJoin(Without(record.replicas, drop), ","), ")",
                   draining.contains(drop) ? ", draining" : "")};
}

// The leader transfer of `shard` to `to`.
RebalanceStep Transfer(int shard, const ShardRecord& record,
                       const std::string& to, const char* why) {
  ShardRecord write = record;
  write.transfer_to = to;
  return RebalanceStep{
      shard, std::move(write),
      absl::StrCat("shard ", shard, ": hands its lead over from ",
                   record.primary, why, " to ", to)};
}

// A pinned shard's step toward its node, if one can start: the node joins
// its replicas (step 1 of a replica move; Drop does step 2 once it is in
// sync), then, once it is in sync, takes the lead.
std::optional<RebalanceStep> PinStep(
    int shard, const ShardRecord& record, const std::string& node,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining, int wanted) {
  if (!Healthy(record, alive, draining)) return std::nullopt;
  if (!record.IsReplica(node)) {
    if (static_cast<int>(record.replicas.size()) < wanted) return std::nullopt;
    ShardRecord write = record;
    write.replicas.push_back(node);
    return RebalanceStep{
        shard, std::move(write),
        absl::StrCat(
            "shard ", shard, ": ", node,
            " joins its replicas (the shard is moved to ", node,
            "); it catches up before one of ",
            absl::StrJoin(Without(record.replicas, record.primary), ","),
            " leaves, then it takes the lead")};
  }
  // Healthy: the node is in sync.
  if (HandOverReported(shard, record, alive)) return std::nullopt;
  return Transfer(shard, record, node, " (the shard is moved to it)");
}

// The leader transfer of `shard` (not pinned) whose layout is `want`, if
// one is due and can start: from a draining primary or one `want` drops,
// or toward want's lead, to an in-sync backup.
std::optional<RebalanceStep> LeadStep(
    int shard, const ShardRecord& record, const std::vector<std::string>& want,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining) {
  const bool drained = draining.contains(record.primary);
  if (!drained && (want.empty() || want.front() == record.primary)) {
    return std::nullopt;
  }
  if (!Healthy(record, alive, draining) ||
      HandOverReported(shard, record, alive)) {
    return std::nullopt;
  }
  // The first of `nodes` that may lead: an alive in-sync backup that is
  // not draining.
  auto first_leader = [&](const std::vector<std::string>& nodes) {
    for (const std::string& node : nodes) {
      if (node != record.primary && alive.contains(node) &&
          !draining.contains(node) && record.InIsr(node)) {
        return node;
      }
    }
    return std::string();
  };
  // Want's lead; else, when the primary must leave and want's lead is not
  // a replica yet (Balance may add a node and pass it the lead at once), a
  // replica that stays, so that the primary, a backup then, can make way
  // for the node to add; else, from a draining primary, any.
  std::string to = want.empty() ? std::string() : first_leader({want.front()});
  if (to.empty() && !Contains(want, record.primary)) to = first_leader(want);
  if (to.empty() && drained) to = first_leader(record.isr);
  if (to.empty()) return std::nullopt;
  return Transfer(shard, record, to, drained ? " (draining)" : "");
}

}  // namespace

std::optional<RebalanceStep> PlanRebalance(
    const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining,
    const std::map<int, std::string>& pins, const RebalanceOptions& options) {
  std::vector<BalanceNode> nodes;
  for (const auto& [id, record] : alive) {
    if (!draining.contains(id)) {
      nodes.push_back({.id = id, .zone = record.zone});
    }
  }
  if (nodes.empty()) return std::nullopt;
  const int wanted =
      std::min<int>(options.replication_factor, static_cast<int>(nodes.size()));
  const std::map<int, std::string> active =
      ActivePins(shards, alive, draining, pins);
  // A move under way is finished first.
  for (const auto& [shard, record] : shards) {
    if (static_cast<int>(record.replicas.size()) <=
        options.replication_factor) {
      continue;
    }
    if (std::optional<RebalanceStep> drop =
            Drop(shard, shards, alive, draining, active, nodes, options)) {
      return drop;
    }
    // With one replica wanted, a pinned shard holds only its primary and its
    // node: the lead moves first, then the old primary's copy leaves.
    auto pin = active.find(shard);
    if (pin != active.end() && record.primary != pin->second &&
        record.replicas.size() == 2 && record.InIsr(pin->second) &&
        alive.contains(record.primary) &&
        !HandOverReported(shard, record, alive)) {
      return Transfer(shard, record, pin->second,
                      " (the shard is moved to it)");
    }
    return std::nullopt;
  }
  // Shards an operator moved go to their node before anything else moves.
  for (const auto& [shard, node] : active) {
    const ShardRecord& record = shards.at(shard);
    if (record.primary == node) continue;
    if (std::optional<RebalanceStep> step =
            PinStep(shard, record, node, alive, draining, wanted)) {
      return step;
    }
  }
  const Start start = StartOf(shards, active, options);
  const Layout target = Balance(start.layout, nodes, start.options);
  size_t index = 0;
  for (const auto& [shard, record] : shards) {
    const std::vector<std::string>& want = target.shards[index++];
    // Only a healthy shard moves: every replica alive and in sync, but
    // those leaving. A shard on its way to its pinned node waits for it.
    if (!Healthy(record, alive, draining) ||
        static_cast<int>(record.replicas.size()) < wanted ||
        PinPending(shard, record, active)) {
      continue;
    }
    std::string add;
    for (const std::string& node : want) {
      if (!Contains(record.replicas, node)) {
        add = node;
        break;
      }
    }
    const std::string leaving = Leaving(record, want);
    // A primary that must go is moved first, by a leader transfer (below).
    if (add.empty() || leaving.empty()) continue;
    ShardRecord write = record;
    write.replicas.push_back(add);
    return RebalanceStep{
        shard, std::move(write),
        absl::StrCat("shard ", shard, ": ", add, " joins its replicas to take ",
                     leaving, "'s place",
                     draining.contains(leaving) ? " (draining)" : "",
                     "; it catches up before ", leaving, " leaves")};
  }
  // Replicas are where they should be, or the primary is in the way: a
  // lead moves (LeadStep). A pinned shard's lead stays with its node
  // (Balance keeps it there). Draining primaries hand over first: the
  // layout's leads are computed as if they had, and evening out the others
  // before could pass one lead back and forth forever.
  for (const bool drains : {true, false}) {
    index = 0;
    for (const auto& [shard, record] : shards) {
      const std::vector<std::string>& want = target.shards[index++];
      if (active.contains(shard) ||
          draining.contains(record.primary) != drains) {
        continue;
      }
      if (std::optional<RebalanceStep> step =
              LeadStep(shard, record, want, alive, draining)) {
        return step;
      }
    }
  }
  return std::nullopt;
}

}  // namespace hourglass::cluster
