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

// The shards' replicas as Balance takes them: shard n at index n (the
// shards are numbered from 0 without gaps when every one exists).
Layout LayoutOf(const std::map<int, ShardRecord>& shards) {
  Layout layout;
  for (const auto& [number, record] : shards) {
    layout.shards.push_back(record.replicas);
  }
  return layout;
}

// How far `layout` is from balanced: the replicas Balance would add.
int Distance(const Layout& layout, const std::vector<BalanceNode>& nodes,
             const RebalanceOptions& options) {
  const Layout target = Balance(
      layout, nodes, {.replication_factor = options.replication_factor});
  return ReplicasAdded(layout, target);
}

// Step 2 for `shard`, which has a replica more than it should: the
// replica to drop, and the step, or nullopt while the replicas that stay
// are not all in sync.
std::optional<RebalanceStep> Drop(
    int shard, const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining,
    const std::vector<BalanceNode>& nodes, const RebalanceOptions& options) {
  const ShardRecord& record = shards.at(shard);
  // Gone nodes first, then draining ones, then the one whose drop leaves
  // the cluster closest to balanced (ties: the lowest node id).
  std::string drop;
  int best = std::numeric_limits<int>::max();
  std::vector<std::string> candidates(record.replicas.begin() + 1,
                                      record.replicas.end());
  std::sort(candidates.begin(), candidates.end());
  for (const std::string& node : candidates) {
    int score;
    if (!alive.contains(node)) {
      score = -2;
    } else if (draining.contains(node)) {
      score = -1;
    } else {
      Layout layout = LayoutOf(shards);
      std::vector<std::string>& replicas =
          layout.shards[std::distance(shards.begin(), shards.find(shard))];
      replicas = Without(replicas, node);
      score = Distance(layout, nodes, options);
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

}  // namespace

std::optional<RebalanceStep> PlanRebalance(
    const std::map<int, ShardRecord>& shards,
    const std::map<std::string, NodeRecord>& alive,
    const std::set<std::string>& draining, const RebalanceOptions& options) {
  std::vector<BalanceNode> nodes;
  for (const auto& [id, record] : alive) {
    if (!draining.contains(id)) {
      nodes.push_back({.id = id, .zone = record.zone});
    }
  }
  if (nodes.empty()) return std::nullopt;
  const int wanted =
      std::min<int>(options.replication_factor, static_cast<int>(nodes.size()));
  // A move under way is finished first.
  for (const auto& [shard, record] : shards) {
    if (static_cast<int>(record.replicas.size()) > options.replication_factor) {
      return Drop(shard, shards, alive, draining, nodes, options);
    }
  }
  const Layout current = LayoutOf(shards);
  const Layout target = Balance(
      current, nodes, {.replication_factor = options.replication_factor});
  size_t index = 0;
  for (const auto& [shard, record] : shards) {
    const std::vector<std::string>& want = target.shards[index++];
    // Only a healthy shard moves: every replica alive and in sync, but
    // those leaving.
    bool healthy = alive.contains(record.primary);
    for (const std::string& node : record.replicas) {
      healthy &= draining.contains(node) ||
                 (alive.contains(node) && record.InIsr(node));
    }
    if (!healthy || static_cast<int>(record.replicas.size()) < wanted) {
      continue;
    }
    std::string add, leaving;
    for (const std::string& node : want) {
      if (!Contains(record.replicas, node)) {
        add = node;
        break;
      }
    }
    for (const std::string& node : record.replicas) {
      if (node != record.primary && !Contains(want, node)) {
        leaving = node;
        break;
      }
    }
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
  // Replicas are where they should be: move a lead, from a draining
  // primary or toward the layout's leads, to an in-sync backup.
  index = 0;
  for (const auto& [shard, record] : shards) {
    const std::vector<std::string>& want = target.shards[index++];
    const bool drained = draining.contains(record.primary);
    if (!drained && (want.empty() || want.front() == record.primary)) continue;
    bool healthy = alive.contains(record.primary);
    for (const std::string& node : record.replicas) {
      healthy &= draining.contains(node) ||
                 (alive.contains(node) && record.InIsr(node));
    }
    if (!healthy) continue;
    auto can_lead = [&, &current = record](const std::string& node) {
      return node != current.primary && alive.contains(node) &&
             !draining.contains(node) && current.InIsr(node);
    };
    std::string to;
    if (!want.empty() && can_lead(want.front())) {
      to = want.front();
    } else if (drained) {
      for (const std::string& node : record.isr) {
        if (can_lead(node)) {
          to = node;
          break;
        }
      }
    }
    if (to.empty()) continue;
    ShardRecord write = record;
    write.transfer_to = to;
    return RebalanceStep{
        shard, std::move(write),
        absl::StrCat("shard ", shard, ": hands its lead over from ",
                     record.primary, drained ? " (draining)" : "", " to ", to)};
  }
  return std::nullopt;
}

}  // namespace hourglass::cluster
