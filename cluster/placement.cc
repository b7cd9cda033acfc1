#include "cluster/placement.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hourglass::cluster {
namespace {

// Live nodes holding no replica of `record`: first those whose zone holds
// the fewest of its live replicas (--zone), then in id order.
std::vector<std::string> Spares(
    const ShardRecord& record, const std::map<std::string, NodeRecord>& alive) {
  std::map<std::string, int> in_zone;
  for (const std::string& replica : record.replicas) {
    auto node = alive.find(replica);
    if (node != alive.end()) ++in_zone[node->second.zone];
  }
  std::vector<std::pair<int, std::string>> ranked;
  for (const auto& [id, node] : alive) {
    if (!record.IsReplica(id)) ranked.emplace_back(in_zone[node.zone], id);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> spares;
  for (auto& [count, id] : ranked) spares.push_back(std::move(id));
  return spares;
}

// The live nodes' ids with their zones interleaved (the first of each zone,
// then the second of each, ...; zones and ids within one in order): any run
// of consecutive ids spreads over the zones as evenly as it can. Without
// zones, id order.
std::vector<std::string> ZonesInterleaved(
    const std::map<std::string, NodeRecord>& alive) {
  std::map<std::string, std::vector<std::string>> by_zone;
  for (const auto& [id, node] : alive) by_zone[node.zone].push_back(id);
  std::vector<std::string> ids;
  for (size_t rank = 0; ids.size() < alive.size(); ++rank) {
    for (const auto& [zone, members] : by_zone) {
      if (rank < members.size()) ids.push_back(members[rank]);
    }
  }
  return ids;
}

// Replaces, in `record`, each replica other than the primary whose node is
// gone by a spare, while there are spares, but one in the ISR (the primary
// takes it out first, keeping it eligible if that leaves the set below
// --min_insync) or eligible (it may hold the only other copy of an
// acknowledged write). Then
// adds spares while the shard has fewer than `wanted` replicas (a cluster
// restored from a snapshot starts with one). Adds to `changes` what it did.
void RepairReplicas(ShardRecord& record,
                    const std::map<std::string, NodeRecord>& alive, int wanted,
                    std::vector<std::string>& changes) {
  std::vector<std::string> spares = Spares(record, alive);
  auto next_spare = spares.begin();
  for (std::string& replica : record.replicas) {
    if (next_spare == spares.end()) break;
    if (replica == record.primary || alive.contains(replica) ||
        record.InIsr(replica) || record.IsEligible(replica)) {
      continue;
    }
    changes.push_back(absl::StrCat("replaced ", replica, " by ", *next_spare));
    replica = *next_spare++;
  }
  for (; next_spare != spares.end() &&
         static_cast<int>(record.replicas.size()) < wanted;
       ++next_spare) {
    changes.push_back(absl::StrCat("added ", *next_spare));
    record.replicas.push_back(*next_spare);
  }
}

ShardPlan Create(int shard, const std::map<std::string, NodeRecord>& alive,
                 const PlacementOptions& options) {
  const int wanted = std::max(options.replication_factor, 1);
  if (static_cast<int>(alive.size()) < wanted) {
    return {std::nullopt,
            absl::StrCat("waiting for ", wanted, " nodes to create shard ",
                         shard, "; ", alive.size(), " alive")};
  }
  const std::vector<std::string> ids = ZonesInterleaved(alive);
  ShardRecord record;
  record.epoch = 1;
  const size_t first = static_cast<size_t>(shard) % ids.size();
  for (int i = 0; i < wanted; ++i) {
    record.replicas.push_back(ids[(first + i) % ids.size()]);
  }
  record.primary = record.replicas.front();
  record.isr = record.replicas;
  return {record, absl::StrCat("created shard ", shard, " with primary ",
                               record.primary, " and replicas ",
                               absl::StrJoin(record.replicas, ","))};
}

ShardPlan Promote(int shard, const ShardRecord& current,
                  const std::map<std::string, NodeRecord>& alive,
                  const PlacementOptions& options) {
  struct Candidate {
    std::string id;
    std::optional<LogEnd> end;  // nullopt: not reported yet
  };
  const std::string gone =
      current.primary.empty()
          ? absl::StrCat("shard ", shard, " was given back by its primary")
          : absl::StrCat("shard ", shard, " has lost its primary ",
                         current.primary);
  // The in-sync backups alive; with none, the eligible copies alive.
  auto alive_among = [&](const std::vector<std::string>& ids) {
    std::vector<Candidate> candidates;
    for (const std::string& id : ids) {
      if (id == current.primary) continue;
      auto node = alive.find(id);
      if (node == alive.end()) continue;
      Candidate c{id, std::nullopt};
      auto position = node->second.positions.find(shard);
      if (position != node->second.positions.end() &&
          position->second.epoch == current.epoch) {
        c.end = position->second.end();
      }
      candidates.push_back(std::move(c));
    }
    return candidates;
  };
  std::vector<Candidate> candidates = alive_among(current.isr);
  const bool from_eligible = candidates.empty();
  if (from_eligible) candidates = alive_among(current.eligible);
  if (candidates.empty()) {
    return {std::nullopt,
            absl::StrCat(gone, " and no in-sync backup is alive (in-sync set ",
                         absl::StrJoin(current.isr, ","), "; eligible copies ",
                         current.eligible.empty()
                             ? "none"
                             : absl::StrJoin(current.eligible, ","),
                         "): waiting for one to come back")};
  }
  const Candidate* best = nullptr;
  size_t unreported = 0;
  for (const Candidate& c : candidates) {
    if (!c.end.has_value()) {
      ++unreported;
      continue;
    }
    if (best == nullptr || *c.end > *best->end ||
        (*c.end == *best->end && c.id < best->id)) {
      best = &c;
    }
  }
  if (best == nullptr || (unreported > 0 && !options.position_wait_over)) {
    return {std::nullopt, absl::StrCat(gone, ": waiting for ", unreported,
                                       from_eligible ? " eligible copies"
                                                     : " in-sync backups",
                                       " to report their positions")};
  }
  ShardRecord next = current;
  next.epoch = current.epoch + 1;
  next.primary = best->id;
  next.transfer_to.clear();  // A transfer under way ends with its primary.
  next.isr = {best->id};
  for (const Candidate& c : candidates) {
    if (!c.end.has_value() || c.id == best->id) continue;
    // In-sync copies are prefixes of the old primary's log, so of the best
    // one's; an eligible copy is one when its end is of the best's epoch
    // (one primary wrote each index of it once).
    if (!from_eligible || c.end->epoch == best->end->epoch) {
      next.isr.push_back(c.id);
    }
  }
  // The primary first among the replicas.
  std::erase(next.replicas, best->id);
  next.replicas.insert(next.replicas.begin(), best->id);
  KeepEligible(current, next, options.min_insync);
  std::vector<std::string> changes = {absl::StrCat(
      "promoted ", from_eligible ? "eligible copy " : "", best->id,
      " (at index ", best->end->index, " of epoch ", best->end->epoch,
      ") to primary of shard ", shard, " at epoch ", next.epoch, " after ",
      current.primary.empty() ? std::string("its primary gave it back")
                              : absl::StrCat(current.primary, " left"))};
  RepairReplicas(next, alive, options.replication_factor, changes);
  return {next, absl::StrJoin(changes, "; ")};
}

// A leader transfer under way (current.transfer_to), the primary alive:
// given up if the target cannot take over, finished once the primary has
// reported where it stopped writing (at the current epoch), else awaited.
ShardPlan Transfer(int shard, const ShardRecord& current,
                   const std::map<std::string, NodeRecord>& alive) {
  const std::string& to = current.transfer_to;
  if (to == current.primary || !alive.contains(to) || !current.InIsr(to)) {
    ShardRecord next = current;
    next.transfer_to.clear();
    return {next,
            absl::StrCat("shard ", shard, ": gave up handing it over ", "from ",
                         current.primary, " to ", to, " (",
                         alive.contains(to) ? "not in sync" : "gone", ")")};
  }
  const NodeRecord& primary = alive.at(current.primary);
  auto position = primary.positions.find(shard);
  if (position == primary.positions.end() ||
      position->second.epoch != current.epoch) {
    return {std::nullopt,
            absl::StrCat("shard ", shard, ": waiting for ", current.primary,
                         " to hand it over to ", to)};
  }
  ShardRecord next = current;
  next.epoch = current.epoch + 1;
  next.primary = to;
  next.transfer_to.clear();
  // The new primary first; the old one stays in sync (its log ends where
  // the new primary's starts).
  std::erase(next.replicas, to);
  next.replicas.insert(next.replicas.begin(), to);
  std::erase(next.isr, to);
  next.isr.insert(next.isr.begin(), to);
  return {next, absl::StrCat(
                    "handed shard ", shard, " over from ", current.primary,
                    " to ", to, " at epoch ", next.epoch, " (", current.primary,
                    " stopped at index ", position->second.index, ")")};
}

}  // namespace

void KeepEligible(const ShardRecord& from, ShardRecord& next, int min_insync) {
  if (static_cast<int>(next.isr.size()) >= min_insync) {
    next.eligible.clear();
    return;
  }
  for (const std::string& node : from.isr) {
    if (!next.InIsr(node) && !next.IsEligible(node)) {
      next.eligible.push_back(node);
    }
  }
  std::erase_if(next.eligible, [&next](const std::string& node) {
    return next.InIsr(node) || !next.IsReplica(node);
  });
}

ShardPlan PlanShard(int shard, const std::optional<ShardRecord>& current,
                    const std::map<std::string, NodeRecord>& alive,
                    const PlacementOptions& options) {
  if (!current.has_value()) return Create(shard, alive, options);
  if (!alive.contains(current->primary)) {
    return Promote(shard, *current, alive, options);
  }
  if (!current->transfer_to.empty()) {
    return Transfer(shard, *current, alive);
  }
  ShardRecord next = *current;
  std::vector<std::string> changes;
  RepairReplicas(next, alive, options.replication_factor, changes);
  if (changes.empty()) return {std::nullopt, ""};
  KeepEligible(*current, next, options.min_insync);
  return {next,
          absl::StrCat("shard ", shard, ": ", absl::StrJoin(changes, "; "))};
}

std::map<int, Position> PositionsToReport(
    std::string_view node, const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    absl::FunctionRef<std::optional<LogEnd>(int shard)> position,
    absl::FunctionRef<std::optional<int64_t>(int shard)> handed_over) {
  std::map<int, Position> positions;
  for (const auto& [shard, record] : shards) {
    const bool handing_over =
        record.primary == node && !record.transfer_to.empty();
    const bool primary_gone = record.primary != node &&
                              !alive.contains(record.primary) &&
                              record.IsReplica(node);
    if (handing_over) {
      if (std::optional<int64_t> index = handed_over(shard)) {
        positions[shard] = Position{record.epoch, *index};
      }
    } else if (primary_gone) {
      if (std::optional<LogEnd> end = position(shard)) {
        positions[shard] = Position{record.epoch, end->index, end->epoch};
      }
    }
  }
  return positions;
}

absl::StatusOr<Recovery> PlanRecovery(
    int shard, const ShardRecord& current,
    const std::map<std::string, NodeRecord>& alive, const std::string& node) {
  if (alive.contains(current.primary)) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard, "'s primary ", current.primary,
                     " is alive: there is nothing to recover"));
  }
  std::vector<std::string> safe;
  for (const std::string& id : current.replicas) {
    if (id == current.primary || !alive.contains(id)) continue;
    if (current.InIsr(id)) safe.push_back(absl::StrCat(id, " (in sync)"));
    if (current.IsEligible(id)) safe.push_back(absl::StrCat(id, " (eligible)"));
  }
  if (!safe.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", shard,
        " has a copy that holds every acknowledged write "
        "alive: ",
        absl::StrJoin(safe, ", "),
        "; the controller promotes it by itself, without loss (within a "
        "lease TTL or so)"));
  }
  auto reported = [&](const std::string& id) -> std::optional<LogEnd> {
    auto it = alive.find(id);
    if (it == alive.end()) return std::nullopt;
    auto position = it->second.positions.find(shard);
    if (position == it->second.positions.end() ||
        position->second.epoch != current.epoch) {
      return std::nullopt;
    }
    return position->second.end();
  };
  if (!alive.contains(node)) {
    return absl::NotFoundError(
        absl::StrCat("node ", node, " is not a live node of the cluster"));
  }
  const std::optional<LogEnd> copy = reported(node);
  if (!copy.has_value()) {
    return absl::NotFoundError(absl::StrCat(
        "node ", node, " has not reported a copy of shard ", shard,
        " at epoch ", current.epoch,
        " (a replica reports once it sees the primary gone; try again in a "
        "few seconds)"));
  }
  Recovery recovery;
  recovery.copy = *copy;
  for (const std::string& id : current.replicas) {
    if (id == node) continue;
    std::optional<LogEnd> end = reported(id);
    if (end.has_value() &&
        (recovery.best_node.empty() || *end > recovery.best)) {
      recovery.best_node = id;
      recovery.best = *end;
    }
  }
  const LogEnd& known = current.acknowledged;
  auto at = [](LogEnd end) {
    return absl::StrCat("entry ", end.index, " of epoch ", end.epoch);
  };
  if (known > *copy) {
    recovery.loss = absl::StrCat(
        "writes acknowledged after ", at(*copy),
        ", this copy's end, are "
        "lost: at least those up to ",
        at(known),
        " (known acknowledged at the last in-sync change), and any "
        "acknowledged since");
  } else {
    recovery.loss = absl::StrCat(
        "no write known acknowledged is past this copy's end (", at(*copy),
        "; known acknowledged: ", known == LogEnd{} ? "none" : at(known),
        "), but writes acknowledged since the last in-sync change may be "
        "lost");
  }
  if (!recovery.best_node.empty() && recovery.best > *copy) {
    absl::StrAppend(&recovery.loss, "; ", recovery.best_node,
                    "'s copy ends further, at ", at(recovery.best));
  }
  ShardRecord& next = recovery.write;
  next = current;
  next.epoch = current.epoch + 1;
  next.primary = node;
  next.transfer_to.clear();
  next.isr = {node};
  next.eligible.clear();
  next.acknowledged = *copy;  // The history goes on from this copy.
  std::erase(next.replicas, node);
  next.replicas.insert(next.replicas.begin(), node);
  return recovery;
}

}  // namespace hourglass::cluster
