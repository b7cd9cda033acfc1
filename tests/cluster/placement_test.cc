#include "cluster/placement.h"

#include <map>
#include <optional>
#include <string>

#include "cluster/records.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Live nodes by id, none of them reporting a position.
std::map<std::string, NodeRecord> Alive(
    std::initializer_list<const char*> ids) {
  std::map<std::string, NodeRecord> alive;
  for (const char* id : ids) {
    alive[id].address = std::string(id) + ":7070";
  }
  return alive;
}

ShardRecord Record(int64_t epoch, std::string primary,
                   std::vector<std::string> replicas,
                   std::vector<std::string> isr) {
  return ShardRecord{epoch, std::move(primary), std::move(replicas),
                     std::move(isr)};
}

TEST(RecordsTest, ShardRecordsRoundTripThroughJson) {
  const ShardRecord record = Record(7, "b", {"b", "a", "c"}, {"b", "c"});
  const std::string json = EncodeShardRecord(record);
  EXPECT_EQ(json, R"({"epoch":"7","primary":"b","replicas":["b","a","c"],)"
                  R"("isr":["b","c"]})");
  absl::StatusOr<ShardRecord> decoded = DecodeShardRecord(json);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, record);
}

TEST(RecordsTest, NodeRecordsRoundTripThroughJson) {
  NodeRecord record;
  record.address = "10.0.0.1:7070";
  record.positions[0] = Position{3, 1200};
  record.zone = "eu-west-1a";
  absl::StatusOr<NodeRecord> decoded =
      DecodeNodeRecord(EncodeNodeRecord(record));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, record);
}

TEST(RecordsTest, WhatIsNotARecordIsRefused) {
  absl::StatusOr<ShardRecord> bad = DecodeShardRecord("{epoch: nonsense");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("not a shard record"));
  EXPECT_EQ(DecodeNodeRecord("[1,2]").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlanShardTest, WaitsForEnoughNodesBeforeCreatingTheShard) {
  const ShardPlan plan = PlanShard(0, std::nullopt, Alive({"a", "b"}), {});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason, "waiting for 3 nodes to create shard 0; 2 alive");
}

TEST(PlanShardTest, CreatesTheShardAtEpochOneWithEveryReplicaInSync) {
  const ShardPlan plan =
      PlanShard(0, std::nullopt, Alive({"c", "a", "d", "b"}), {});
  EXPECT_EQ(plan.write, Record(1, "a", {"a", "b", "c"}, {"a", "b", "c"}));
  EXPECT_EQ(plan.reason, "created shard 0 with primary a and replicas a,b,c");
  // Another shard starts elsewhere in the ring of nodes.
  EXPECT_EQ(PlanShard(3, std::nullopt, Alive({"c", "a", "d", "b"}), {}).write,
            Record(1, "d", {"d", "a", "b"}, {"d", "a", "b"}));
}

// Live nodes by id, each in the zone given.
std::map<std::string, NodeRecord> Zoned(
    std::initializer_list<std::pair<const char*, const char*>> nodes) {
  std::map<std::string, NodeRecord> alive;
  for (const auto& [id, zone] : nodes) {
    alive[id].address = std::string(id) + ":7070";
    alive[id].zone = zone;
  }
  return alive;
}

TEST(PlanShardTest, CreatesEachShardWithAReplicaInEachZone) {
  // Zone z1 holds a and b, z2 holds c and d, z3 holds e and f: in id order
  // a shard would take a, b and c, two in z1.
  const auto alive = Zoned({{"a", "z1"},
                            {"b", "z1"},
                            {"c", "z2"},
                            {"d", "z2"},
                            {"e", "z3"},
                            {"f", "z3"}});
  EXPECT_EQ(PlanShard(0, std::nullopt, alive, {}).write,
            Record(1, "a", {"a", "c", "e"}, {"a", "c", "e"}));
  EXPECT_EQ(PlanShard(1, std::nullopt, alive, {}).write,
            Record(1, "c", {"c", "e", "b"}, {"c", "e", "b"}));
  EXPECT_EQ(PlanShard(4, std::nullopt, alive, {}).write,
            Record(1, "d", {"d", "f", "a"}, {"d", "f", "a"}));
}

TEST(PlanShardTest, ReplacesAGoneBackupFromAZoneTheShardLacks) {
  // c (z2) is gone; d is in z1, which a already holds, e in z2.
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  const auto alive =
      Zoned({{"a", "z1"}, {"b", "z3"}, {"d", "z1"}, {"e", "z2"}});
  const ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, Record(4, "a", {"a", "b", "e"}, {"a", "b"}));
  EXPECT_EQ(plan.reason, "shard 0: replaced c by e");
}

TEST(PlanShardTest, LeavesAHealthyShardAlone) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b"});
  const ShardPlan plan = PlanShard(0, record, Alive({"a", "b", "c", "d"}), {});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason, "");
}

