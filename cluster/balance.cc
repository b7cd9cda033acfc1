#include "cluster/balance.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hourglass::cluster {
namespace {

// The layout as node indexes into `alive`, with each node's counts.
class Working {
 public:
  Working(const Layout& current, const std::vector<BalanceNode>& alive,
          const BalanceOptions& options)
      : alive_(alive), fixed_leads_(options.fixed_leads) {
    // Nodes in id order, so that index order is the tie-break order.
    std::sort(
        alive_.begin(), alive_.end(),
        [](const BalanceNode& a, const BalanceNode& b) { return a.id < b.id; });
    std::set<std::string> zones;
    bool zoned = false;
    for (size_t i = 0; i < alive_.size(); ++i) {
      index_[alive_[i].id] = static_cast<int>(i);
      zones.insert(alive_[i].zone);
      zoned |= !alive_[i].zone.empty();
    }
    for (const BalanceNode& node : alive_) {
      zone_.push_back(static_cast<int>(
          std::distance(zones.begin(), zones.find(node.zone))));
    }
    const int replicas = std::min<int>(options.replication_factor,
                                       static_cast<int>(alive_.size()));
    target_ = std::max(replicas, 0);
    zoned_ = zoned;
    const int zone_count = zoned ? static_cast<int>(zones.size()) : 1;
    per_zone_ = (target_ + zone_count - 1) / zone_count;
    load_.assign(alive_.size(), 0);
    leads_.assign(alive_.size(), 0);
    for (const std::vector<std::string>& shard : current.shards) {
      std::vector<int> kept;
      for (const std::string& id : shard) {
        auto it = index_.find(id);
        if (it == index_.end()) continue;
        if (std::find(kept.begin(), kept.end(), it->second) != kept.end()) {
          continue;
        }
        kept.push_back(it->second);
      }
      for (int n : kept) ++load_[n];
      if (!kept.empty()) ++leads_[kept.front()];
      shards_.push_back(std::move(kept));
    }
  }

  // Step 1: every shard up to the target count.
  void Fill() {
    for (std::vector<int>& shard : shards_) {
      while (static_cast<int>(shard.size()) < target_) {
        int best = -1;
        // First within the zone limit, then (no node fits) without it.
        for (bool zone_limit : {true, false}) {
          for (int n = 0; n < static_cast<int>(alive_.size()); ++n) {
            if (Holds(shard, n)) continue;
            if (zone_limit && ZoneCount(shard, zone_[n], -1) >= per_zone_) {
              continue;
            }
            if (best == -1 || load_[n] < load_[best]) best = n;
          }
          if (best != -1) break;
        }
        shard.push_back(best);
        ++load_[best];
        if (shard.size() == 1) ++leads_[best];
      }
    }
  }

  // Step 1, continued: in a shard with more than per_zone_ of its
  // replicas in one zone (laid out before the nodes had zones, or filled
  // when no node of the zones it lacked was alive), the backup there on the
  // most loaded node moves to the least loaded node of a zone holding
  // fewer; false if no shard needs it or can.
  bool SpreadOneOverZones() {
    if (!zoned_) return false;
    for (std::vector<int>& shard : shards_) {
      int from = -1;  // Its index in `shard`.
      for (size_t i = 1; i < shard.size(); ++i) {
        if (ZoneCount(shard, zone_[shard[i]], -1) <= per_zone_) continue;
        if (from == -1 || load_[shard[i]] > load_[shard[from]]) {
          from = static_cast<int>(i);
        }
      }
      if (from == -1) continue;
      int to = -1;
      for (int n = 0; n < static_cast<int>(alive_.size()); ++n) {
        if (Holds(shard, n) || ZoneCount(shard, zone_[n], -1) >= per_zone_) {
          continue;
        }
        if (to == -1 || load_[n] < load_[to]) to = n;
      }
      if (to == -1) continue;
      --load_[shard[from]];
      ++load_[to];
      shard[from] = to;
      return true;
    }
    return false;
  }

  // Step 2: one backup moved from a node with more replicas to one with at
  // least two fewer; false if no such move is allowed.
  bool MoveOneReplica() {
    for (int from : ByCount(load_, /*descending=*/true)) {
      for (int to : ByCount(load_, /*descending=*/false)) {
        if (load_[to] > load_[from] - 2) break;
        for (std::vector<int>& shard : shards_) {
          auto it = std::find(shard.begin(), shard.end(), from);
          if (it == shard.end() || it == shard.begin()) continue;
          if (Holds(shard, to)) continue;
          if (zone_[to] != zone_[from] &&
              ZoneCount(shard, zone_[to], from) >= per_zone_) {
            continue;
          }
          *it = to;
          --load_[from];
          ++load_[to];
          return true;
        }
      }
    }
    return false;
  }

