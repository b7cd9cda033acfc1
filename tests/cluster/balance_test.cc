// The placement of many shards over nodes (cluster/balance.h): balanced
// replicas and leads, few moves, zones respected.

#include "cluster/balance.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/seed.h"

namespace hourglass::cluster {
namespace {

using ::testing::ElementsAre;

std::vector<BalanceNode> Nodes(int count, int zones = 0) {
  std::vector<BalanceNode> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back({absl::StrCat("n", 100 + i),
                     zones == 0 ? "" : absl::StrCat("z", i % zones)});
  }
  return nodes;
}

Layout Empty(int shards) {
  Layout layout;
  layout.shards.resize(shards);
  return layout;
}

// Replicas and leads per node id.
struct Counts {
  std::map<std::string, int> replicas;
  std::map<std::string, int> leads;
};
Counts Count(const Layout& layout, const std::vector<BalanceNode>& nodes) {
  Counts counts;
  for (const BalanceNode& node : nodes) {
    counts.replicas[node.id] = 0;
    counts.leads[node.id] = 0;
  }
  for (const std::vector<std::string>& shard : layout.shards) {
    for (const std::string& id : shard) ++counts.replicas[id];
    if (!shard.empty()) ++counts.leads[shard.front()];
  }
  return counts;
}
std::pair<int, int> MinMax(const std::map<std::string, int>& counts) {
  int low = INT32_MAX, high = 0;
  for (const auto& [id, n] : counts) {
    low = std::min(low, n);
    high = std::max(high, n);
  }
  return {low, high};
}

// Most minus fewest: 1 or 0 when as even as whole numbers allow.
int Spread(const std::map<std::string, int>& counts) {
  const auto [low, high] = MinMax(counts);
  return high - low;
}

// Every shard has `replicas` distinct replicas.
void ExpectWellFormed(const Layout& layout, int replicas) {
  for (size_t s = 0; s < layout.shards.size(); ++s) {
    const std::vector<std::string>& shard = layout.shards[s];
    EXPECT_EQ(shard.size(), static_cast<size_t>(replicas)) << "shard " << s;
    EXPECT_EQ(std::set<std::string>(shard.begin(), shard.end()).size(),
              shard.size())
        << "shard " << s;
  }
}

TEST(BalanceTest, ANewClusterSpreadsReplicasAndLeadsEvenly) {
  const std::vector<BalanceNode> nodes = Nodes(5);
  const Layout layout = Balance(Empty(10), nodes, {});
  ExpectWellFormed(layout, 3);
  const Counts counts = Count(layout, nodes);
  EXPECT_EQ(MinMax(counts.replicas), std::make_pair(6, 6));
  EXPECT_EQ(MinMax(counts.leads), std::make_pair(2, 2));
  // Deterministic: the first shard goes to the first nodes by id.
  EXPECT_THAT(layout.shards[0], ElementsAre("n100", "n101", "n102"));
  EXPECT_EQ(Balance(Empty(10), nodes, {}), layout);
}

TEST(BalanceTest, ABalancedLayoutStaysAsItIs) {
  const std::vector<BalanceNode> nodes = Nodes(7);
  const Layout layout = Balance(Empty(64), nodes, {});
  EXPECT_EQ(Balance(layout, nodes, {}), layout);
}

TEST(BalanceTest, FewerNodesThanReplicasGiveEachShardEveryNode) {
  const Layout layout = Balance(Empty(4), Nodes(2), {});
  ExpectWellFormed(layout, 2);
}

TEST(BalanceTest, OnlyTheReplicasOfAGoneNodeAreReplaced) {
  std::vector<BalanceNode> nodes = Nodes(10);
  const Layout before = Balance(Empty(100), nodes, {});
  const std::string gone = nodes[3].id;
  const int held = Count(before, nodes).replicas[gone];
  nodes.erase(nodes.begin() + 3);
  const Layout after = Balance(before, nodes, {});
  ExpectWellFormed(after, 3);
  EXPECT_EQ(ReplicasAdded(before, after), held);
  const Counts counts = Count(after, nodes);
  EXPECT_LE(Spread(counts.replicas), 1);
  EXPECT_LE(Spread(counts.leads), 1);
}

// The figures: 100 nodes and 1,024 shards of three replicas.
TEST(BalanceTest, AHundredNodesHoldReplicasAndLeadsWithinTenPercentOfEven) {
  const std::vector<BalanceNode> nodes = Nodes(100);
  const Layout layout = Balance(Empty(1024), nodes, {});
  ExpectWellFormed(layout, 3);
  const Counts counts = Count(layout, nodes);
  // 3,072 replicas: 30.72 a node; 1,024 leads: 10.24 a node.
  EXPECT_EQ(MinMax(counts.replicas), std::make_pair(30, 31));
  EXPECT_EQ(MinMax(counts.leads), std::make_pair(10, 11));
}

TEST(BalanceTest, AJoiningNodeTakesItsShareAndLittleElseMoves) {
  std::vector<BalanceNode> nodes = Nodes(100);
  const Layout before = Balance(Empty(1024), nodes, {});
  nodes.push_back({"n999", ""});
  const Layout after = Balance(before, nodes, {});
  ExpectWellFormed(after, 3);
  const Counts counts = Count(after, nodes);
  // 3,072 / 101 = 30.4: the newcomer takes 30, copied from the others.
  EXPECT_EQ(counts.replicas.at("n999"), 30);
  EXPECT_EQ(ReplicasAdded(before, after), 30);
  EXPECT_LE(Spread(counts.replicas), 1);
  EXPECT_LE(Spread(counts.leads), 1);
}

TEST(BalanceTest, WithThreeZonesEachShardHasOneReplicaInEach) {
  std::vector<BalanceNode> nodes = Nodes(9, /*zones=*/3);
  const Layout layout = Balance(Empty(30), nodes, {});
  ExpectWellFormed(layout, 3);
  std::map<std::string, std::string> zone;
  for (const BalanceNode& node : nodes) zone[node.id] = node.zone;
  for (const std::vector<std::string>& shard : layout.shards) {
    std::set<std::string> zones;
    for (const std::string& id : shard) zones.insert(zone[id]);
    EXPECT_EQ(zones.size(), 3u);
  }
  // A node joins zone z1: the moves keep one replica per zone.
  nodes.push_back({"n999", "z1"});
  zone["n999"] = "z1";
  const Layout after = Balance(layout, nodes, {});
  for (const std::vector<std::string>& shard : after.shards) {
    std::set<std::string> zones;
    for (const std::string& id : shard) zones.insert(zone[id]);
    EXPECT_EQ(zones.size(), 3u);
  }
  EXPECT_GT(Count(after, nodes).replicas["n999"], 0);
}

// Nodes join and leave at random (seed logged; HOURGLASS_SEED replays):
// after each change, every shard is whole, replicas and leads are within
// one of even, and a join copies no more than the newcomer's share.
// A layout made before the nodes had zones (or while a zone was down) has
// shards with two replicas in one zone: a backup moves to the zone the
// shard lacks (b to f, d to b), then c, which holds every shard, gives one
// to d in its own zone.
TEST(BalanceTest, AShardWithTwoReplicasInOneZoneGetsOneInEach) {
  const std::vector<BalanceNode> nodes = {
      {"a", "z1"}, {"b", "z1"}, {"c", "z2"}, {"d", "z2"}, {"e", "z3"},
      {"f", "z3"}};
  Layout current;
  current.shards = {{"a", "b", "c"},   // z1 twice, z3 missing
                    {"c", "d", "e"},   // z2 twice, z1 missing
                    {"e", "a", "c"}};  // one in each already
  const Layout balanced = Balance(current, nodes, {});
  EXPECT_THAT(balanced.shards,
              ElementsAre(ElementsAre("a", "f", "d"), ElementsAre("c", "b", "e"),
                          ElementsAre("e", "a", "c")));
  EXPECT_EQ(ReplicasAdded(current, balanced), 3);
}

TEST(BalanceTest, RandomJoinsAndLeavesKeepTheBalance) {
  const uint64_t seed = testing::SeedFromEnvironment();
  std::cout << "seed " << seed << " (HOURGLASS_SEED to replay)\n";
  std::mt19937_64 random(seed);
  std::vector<BalanceNode> nodes = Nodes(20);
  int next_id = 1000;
  Layout layout = Balance(Empty(256), nodes, {});
  for (int step = 0; step < 60; ++step) {
    SCOPED_TRACE(absl::StrCat("seed ", seed, ", step ", step));
    const bool join =
        nodes.size() < 12 || (nodes.size() < 40 && random() % 2 == 0);
    if (join) {
      nodes.push_back({absl::StrCat("n", next_id++), ""});
    } else {
      nodes.erase(nodes.begin() + static_cast<long>(random() % nodes.size()));
    }
    const Layout after = Balance(layout, nodes, {});
    ExpectWellFormed(after, 3);
    const Counts counts = Count(after, nodes);
    ASSERT_LE(Spread(counts.replicas), 1);
    ASSERT_LE(Spread(counts.leads), 1);
    if (join) {
      // The newcomer's share, rounded up: 768 replicas over the nodes.
      ASSERT_LE(ReplicasAdded(layout, after),
                (768 + static_cast<int>(nodes.size()) - 1) /
                    static_cast<int>(nodes.size()));
    }
    layout = after;
  }
}

}  // namespace
}  // namespace hourglass::cluster