TEST(PlanShardTest, ReplacesAGoneBackupByASpareNodeOutsideTheIsr) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  const ShardPlan plan = PlanShard(0, record, Alive({"a", "b", "d"}), {});
  EXPECT_EQ(plan.write, Record(4, "a", {"a", "b", "d"}, {"a", "b"}));
  EXPECT_EQ(plan.reason, "shard 0: replaced c by d");
  // Without a spare, the gone backup stays (the primary drops it from the
  // ISR when it lags).
  EXPECT_EQ(PlanShard(0, record, Alive({"a", "b"}), {}).write, std::nullopt);
}

TEST(PlanShardTest, FillsAShardWithFewerReplicasThanWantedFromSpareNodes) {
  // A cluster restored from a snapshot: the restoring node alone.
  const ShardRecord record = Record(8, "a", {"a"}, {"a"});
  ShardPlan plan = PlanShard(0, record, Alive({"a"}), {});
  EXPECT_EQ(plan.write, std::nullopt);
  plan = PlanShard(0, record, Alive({"a", "b"}), {});
  EXPECT_EQ(plan.write, Record(8, "a", {"a", "b"}, {"a"}));
  EXPECT_EQ(plan.reason, "shard 0: added b");
  plan = PlanShard(0, record, Alive({"d", "a", "c", "b"}), {});
  EXPECT_EQ(plan.write, Record(8, "a", {"a", "b", "c"}, {"a"}));
  EXPECT_EQ(plan.reason, "shard 0: added b; added c");
  // A gone backup is replaced first.
  plan = PlanShard(0, Record(8, "a", {"a", "x"}, {"a", "x"}),
                   Alive({"a", "b", "c"}), {});
  EXPECT_EQ(plan.write, Record(8, "a", {"a", "b", "c"}, {"a"}));
  EXPECT_EQ(plan.reason, "shard 0: replaced x by b; added c");
}

TEST(PlanShardTest, WaitsForTheInSyncBackupsToReportBeforePromoting) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 100};
  const ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason,
            "shard 0 has lost its primary a: waiting for 1 in-sync backups "
            "to report their positions");
  // A report under an older epoch does not count.
  alive["c"].positions[0] = Position{3, 500};
  EXPECT_EQ(PlanShard(0, record, alive, {}).write, std::nullopt);
}

TEST(PlanShardTest, PromotesTheMostAdvancedInSyncBackupAtTheNextEpoch) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 100};
  alive["c"].positions[0] = Position{4, 102};
  const ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, Record(5, "c", {"c", "a", "b"}, {"c", "b"}));
  EXPECT_EQ(plan.reason,
            "promoted c (at index 102) to primary of shard 0 at epoch 5 "
            "after a left");
}

TEST(PlanShardTest, TiesGoToTheLowestNodeId) {
  const ShardRecord record = Record(2, "a", {"a", "c", "b"}, {"a", "c", "b"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{2, 9};
  alive["c"].positions[0] = Position{2, 9};
  EXPECT_EQ(PlanShard(0, record, alive, {}).write->primary, "b");
}

TEST(PlanShardTest, AfterTheWaitPromotesAmongThoseThatReported) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c", "d"});
  alive["b"].positions[0] = Position{4, 100};
  const ShardPlan plan =
      PlanShard(0, record, alive, {.position_wait_over = true});
  // c did not report: it stays a replica, out of the ISR; d, a spare,
  // replaces the old primary a.
  EXPECT_EQ(plan.write, Record(5, "b", {"b", "d", "c"}, {"b"}));
  EXPECT_THAT(plan.reason, HasSubstr("replaced a by d"));
}

TEST(PlanShardTest, ALeaderTransferWaitsForThePrimaryToReportWhereItStopped) {
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  record.transfer_to = "b";
  auto alive = Alive({"a", "b", "c"});
  // a reported under an older epoch only: that was another failover's.
  alive["a"].positions[0] = Position{3, 50};
  ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason, "shard 0: waiting for a to hand it over to b");

  alive["a"].positions[0] = Position{4, 120};
  plan = PlanShard(0, record, alive, {});
  // b leads at epoch 5; a stays in sync (b holds its whole log).
  EXPECT_EQ(plan.write, Record(5, "b", {"b", "a", "c"}, {"b", "a", "c"}));
  EXPECT_EQ(plan.reason,
            "handed shard 0 over from a to b at epoch 5 (a stopped at index "
            "120)");
}

TEST(PlanShardTest, ALeaderTransferToABackupGoneOrOutOfSyncIsGivenUp) {
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "c"});
  record.transfer_to = "b";
  ShardPlan plan = PlanShard(0, record, Alive({"a", "b", "c"}), {});
  EXPECT_EQ(plan.write, Record(4, "a", {"a", "b", "c"}, {"a", "c"}));
  EXPECT_EQ(plan.reason,
            "shard 0: gave up handing it over from a to b (not in sync)");

  record.isr = {"a", "b", "c"};
  plan = PlanShard(0, record, Alive({"a", "c"}), {});
  EXPECT_EQ(plan.write, Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"}));
  EXPECT_EQ(plan.reason, "shard 0: gave up handing it over from a to b (gone)");
}