  // Step 3: one lead less for a node leading more shards, one more for a
  // node leading at least two fewer; false if none can be. A shard passes
  // its lead only to one of its own replicas, so the lead may travel along
  // a chain (a passes shard 1 to b, b passes shard 2 to c): the shortest
  // one, found breadth first, changes only its two ends' counts.
  bool MoveOneLead() {
    const int nodes = static_cast<int>(alive_.size());
    for (int from : ByCount(leads_, /*descending=*/true)) {
      // How each node was reached: the node before it and the shard whose
      // lead it would take.
      std::vector<std::pair<int, int>> reached(nodes, {-1, -1});
      reached[from] = {from, -1};
      std::vector<int> queue = {from};
      for (size_t head = 0; head < queue.size(); ++head) {
        const int node = queue[head];
        for (int s = 0; s < static_cast<int>(shards_.size()); ++s) {
          const std::vector<int>& shard = shards_[s];
          if (shard.empty() || shard.front() != node) continue;
          if (fixed_leads_.contains(s)) continue;
          for (auto it = shard.begin() + 1; it != shard.end(); ++it) {
            if (reached[*it].first != -1) continue;
            reached[*it] = {node, s};
            if (leads_[*it] <= leads_[from] - 2) {
              PassLeads(reached, *it);
              return true;
            }
            queue.push_back(*it);
          }
        }
      }
    }
    return false;
  }

  Layout ToLayout() const {
    Layout layout;
    for (const std::vector<int>& shard : shards_) {
      std::vector<std::string>& ids = layout.shards.emplace_back();
      for (int n : shard) ids.push_back(alive_[n].id);
    }
    return layout;
  }

 private:
  // Passes the leads along the chain that ends at `to` (from MoveOneLead).
  void PassLeads(const std::vector<std::pair<int, int>>& reached, int to) {
    ++leads_[to];
    for (int node = to; reached[node].second != -1;
         node = reached[node].first) {
      std::vector<int>& shard = shards_[reached[node].second];
      std::iter_swap(shard.begin(),
                     std::find(shard.begin(), shard.end(), node));
      if (reached[reached[node].first].second == -1) {
        --leads_[reached[node].first];
      }
    }
  }

  static bool Holds(const std::vector<int>& shard, int node) {
    return std::find(shard.begin(), shard.end(), node) != shard.end();
  }
  // Replicas of `shard` in `zone`, not counting node `except`.
  int ZoneCount(const std::vector<int>& shard, int zone, int except) const {
    int count = 0;
    for (int n : shard) count += n != except && zone_[n] == zone;
    return count;
  }
  // Node indexes by `counts`, then index.
  static std::vector<int> ByCount(const std::vector<int>& counts,
                                  bool descending) {
    std::vector<int> order(counts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return descending ? counts[a] > counts[b] : counts[a] < counts[b];
    });
    return order;
  }

  std::vector<BalanceNode> alive_;
  const std::set<int> fixed_leads_;
  std::map<std::string, int> index_;
  std::vector<int> zone_;
  bool zoned_ = false;
  int target_ = 0;
  int per_zone_ = 0;
  std::vector<std::vector<int>> shards_;
  std::vector<int> load_;
  std::vector<int> leads_;
};

}  // namespace

Layout Balance(const Layout& current, const std::vector<BalanceNode>& alive,
               const BalanceOptions& options) {
  if (alive.empty()) return current;
  Working working(current, alive, options);
  working.Fill();
  while (working.SpreadOneOverZones()) {
  }
  // A lead passed on can free a backup to move, and a moved backup can take
  // a lead: both until neither can.
  bool moved = true;
  while (moved) {
    moved = false;
    while (working.MoveOneReplica()) moved = true;
    while (working.MoveOneLead()) moved = true;
  }
  return working.ToLayout();
}

int ReplicasAdded(const Layout& from, const Layout& to) {
  int added = 0;
  for (size_t s = 0; s < to.shards.size(); ++s) {
    for (const std::string& id : to.shards[s]) {
      const std::vector<std::string>& before = from.shards[s];
      added += std::find(before.begin(), before.end(), id) == before.end();
    }
  }
  return added;
}

}  // namespace hourglass::cluster
