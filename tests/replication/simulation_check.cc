// The simulation's checker and healing (simulation.h): Check after every
// step, HealAndCheck and the converged layout at the end of a run.

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cluster/placement.h"
#include "cluster/rebalance.h"
#include "storage/memory_store.h"
#include "tests/replication/simulation.h"

namespace hourglass::replication::simulation {

using cluster::ShardRecord;
using storage::MessageStore;
using storage::Table;
bool World::Fail(std::string what) {
  failure_ = std::move(what);
  return false;
}

std::vector<std::string> World::Messages(MessageStore& store) {
  std::vector<std::string> keys;
  (void)store.Scan(Table::kMessages, "", "",
                   [&](std::string_view k, std::string_view) {
                     keys.emplace_back(k);
                     return true;
                   });
  return keys;
}

bool World::Check(const std::string& when) {
  if (!broken_.empty()) return Fail(absl::StrCat(when, ": ", broken_));
  // One primary per epoch: only it can complete a write at that epoch.
  for (const auto& [shard_epoch, ids] : acknowledgers_) {
    if (ids.size() > 1) {
      return Fail(absl::StrCat(when, ": writes of shard ", shard_epoch.first,
                               " at epoch ", shard_epoch.second,
                               " acknowledged by ", absl::StrJoin(ids, ",")));
    }
  }
  for (int shard = 0; shard < options_.shards; ++shard) {
    if (!records_[shard].has_value()) continue;
    const ShardRecord& record = *records_[shard];
    // A removed copy reads as an empty one.
    std::unique_ptr<MessageStore> none = storage::MemoryStore::Open();
    auto store = [&](const std::string& id) -> MessageStore& {
      MessageStore* copy = node(id).copies[shard].store.get();
      return copy != nullptr ? *copy : *none;
    };
    // A shard the step left as it was passes as before (most steps touch
    // one shard): its record, copies and positions, and what was
    // acknowledged, are unchanged.
    std::string state = absl::StrCat(
        record.epoch, "/", absl::StrJoin(record.isr, ","), "/",
        absl::StrJoin(record.eligible, ","), "/", acknowledged_[shard].size());
    for (Node& n : nodes_) {
      const LogPosition p = ReadPosition(store(n.id)).value();
      absl::StrAppend(&state, "/", reinterpret_cast<uintptr_t>(&store(n.id)),
                      ":", p.epoch, ":", p.index);
    }
    if (checked_[shard] == state) continue;
    checked_[shard] = std::move(state);
    // Each copy's position and messages (in key order), read once.
    std::map<std::string, std::pair<LogPosition, std::vector<std::string>>>
        copies;
    for (Node& n : nodes_) {
      copies[n.id] = {ReadPosition(store(n.id)).value(), Messages(store(n.id))};
    }
    // Copies at equal positions hold equal messages.
    for (const auto& [x, cx] : copies) {
      if (cx.first.index == 0) continue;
      for (const auto& [y, cy] : copies) {
        if (x < y && cx.first == cy.first && cx.second != cy.second) {
          return Fail(absl::StrCat(when, ": shard ", shard, ": ", x, " and ", y,
                                   " are both at {", cx.first.epoch, ",",
                                   cx.first.index,
                                   "} but hold different messages"));
        }
      }
    }
    // The in-sync copies and the eligible ones hold every write
    // acknowledged: either may be promoted.
    std::vector<std::string> promotable = record.isr;
    promotable.insert(promotable.end(), record.eligible.begin(),
                      record.eligible.end());
    for (const std::string& id : promotable) {
      // A lost disk's copy is gone (its node cannot be promoted from it,
      // ClusterNode::Join); the others keep the promise.
      if (node(id).wiped) continue;
      const std::vector<std::string>& held = copies[id].second;
      for (const auto& [key, epoch] : acknowledged_[shard]) {
        if (!std::binary_search(held.begin(), held.end(), key)) {
          return Fail(absl::StrCat(
              when, ": shard ", shard, ": ", key, ", acknowledged at epoch ",
              epoch, ", is missing from ", id, " (in-sync set [",
              absl::StrJoin(record.isr, ","), "], eligible copies [",
              absl::StrJoin(record.eligible, ","), "] at epoch ", record.epoch,
              ")"));
        }
      }
    }
    for (const std::string& x : record.isr) {
      for (const std::string& y : record.isr) {
        const LogPosition px = copies[x].first;
        const LogPosition py = copies[y].first;
        if (px.index > py.index) continue;
        if (Diverged(store(y), py, px).value()) {
          return Fail(absl::StrCat(when, ": shard ", shard,
                                   ": in-sync copies diverged: ", x, " at {",
                                   px.epoch, ",", px.index, "}, ", y, " at {",
                                   py.epoch, ",", py.index, "}"));
        }
      }
    }
  }
  return true;
}

bool World::Flush(const StreamKey& key, Stream& s) {
  const auto& [shard, from, to] = key;
  ReplicatedStore* primary = node(from).copies[shard].primary.get();
  if (!s.open || primary == nullptr) return false;
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> entries =
      primary->ReadFrom(s.next, 1 << 20, absl::InfinitePast());
  if (!entries.ok()) {
    EndStream(key, s);
    if (entries.status().code() == absl::StatusCode::kOutOfRange) {
      node(to).copies[shard].rebuild_asked = "behind the entries kept";
    }
    return true;
  }
  bool moved = !entries->empty() || !s.sent.empty() || !s.answers.empty();
  for (const auto& bytes : *entries) s.sent.push_back(*bytes);
  s.next += static_cast<int64_t>(entries->size());
  Replica* replica = node(to).copies[shard].replica.get();
  if (replica == nullptr) {
    EndStream(key, s);
    return true;
  }
  while (!s.sent.empty()) {
    const std::string bytes = std::move(s.sent.front());
    s.sent.pop_front();
    const LogEntry entry = DecodeEntry(bytes).value();
    if (!replica->Write(s.epoch, {entry}).ok()) {
      EndStream(key, s);
      return true;
    }
  }
  if (replica->durable() != replica->applied()) {
    moved = true;
    (void)replica->Sync();
  }
  s.answers.emplace_back(replica->applied(), replica->durable());
  while (!s.answers.empty()) {
    primary->ReportProgress(to, s.answers.front().first,
                            s.answers.front().second);
    s.answers.pop_front();
  }
  return moved;
}

bool World::HealAndCheck() {
  etcd_up_ = true;
  for (Node& n : nodes_) {
    if (!n.member) continue;
    n.paused = false;
    n.lease_ends = false;
    // A node back empty joins once no record counts on its copy: until
    // then, as ClusterNode::Join, it waits (Restart, below).
    if (!n.up && n.wiped) {
      n.lease = false;
      continue;
    }
    n.up = n.lease = true;
  }
  // Rounds until nothing changes for longer than any node waits before it
  // acts again by itself, a round being a step: a backup's addition to an
  // in-sync set may fail a lag timeout after it began, changing nothing
  // seen here, and is tried again a lag timeout later.
  const int kQuietRounds =
      static_cast<int>((kLagTimeout * 2 + kStep * 2) / kStep);
  int quiet = 0;
  for (int round = 0; quiet < kQuietRounds; ++round) {
    if (round == 6000) {
      return Fail(absl::StrCat("healed, the cluster never settled:", Layout()));
    }
    for (size_t i = 0; i < nodes_.size(); ++i) Restart();
    const std::vector<std::optional<ShardRecord>> before = records_;
    const int64_t rebuilds = stats_.rebuilds;
    Control();
    Settle();
    bool moved = false;
    for (auto& [key, s] : streams_) moved |= Flush(key, s);
    Acknowledge();
    const bool changed =
        moved || records_ != before || rebuilds != stats_.rebuilds;
    if (std::getenv("HOURGLASS_SIMULATION_TRACE_HEAL") != nullptr) {
      std::cerr << "heal round " << round << (moved ? " moved" : "")
                << (records_ != before ? " records" : "")
                << (rebuilds != stats_.rebuilds ? " rebuilds" : "") << ":"
                << Trace() << std::endl;
    }
    quiet = changed ? 0 : quiet + 1;
  }
  return Check("after healing") && CheckConverged();
}

// Healed: every shard has its replicas, all in sync and holding exactly
// the primary's messages, and neither PlanShard nor PlanRebalance has a
// step left; no replica is on a draining node, each pinned shard is led by
// its node, and with zones no zone holds more than ceil(replication_factor
// / zones) of a shard's replicas, counting the zones of the nodes that may
// hold replicas (alive, not draining): losing a zone loses as few copies
// as it can.
bool World::CheckConverged() {
  const std::map<std::string, cluster::NodeRecord> alive = AliveRecords();
  std::set<std::string> zones;
  for (const auto& [id, record] : alive) {
    if (!record.zone.empty() && !draining_.contains(id))
      zones.insert(record.zone);
  }
  const int per_zone =
      zones.empty()
          ? options_.replication_factor
          : (options_.replication_factor + static_cast<int>(zones.size()) - 1) /
                static_cast<int>(zones.size());
  cluster::PlacementOptions placement;
  placement.replication_factor = options_.replication_factor;
  for (int s = 0; s < options_.shards; ++s) {
    if (!records_[s].has_value()) {
      return Fail(absl::StrCat("healed, shard ", s, " has no record"));
    }
    const ShardRecord& record = *records_[s];
    cluster::ShardPlan plan = cluster::PlanShard(s, record, alive, placement);
    if (plan.write.has_value() || !record.transfer_to.empty()) {
      return Fail(absl::StrCat("healed, shard ", s, " still has a step: ",
                               plan.reason, record.transfer_to));
    }
    std::vector<std::string> replicas = record.replicas;
    std::vector<std::string> isr = record.isr;
    std::sort(replicas.begin(), replicas.end());
    std::sort(isr.begin(), isr.end());
    if (replicas != isr ||
        static_cast<int>(replicas.size()) != options_.replication_factor) {
      return Fail(absl::StrCat("healed, shard ", s, " has replicas [",
                               absl::StrJoin(record.replicas, ","),
                               "] and in-sync set [",
                               absl::StrJoin(record.isr, ","), "]"));
    }
    if (record.primary.empty()) {
      return Fail(absl::StrCat("healed, shard ", s, " has no primary"));
    }
    auto messages = [&](const std::string& id) {
      MessageStore* copy = node(id).copies[s].store.get();
      return copy == nullptr ? std::vector<std::string>{} : Messages(*copy);
    };
    const std::vector<std::string> at_primary = messages(record.primary);
    for (const std::string& id : record.replicas) {
      const std::vector<std::string> here = messages(id);
      if (here != at_primary) {
        return Fail(absl::StrCat("healed, ", id, " holds ", here.size(),
                                 " messages of shard ", s, ", the primary ",
                                 record.primary, " ", at_primary.size()));
      }
      if (draining_.contains(id)) {
        return Fail(
            absl::StrCat("healed, draining ", id, " still holds shard ", s));
      }
    }
    auto pin = pins_.find(s);
    if (pin != pins_.end() && !draining_.contains(pin->second) &&
        record.primary != pin->second) {
      return Fail(absl::StrCat("healed, shard ", s, " is pinned to ",
                               pin->second, " but led by ", record.primary));
    }
    stats_.epochs += record.epoch;
  }
  std::optional<cluster::RebalanceStep> step =
      cluster::PlanRebalance(Records(), alive, draining_, pins_,
                             {.replication_factor = options_.replication_factor,
                              .min_insync = options_.min_insync});
  if (step.has_value()) {
    return Fail(
        absl::StrCat("healed, PlanRebalance still has a step: ", step->reason));
  }
  for (int s = 0; s < options_.shards; ++s) {
    const ShardRecord& record = *records_[s];
    std::map<std::string, int> in_zone;
    for (const std::string& id : record.replicas) {
      auto node = alive.find(id);
      if (node == alive.end() || node->second.zone.empty()) continue;
      if (++in_zone[node->second.zone] > per_zone) {
        std::vector<std::string> nodes;
        for (const auto& [other, other_record] : alive) {
          nodes.push_back(absl::StrCat(other, " in ", other_record.zone));
        }
        return Fail(absl::StrCat(
            "healed, zone ", node->second.zone, " holds more than ", per_zone,
            " of shard ", s, "'s replicas (alive: ", absl::StrJoin(nodes, ", "),
            "):", Layout()));
      }
    }
  }
  return true;
}

std::string World::Layout() const {
  std::string out;
  for (int s = 0; s < options_.shards; ++s) {
    if (!records_[s].has_value()) {
      absl::StrAppend(&out, " shard ", s, " {none}");
      continue;
    }
    const ShardRecord& r = *records_[s];
    absl::StrAppend(&out, " shard ", s, " {", r.epoch, " ", r.primary, " [",
                    absl::StrJoin(r.replicas, ","), "] [",
                    absl::StrJoin(r.isr, ","), "] ", r.transfer_to, " e[",
                    absl::StrJoin(r.eligible, ","), "]}");
  }
  absl::StrAppend(&out, "; draining [", absl::StrJoin(draining_, ","),
                  "], pins [",
                  absl::StrJoin(pins_, ",", absl::PairFormatter("->")), "]");
  return out;
}

}  // namespace hourglass::replication::simulation