TEST(PlanShardTest, APrimaryLostDuringALeaderTransferEndsTheTransfer) {
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  record.transfer_to = "b";
  auto alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 10};
  alive["c"].positions[0] = Position{4, 12};
  const ShardPlan plan = PlanShard(0, record, alive, {});
  ASSERT_TRUE(plan.write.has_value());
  EXPECT_EQ(plan.write->primary, "c");
  EXPECT_EQ(plan.write->transfer_to, "");
}

TEST(PlanShardTest, NeverPromotesABackupOutsideTheIsr) {
  // c is alive and the most advanced, but not in sync: it may lack
  // acknowledged writes.
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b"});
  std::map<std::string, NodeRecord> alive = Alive({"c"});
  alive["c"].positions[0] = Position{4, 1000};
  const ShardPlan plan =
      PlanShard(0, record, alive, {.position_wait_over = true});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason,
            "shard 0 has lost its primary a and no in-sync backup is alive "
            "(in-sync set a,b): waiting for one to come back");
}

// What a node's copies hold, for PositionsToReport's callbacks.
struct Copies {
  std::map<int, int64_t> durable;      // by shard
  std::map<int, int64_t> handed_over;  // by shard
  std::optional<int64_t> Position(int shard) const {
    auto it = durable.find(shard);
    if (it == durable.end()) return std::nullopt;
    return it->second;
  }
  std::optional<int64_t> HandedOver(int shard) const {
    auto it = handed_over.find(shard);
    if (it == handed_over.end()) return std::nullopt;
    return it->second;
  }
};

std::map<int, Position> Report(const std::string& node,
                               const std::map<int, ShardRecord>& shards,
                               const std::map<std::string, NodeRecord>& alive,
                               const Copies& copies) {
  return PositionsToReport(
      node, shards, alive, [&](int s) { return copies.Position(s); },
      [&](int s) { return copies.HandedOver(s); });
}

TEST(PositionsToReportTest, InSyncBackupsOfAGonePrimaryReportTheirCopies) {
  const std::map<int, ShardRecord> shards = {
      {0, Record(3, "a", {"a", "b", "c"}, {"a", "b"})},  // a gone
      {1, Record(2, "c", {"c", "b", "a"}, {"c", "b"})},  // c alive
  };
  const Copies copies{.durable = {{0, 12}, {1, 9}}};
  EXPECT_EQ(Report("b", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 12}}}));
  // c is no in-sync backup of shard 0: it lacks acknowledged writes.
  EXPECT_EQ(Report("c", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{}));
}

// The simulation's finding (tests/replication/simulation_test.cc): a
// report made once per epoch and kept went stale, and the controller
// promoted a backup less advanced than another it put in the in-sync set.
TEST(PositionsToReportTest,
     AReportFollowsTheCopyAndIsWithdrawnWhenThePrimaryIsBack) {
  const std::map<int, ShardRecord> shards = {
      {0, Record(3, "a", {"a", "b", "c"}, {"a", "b", "c"})}};
  Copies copies{.durable = {{0, 12}}};
  EXPECT_EQ(Report("b", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 12}}}));
  // Entries still in flight from a's stream arrive: reported again.
  copies.durable[0] = 13;
  EXPECT_EQ(Report("b", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 13}}}));
  // a is back under a new lease (same epoch) and writes on: withdrawn, so
  // that a later failover at this epoch waits for a fresh report.
  EXPECT_EQ(Report("b", shards, Alive({"a", "b", "c"}), copies),
            (std::map<int, Position>{}));
}

TEST(PositionsToReportTest, APrimaryReportsItsHandOverOnlyWhileItIsUnderWay) {
  std::map<int, ShardRecord> shards = {
      {0, Record(3, "a", {"a", "b", "c"}, {"a", "b", "c"})}};
  shards[0].transfer_to = "b";
  const auto alive = Alive({"a", "b", "c"});
  Copies copies{.durable = {{0, 20}}};
  // Not yet stopped, or b does not hold it all yet.
  EXPECT_EQ(Report("a", shards, alive, copies), (std::map<int, Position>{}));
  copies.handed_over[0] = 20;
  EXPECT_EQ(Report("a", shards, alive, copies),
            (std::map<int, Position>{{0, Position{3, 20}}}));
  // Given up: withdrawn (a writes again; a later transfer at epoch 3 must
  // wait for a new report, rebalance.h).
  shards[0].transfer_to.clear();
  EXPECT_EQ(Report("a", shards, alive, copies), (std::map<int, Position>{}));
}

}  // namespace
}  // namespace hourglass::cluster
