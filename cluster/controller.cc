#include "cluster/controller.h"

#include <algorithm>
#include <utility>

#include "cluster/placement.h"
#include "cluster/rebalance.h"

namespace hourglass::cluster {

Controller::Controller(ControllerOptions options)
    : options_(std::move(options)) {}

void Controller::Reset() {
  primary_gone_since_.clear();
  logged_.clear();
}

Controller::Decision Controller::Decide(const ClusterView& view,
                                        absl::Time now) {
  Decision decision;
  bool planned = false;  // A shard needed PlanShard's change, or waits.
  for (int shard = 0; shard < options_.shards; ++shard) {
    auto it = view.shards.find(shard);
    std::optional<ShardRecord> record;
    if (it != view.shards.end()) record = it->second.record;
    PlacementOptions placement;
    placement.replication_factor = options_.replication_factor;
    placement.min_insync = options_.min_insync;
    if (record.has_value() && !view.nodes.contains(record->primary)) {
      auto [since, inserted] =
          primary_gone_since_.try_emplace(shard, record->epoch, now);
      if (!inserted && since->second.first != record->epoch) {
        since->second = {record->epoch, now};
      }
      const absl::Time wait_ends =
          since->second.second + options_.position_wait;
      placement.position_wait_over = now >= wait_ends;
      if (!placement.position_wait_over) {
        decision.next = std::min(decision.next, wait_ends);
      }
    } else {
      primary_gone_since_.erase(shard);
    }
    ShardPlan plan = PlanShard(shard, record, view.nodes, placement);
    planned |= plan.write.has_value() || !record.has_value() ||
               !view.nodes.contains(record->primary) ||
               !record->transfer_to.empty();
    if (!plan.write.has_value()) {
      if (!plan.reason.empty() && logged_[shard] != plan.reason) {
        decision.waiting.push_back(plan.reason);
      }
      logged_[shard] = plan.reason;
      continue;
    }
    logged_[shard] = plan.reason;
    std::optional<int64_t> revision;
    if (it != view.shards.end()) revision = it->second.mod_revision;
    decision.writes.push_back(
        {shard, revision, *std::move(plan.write), std::move(plan.reason)});
  }
  if (planned) return decision;
  // Every shard has its primary: move one replica toward the balanced
  // layout (nodes joined, or are draining).
  std::map<int, ShardRecord> records;
  for (const auto& [shard, s] : view.shards) records[shard] = s.record;
  std::optional<RebalanceStep> step =
      PlanRebalance(records, view.nodes, view.draining, view.pins,
                    {.replication_factor = options_.replication_factor,
                     .min_insync = options_.min_insync});
  if (step.has_value()) {
    logged_[step->shard] = step->reason;
    decision.writes.push_back(
        {step->shard, view.shards.at(step->shard).mod_revision,
         std::move(step->write), std::move(step->reason)});
  }
  return decision;
}

}  // namespace hourglass::cluster