namespace hourglass::replication::simulation {

std::string World::Trace() {
  std::string out = Layout();
  for (Node& n : nodes_) {
    absl::StrAppend(&out, "\n  ", n.id, n.member ? "" : " (no member)",
                    n.up ? "" : " down", n.paused ? " paused" : "",
                    n.lease ? "" : " no-lease", n.wiped ? " wiped" : "", ":");
    for (int s = 0; s < options_.shards; ++s) {
      const Copy& c = n.copies[s];
      if (c.store == nullptr) {
        absl::StrAppend(&out, " [", s, "] none");
        continue;
      }
      const LogPosition p = ReadPosition(*c.store).value();
      absl::StrAppend(
          &out, " [", s, "] {", p.epoch, ",", p.index, "}",
          c.primary != nullptr
              ? absl::StrCat(" P", c.primary->epoch(), c.engine ? "+" : "")
              : "",
          c.replica != nullptr ? " B" : "", " ",
          cluster::RoleName(c.machine->role()));
      if (c.primary == nullptr) continue;
      for (const auto& [to, b] : c.primary->Backups()) {
        absl::StrAppend(&out, " (", to, " {", b.applied.epoch, ",",
                        b.applied.index, "}", b.connected ? " connected" : "",
                        b.in_sync ? " in-sync" : "",
                        b.counted ? " counted" : "", ")");
      }
    }
  }
  for (const Pending& p : pending_) {
    absl::StrAppend(&out, "\n  pending ", p.key, " on ", p.node, " {",
                    p.entry.epoch, ",", p.entry.index, "}");
  }
  return out;
}

}  // namespace hourglass::replication::simulation
