// placement_sim: issue 22's placement figures from cluster/balance.h, no
// cluster needed. 1,024 shards of three replicas placed on 100 nodes (and
// again over three zones): replicas and leads per node against even; then
// a node joins, and one leaves: the replicas copied, against 1/N of all.
//
//   build/dev/tests/bench/placement_sim [--nodes=100] [--shards=1024]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cluster/balance.h"

namespace hourglass::cluster {
namespace {

constexpr int kReplicas = 3;

void Report(const char* what, const Layout& layout,
            const std::vector<BalanceNode>& nodes) {
  std::map<std::string, int> replicas, leads;
  for (const BalanceNode& node : nodes) replicas[node.id] = leads[node.id] = 0;
  for (const auto& shard : layout.shards) {
    for (const std::string& id : shard) ++replicas[id];
    ++leads[shard.front()];
  }
  auto span = [](const std::map<std::string, int>& counts) {
    int low = counts.begin()->second, high = low;
    for (const auto& [id, n] : counts) {
      low = std::min(low, n);
      high = std::max(high, n);
    }
    return std::make_pair(low, high);
  };
  const double even_replicas =
      static_cast<double>(layout.shards.size() * kReplicas) / nodes.size();
  const double even_leads =
      static_cast<double>(layout.shards.size()) / nodes.size();
  const auto [r_low, r_high] = span(replicas);
  const auto [l_low, l_high] = span(leads);
  std::printf(
      "%-34s replicas/node %d..%d (even %.2f: %+.1f%%..%+.1f%%), "
      "leads/node %d..%d (even %.2f: %+.1f%%..%+.1f%%)\n",
      what, r_low, r_high, even_replicas,
      100 * (r_low - even_replicas) / even_replicas,
      100 * (r_high - even_replicas) / even_replicas, l_low, l_high, even_leads,
      100 * (l_low - even_leads) / even_leads,
      100 * (l_high - even_leads) / even_leads);
}

void Moved(const char* what, const Layout& from, const Layout& to,
           size_t nodes) {
  const int copied = ReplicasAdded(from, to);
  const double total = static_cast<double>(to.shards.size() * kReplicas);
  int leads_moved = 0;
  for (size_t s = 0; s < to.shards.size(); ++s) {
    leads_moved += from.shards[s].front() != to.shards[s].front();
  }
  std::printf(
      "%-34s %d replicas copied = %.2f%% of all (1/N = %.2f%%), %d leads "
      "moved\n",
      what, copied, 100 * copied / total, 100.0 / nodes, leads_moved);
}

void Run(int node_count, int shard_count, int zones) {
  std::vector<BalanceNode> nodes;
  for (int i = 0; i < node_count; ++i) {
    nodes.push_back({absl::StrCat("node-", 1000 + i),
                     zones == 0 ? "" : absl::StrCat("zone-", i % zones)});
  }
  std::printf("# %d nodes, %d shards x %d replicas%s\n", node_count,
              shard_count, kReplicas,
              zones == 0 ? "" : absl::StrCat(", ", zones, " zones").c_str());
  Layout empty;
  empty.shards.resize(shard_count);
  absl::Time start = absl::Now();
  const Layout placed = Balance(empty, nodes, {});
  std::printf("placed in %s\n",
              absl::FormatDuration(absl::Now() - start).c_str());
  Report("placed", placed, nodes);

  std::vector<BalanceNode> joined = nodes;
  joined.push_back({"node-new", zones == 0 ? "" : "zone-0"});
  start = absl::Now();
  const Layout after_join = Balance(placed, joined, {});
  std::printf("rebalanced in %s\n",
              absl::FormatDuration(absl::Now() - start).c_str());
  Report("a node joined", after_join, joined);
  Moved("  moves", placed, after_join, joined.size());

  std::vector<BalanceNode> left = nodes;
  left.erase(left.begin() + node_count / 2);
  const Layout after_leave = Balance(placed, left, {});
  Report("a node left", after_leave, left);
  Moved("  moves", placed, after_leave, nodes.size());
}

}  // namespace
}  // namespace hourglass::cluster

int main(int argc, char** argv) {
  int nodes = 100, shards = 1024;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--nodes=", 8) == 0) {
      nodes = std::atoi(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--shards=", 9) == 0) {
      shards = std::atoi(argv[i] + 9);
    } else {
      std::fprintf(stderr, "usage: placement_sim [--nodes=N] [--shards=N]\n");
      return 2;
    }
  }
  if (nodes < 2 || shards < 1) {
    std::fprintf(stderr,
                 "placement_sim: --nodes must be at least 2 and "
                 "--shards at least 1\n");
    return 2;
  }
  hourglass::cluster::Run(nodes, shards, 0);
  hourglass::cluster::Run(nodes, shards, 3);
  return 0;
}
