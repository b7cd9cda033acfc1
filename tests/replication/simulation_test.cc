// The deterministic simulation of cluster mode's replication: seeded
// random steps over the world of simulation.h, whose nodes run the real
// ReplicaMachine and Controller (cluster/) over the real ReplicatedStore,
// Replica, Diverged, PlanShard and PlanRebalance, on memory stores that
// can lose what was not synced, with etcd's records simulated; its checker
// after every step, and once healed, the converged layout. Four variants:
// one shard on three nodes under faults (broken streams, crashes and
// restarts, lost disks, a primary paused past its lease, a shard's backups
// paused, etcd outages, failovers); the same under whole-cluster power
// losses; several shards over a pool of nodes larger than the replication
// factor, with nodes joining (new or wiped), drains and moves (pins)
// started and undone, and PlanRebalance's replica moves and leader
// transfers, under the same faults; and that over nodes in three zones.
//
// HOURGLASS_SIMULATION_SEED=N replays seed N alone (in every variant);
// HOURGLASS_SIMULATION_SEEDS=N runs seeds 1 to N (long runs: BENCHMARKS.md
// "Reliability runs").

#include "tests/replication/simulation.h"

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace hourglass::replication::simulation {
namespace {

// Each action with its share of the steps, per mille.
struct Action {
  int per_mille;
  const char* name;
  void (World::*run)();
};

constexpr Action kOneShardActions[] = {
    {250, "write", &World::Write},
    {190, "ship", &World::Ship},
    {190, "apply", &World::Apply},
    {70, "sync a backup", &World::SyncBackup},
    {140, "answer", &World::Answer},
    {20, "break a stream", &World::BreakStream},
    {20, "crash", &World::Crash},
    {30, "restart", &World::Restart},
    {5, "lose a disk", &World::LoseDisk},
    {15, "pause", &World::Pause},
    {25, "resume", &World::Resume},
    {5, "pause a shard's backups", &World::PauseBackups},
    {5, "etcd down", &World::EtcdDown},
    {10, "etcd up", &World::EtcdUp},
    {25, "control", &World::Control},
};

constexpr Action kManyShardActions[] = {
    {215, "write", &World::Write},
    {180, "ship", &World::Ship},
    {180, "apply", &World::Apply},
    {60, "sync a backup", &World::SyncBackup},
    {130, "answer", &World::Answer},
    {20, "break a stream", &World::BreakStream},
    {15, "crash", &World::Crash},
    {25, "restart", &World::Restart},
    {10, "pause", &World::Pause},
    {15, "resume", &World::Resume},
    {5, "etcd down", &World::EtcdDown},
    {10, "etcd up", &World::EtcdUp},
    {80, "control", &World::Control},
    {20, "join", &World::Join},
    {20, "drain or undo", &World::Drain},
    {10, "move or undo", &World::Pin},
    {5, "lose a disk", &World::LoseDisk},
};

// Whole-cluster power losses, rare elsewhere: a variant of their own makes
// them common enough to matter (with writes nobody waits for, which they
// take back).
constexpr Action kPowerLossActions[] = {
    {240, "write", &World::Write},
    {180, "ship", &World::Ship},
    {180, "apply", &World::Apply},
    {60, "sync a backup", &World::SyncBackup},
    {130, "answer", &World::Answer},
    {30, "break a stream", &World::BreakStream},
    {30, "crash", &World::Crash},
    {90, "restart", &World::Restart},
    {20, "power loss", &World::PowerLoss},
    {40, "control", &World::Control},
};

struct Variant {
  WorldOptions options;
  const Action* actions;
  size_t action_count;
  int steps;
  int seeds;  // by default, in CI
};

// Runs `variant` over its seeds (or the environment's); fails at the first
// seed whose checker fails, naming the seed and the step. Returns the
// stats summed over the seeds.
WorldStats RunSeeds(const Variant& variant, uint64_t& runs) {
  uint64_t first = 1;
  uint64_t last = variant.seeds;
  if (const char* seeds = std::getenv("HOURGLASS_SIMULATION_SEEDS")) {
    last = std::strtoull(seeds, nullptr, 10);
  }
  if (const char* seed = std::getenv("HOURGLASS_SIMULATION_SEED")) {
    first = last = std::strtoull(seed, nullptr, 10);
  }
  std::cout << "seeds " << first << " to " << last << ", " << variant.steps
            << " steps each (HOURGLASS_SIMULATION_SEED=N replays one)"
            << std::endl;
  WorldStats all;
  runs = last - first + 1;
  for (uint64_t seed = first; seed <= last; ++seed) {
    World world(seed, variant.options);
    bool ok = true;
    for (int step = 0; ok && step < variant.steps; ++step) {
      int roll = world.Uniform(1000);
      const char* name = "";
      for (size_t i = 0; i < variant.action_count; ++i) {
        const Action& action = variant.actions[i];
        if (roll < action.per_mille) {
          name = action.name;
          (world.*action.run)();
          break;
        }
        roll -= action.per_mille;
      }
      world.Settle();
      if (std::getenv("HOURGLASS_SIMULATION_TRACE") != nullptr) {
        std::cout << "step " << step << " (" << name << "):" << world.Trace()
                  << std::endl;
      }
      ok = world.Check(absl::StrCat("step ", step, " (", name, ")"));
    }
    ok = ok && world.HealAndCheck();
    if (!ok) {
      ADD_FAILURE() << "seed " << seed << ": " << world.failure()
                    << " (HOURGLASS_SIMULATION_SEED=" << seed << " replays it)";
      return all;
    }
    const WorldStats& stats = world.stats();
    all.acknowledged += stats.acknowledged;
    all.epochs += stats.epochs;
    all.rebuilds += stats.rebuilds;
    all.adds += stats.adds;
    all.drops += stats.drops;
    all.transfers += stats.transfers;
    all.joins += stats.joins;
    all.eligible_promotions += stats.eligible_promotions;
    all.given_back += stats.given_back;
    all.power_losses += stats.power_losses;
  }
  std::cout << all.acknowledged << " writes acknowledged, " << all.epochs
            << " epochs, " << all.rebuilds << " rebuilds, " << all.joins
            << " joins, " << all.adds << " replicas added, " << all.drops
            << " dropped, " << all.transfers << " leader transfers, "
            << all.eligible_promotions << " eligible copies promoted, "
            << all.given_back << " shards given back, " << all.power_losses
            << " power losses" << std::endl;
  return all;
}

TEST(ReplicationSimulationTest,
     OneShardNothingAcknowledgedIsLostAndCopiesNeverSplit) {
  Variant variant{.options = {},
                  .actions = kOneShardActions,
                  .action_count = std::size(kOneShardActions),
                  .steps = 300,
                  .seeds = 2500};
  uint64_t runs = 0;
  const WorldStats stats = RunSeeds(variant, runs);
  // The runs did what they are for: writes acknowledged, primaries changed,
  // eligible copies promoted (no in-sync one left), shards given back.
  // (Few writes are acknowledged for so many faults: a primary whose
  // in-sync set falls below min_insync acknowledges none, and gives the
  // shard back if writes waited.)
  if (runs > 1 && !HasFailure()) {
    EXPECT_GT(stats.acknowledged, static_cast<int64_t>(2 * runs));
    EXPECT_GT(stats.epochs, static_cast<int64_t>(2 * runs));
    EXPECT_GT(stats.eligible_promotions, static_cast<int64_t>(runs / 50));
    EXPECT_GT(stats.given_back, static_cast<int64_t>(runs / 50));
  }
}

TEST(ReplicationSimulationTest,
     WholeClusterPowerLossesNeverSplitACopysHistory) {
  Variant variant{.options = {},
                  .actions = kPowerLossActions,
                  .action_count = std::size(kPowerLossActions),
                  .steps = 300,
                  .seeds = 1000};
  uint64_t runs = 0;
  const WorldStats stats = RunSeeds(variant, runs);
  if (runs > 1 && !HasFailure()) {
    EXPECT_GT(stats.power_losses, static_cast<int64_t>(runs));
    EXPECT_GT(stats.given_back, static_cast<int64_t>(runs));
    EXPECT_GT(stats.acknowledged, static_cast<int64_t>(2 * runs));
  }
}

TEST(ReplicationSimulationTest, ManyShardsWithJoinsDrainsAndMovesUnderFaults) {
  Variant variant{.options = {.pool = {"a", "b", "c", "d", "e"},
                              .members = 3,
                              .shards = 4,
                              .replication_factor = 3,
                              .min_insync = 2},
                  .actions = kManyShardActions,
                  .action_count = std::size(kManyShardActions),
                  .steps = 400,
                  .seeds = 750};
  uint64_t runs = 0;
  const WorldStats stats = RunSeeds(variant, runs);
  // Every kind of change happened, many times over.
  if (runs > 1 && !HasFailure()) {
    const auto many = static_cast<int64_t>(runs);
    EXPECT_GT(stats.acknowledged, 5 * many);
    EXPECT_GT(stats.epochs, 4 * many);
    EXPECT_GT(stats.joins, many / 2);
    EXPECT_GT(stats.adds, many);
    EXPECT_GT(stats.drops, many);
    EXPECT_GT(stats.transfers, many / 2);
    EXPECT_GT(stats.rebuilds, many / 10);
  }
}

// The many-shard variant over three zones of two nodes each, two zones
// holding the first members: fills, failovers, joins, drains and moves
// spread each shard's replicas over the zones (CheckConverged).
TEST(ReplicationSimulationTest, ManyShardsOverThreeZonesSpreadEachShard) {
  Variant variant{.options = {.pool = {"a", "b", "c", "d", "e", "f"},
                              .members = 3,
                              .shards = 4,
                              .replication_factor = 3,
                              .min_insync = 2,
                              .zones = {{"a", "z1"},
                                        {"b", "z1"},
                                        {"c", "z2"},
                                        {"d", "z2"},
                                        {"e", "z3"},
                                        {"f", "z3"}}},
                  .actions = kManyShardActions,
                  .action_count = std::size(kManyShardActions),
                  .steps = 400,
                  .seeds = 300};
  uint64_t runs = 0;
  const WorldStats stats = RunSeeds(variant, runs);
  if (runs > 1 && !HasFailure()) {
    const auto many = static_cast<int64_t>(runs);
    EXPECT_GT(stats.acknowledged, 5 * many);
    EXPECT_GT(stats.joins, many / 2);
    EXPECT_GT(stats.adds, many);
    EXPECT_GT(stats.drops, many);
  }
}

}  // namespace
}  // namespace hourglass::replication::simulation
