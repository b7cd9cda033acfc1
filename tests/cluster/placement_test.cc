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

  ShardRecord below = Record(8, "b", {"b", "a", "c"}, {"b"});
  below.eligible = {"c"};
  EXPECT_EQ(EncodeShardRecord(below),
            R"({"epoch":"8","primary":"b","replicas":["b","a","c"],)"
            R"("isr":["b"],"eligible":["c"]})");
  EXPECT_EQ(DecodeShardRecord(EncodeShardRecord(below)).value(), below);
}

TEST(RecordsTest, NodeRecordsRoundTripThroughJson) {
  NodeRecord record;
  record.address = "10.0.0.1:7070";
  record.positions[0] = Position{3, 1200, 2};
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
  // c (z2) is gone, and out of the ISR; d is in z1, which a already
  // holds, e in z2.
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b"});
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

TEST(PlanShardTest, ReplacesAGoneBackupByASpareNodeOnceOutOfTheIsr) {
  // c is gone but still in the ISR: the primary takes it out first (and
  // keeps it eligible if that leaves too few), then it may be replaced.
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  EXPECT_EQ(PlanShard(0, record, Alive({"a", "b", "d"}), {}).write,
            std::nullopt);
  record.isr = {"a", "b"};
  const ShardPlan plan = PlanShard(0, record, Alive({"a", "b", "d"}), {});
  EXPECT_EQ(plan.write, Record(4, "a", {"a", "b", "d"}, {"a", "b"}));
  EXPECT_EQ(plan.reason, "shard 0: replaced c by d");
  // Without a spare, the gone backup stays.
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
  // A gone backup (out of the ISR) is replaced first.
  plan = PlanShard(0, Record(8, "a", {"a", "x"}, {"a"}), Alive({"a", "b", "c"}),
                   {.min_insync = 1});
  EXPECT_EQ(plan.write, Record(8, "a", {"a", "b", "c"}, {"a"}));
  EXPECT_EQ(plan.reason, "shard 0: replaced x by b; added c");
}

TEST(PlanShardTest, WaitsForTheInSyncBackupsToReportBeforePromoting) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 100, 4};
  const ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason,
            "shard 0 has lost its primary a: waiting for 1 in-sync backups "
            "to report their positions");
  // A report under an older epoch does not count.
  alive["c"].positions[0] = Position{3, 500, 3};
  EXPECT_EQ(PlanShard(0, record, alive, {}).write, std::nullopt);
}

TEST(PlanShardTest, PromotesTheMostAdvancedInSyncBackupAtTheNextEpoch) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 100, 4};
  alive["c"].positions[0] = Position{4, 102, 4};
  const ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, Record(5, "c", {"c", "a", "b"}, {"c", "b"}));
  EXPECT_EQ(plan.reason,
            "promoted c (at index 102 of epoch 4) to primary of shard 0 at "
            "epoch 5 after a left");
}

// Kafka's leader epochs (KIP-101, KIP-279): a copy whose last entry is of
// an older epoch holds less of the newest history, whatever its index.
TEST(PlanShardTest, RanksCopiesByTheEpochOfTheirLastEntryBeforeTheIndex) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 90, 4};
  alive["c"].positions[0] = Position{4, 120, 3};
  const ShardPlan plan = PlanShard(0, record, alive, {});
  ASSERT_TRUE(plan.write.has_value());
  EXPECT_EQ(plan.write->primary, "b");
}

TEST(PlanShardTest, TiesGoToTheLowestNodeId) {
  const ShardRecord record = Record(2, "a", {"a", "c", "b"}, {"a", "c", "b"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{2, 9, 2};
  alive["c"].positions[0] = Position{2, 9, 2};
  EXPECT_EQ(PlanShard(0, record, alive, {}).write->primary, "b");
}

TEST(PlanShardTest, AfterTheWaitPromotesAmongThoseThatReported) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c", "d"});
  alive["b"].positions[0] = Position{4, 100, 4};
  const ShardPlan plan =
      PlanShard(0, record, alive, {.position_wait_over = true});
  // c did not report: it stays a replica, out of the ISR, but eligible, as
  // is a (the in-sync set left is smaller than --min_insync, and both hold
  // every acknowledged write); so no spare replaces a.
  ShardRecord want = Record(5, "b", {"b", "a", "c"}, {"b"});
  want.eligible = {"a", "c"};
  EXPECT_EQ(plan.write, want);
  // With --min_insync=1 they need not be: d, a spare, replaces a.
  const ShardPlan one = PlanShard(
      0, record, alive, {.min_insync = 1, .position_wait_over = true});
  EXPECT_EQ(one.write, Record(5, "b", {"b", "d", "c"}, {"b"}));
  EXPECT_THAT(one.reason, HasSubstr("replaced a by d"));
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
  alive["b"].positions[0] = Position{4, 10, 4};
  alive["c"].positions[0] = Position{4, 12, 4};
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
  alive["c"].positions[0] = Position{4, 1000, 4};
  const ShardPlan plan =
      PlanShard(0, record, alive, {.position_wait_over = true});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason,
            "shard 0 has lost its primary a and no in-sync backup is alive "
            "(in-sync set a,b; eligible copies none): waiting for one to "
            "come back");
}

// The double fault: both backups paused, the primary took them out of the
// in-sync set one by one (the second left it below --min_insync, so c is
// eligible), then the primary's disk was lost. b may lack writes
// acknowledged by a and c; c lacks none.
TEST(PlanShardTest, WithNoInSyncBackupAlivePromotesTheBestEligibleCopy) {
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a"});
  record.eligible = {"c"};
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 900, 4};
  ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason,
            "shard 0 has lost its primary a: waiting for 1 eligible copies "
            "to report their positions");
  alive["c"].positions[0] = Position{4, 850, 4};
  plan = PlanShard(0, record, alive, {});
  // c leads at epoch 5 alone; a, the old primary, held every acknowledged
  // write when it left the in-sync set: eligible now.
  ShardRecord want = Record(5, "c", {"c", "a", "b"}, {"c"});
  want.eligible = {"a"};
  EXPECT_EQ(plan.write, want);
  EXPECT_EQ(plan.reason,
            "promoted eligible copy c (at index 850 of epoch 4) to primary "
            "of shard 0 at epoch 5 after a left");
}

TEST(PlanShardTest, EligibleCopiesOfTheBestsEpochJoinTheNewInSyncSet) {
  ShardRecord record = Record(6, "a", {"a", "b", "c", "d"}, {"a"});
  record.eligible = {"b", "c", "d"};
  std::map<std::string, NodeRecord> alive = Alive({"b", "c", "d"});
  alive["b"].positions[0] = Position{6, 40, 6};
  alive["c"].positions[0] = Position{6, 44, 6};
  alive["d"].positions[0] = Position{6, 45, 5};  // diverged: another epoch
  const ShardPlan plan = PlanShard(0, record, alive, {.min_insync = 3});
  ShardRecord want = Record(7, "c", {"c", "a", "b", "d"}, {"c", "b"});
  want.eligible = {"d", "a"};
  EXPECT_EQ(plan.write, want);
}

TEST(PlanShardTest, AShardItsPrimaryGaveBackIsPromotedAmongItsInSyncSet) {
  // a gave the shard back (its writes were not acknowledged in time): a
  // is alive and in sync, and may be chosen again, at a new epoch.
  const ShardRecord record = Record(4, "", {"a", "b", "c"}, {"a", "b", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"a", "b", "c"});
  alive["a"].positions[0] = Position{4, 70, 4};
  alive["b"].positions[0] = Position{4, 69, 4};
  ShardPlan plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, std::nullopt);
  EXPECT_EQ(plan.reason,
            "shard 0 was given back by its primary: waiting for 1 in-sync "
            "backups to report their positions");
  alive["c"].positions[0] = Position{4, 69, 4};
  plan = PlanShard(0, record, alive, {});
  EXPECT_EQ(plan.write, Record(5, "a", {"a", "b", "c"}, {"a", "b", "c"}));
  EXPECT_EQ(plan.reason,
            "promoted a (at index 70 of epoch 4) to primary of shard 0 at "
            "epoch 5 after its primary gave it back");
}

TEST(PlanShardTest, NeverReplacesAnEligibleCopyByASpare) {
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a"});
  record.eligible = {"b"};
  const ShardPlan plan = PlanShard(0, record, Alive({"a", "d", "e"}), {});
  ShardRecord want = record;
  want.replicas = {"a", "b", "d"};
  EXPECT_EQ(plan.write, want);
  EXPECT_EQ(plan.reason, "shard 0: replaced c by d");
}

TEST(KeepEligibleTest,
     CopiesLeavingASetBelowMinInsyncStayEligibleUntilItIsBack) {
  const ShardRecord all = Record(3, "a", {"a", "b", "c"}, {"a", "b", "c"});
  // b leaves: a and c are two, enough; b may lack what they acknowledge.
  ShardRecord next = all;
  next.isr = {"a", "c"};
  KeepEligible(all, next, 2);
  EXPECT_THAT(next.eligible, ElementsAre());
  // c leaves too: below --min_insync, nothing more is acknowledged.
  ShardRecord alone = next;
  alone.isr = {"a"};
  KeepEligible(next, alone, 2);
  EXPECT_THAT(alone.eligible, ElementsAre("c"));
  // b comes back: two again, and writes can be acknowledged without c.
  ShardRecord back = alone;
  back.isr = {"a", "b"};
  KeepEligible(alone, back, 2);
  EXPECT_THAT(back.eligible, ElementsAre());
  // With --min_insync=3, b coming back is still too few; c stays, b is no
  // longer merely eligible.
  ShardRecord three = alone;
  three.eligible = {"b", "c"};
  ShardRecord b_back = three;
  b_back.isr = {"a", "b"};
  KeepEligible(three, b_back, 3);
  EXPECT_THAT(b_back.eligible, ElementsAre("c"));
  // A node that is no replica any more is not eligible.
  ShardRecord moved = b_back;
  moved.replicas = {"a", "b", "d"};
  KeepEligible(b_back, moved, 3);
  EXPECT_THAT(moved.eligible, ElementsAre());
}

// What a node's copies hold, for PositionsToReport's callbacks.
struct Copies {
  std::map<int, LogEnd> durable;       // by shard
  std::map<int, int64_t> handed_over;  // by shard
  std::optional<LogEnd> Position(int shard) const {
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
  const Copies copies{.durable = {{0, {3, 12}}, {1, {2, 9}}}};
  EXPECT_EQ(Report("b", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 12, 3}}}));
  // c is no in-sync backup of shard 0 (it may lack acknowledged writes):
  // it reports too, for an operator's recovery, but is never promoted by
  // the controller (NeverPromotesABackupOutsideTheIsr); of shard 1 it is
  // the live primary, and reports nothing.
  EXPECT_EQ(Report("c", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 12, 3}}}));
}

TEST(PositionsToReportTest, EligibleCopiesReportTooAndSoDoesAGivenBackShard) {
  std::map<int, ShardRecord> shards = {
      {0, Record(3, "a", {"a", "b", "c"}, {"a"})},
      {1, Record(5, "", {"c", "a", "b"}, {"c", "a"})}};
  shards[0].eligible = {"c"};
  const Copies copies{.durable = {{0, {2, 40}}, {1, {5, 7}}}};
  EXPECT_EQ(Report("c", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 40, 2}},
                                     {1, Position{5, 7, 5}}}));
}

// The simulation's finding (tests/replication/simulation_test.cc): a
// report made once per epoch and kept went stale, and the controller
// promoted a backup less advanced than another it put in the in-sync set.
TEST(PositionsToReportTest,
     AReportFollowsTheCopyAndIsWithdrawnWhenThePrimaryIsBack) {
  const std::map<int, ShardRecord> shards = {
      {0, Record(3, "a", {"a", "b", "c"}, {"a", "b", "c"})}};
  Copies copies{.durable = {{0, {3, 12}}}};
  EXPECT_EQ(Report("b", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 12, 3}}}));
  // Entries still in flight from a's stream arrive: reported again.
  copies.durable[0] = {3, 13};
  EXPECT_EQ(Report("b", shards, Alive({"b", "c"}), copies),
            (std::map<int, Position>{{0, Position{3, 13, 3}}}));
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
  Copies copies{.durable = {{0, {3, 20}}}};
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

// Nothing safe left: the primary and its only eligible copy lost, b a
// copy out of sync. The operator promotes b, and is told what is lost.
TEST(PlanRecoveryTest, PromotesTheNamedCopyAndSaysWhatItLoses) {
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a"});
  record.eligible = {"c"};
  record.acknowledged = {4, 120};
  std::map<std::string, NodeRecord> alive = Alive({"b"});
  absl::StatusOr<Recovery> unreported = PlanRecovery(0, record, alive, "b");
  EXPECT_EQ(unreported.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unreported.status().message(),
              HasSubstr("node b has not reported a copy of shard 0 at epoch "
                        "4"));
  alive["b"].positions[0] = Position{4, 90, 4};
  absl::StatusOr<Recovery> recovery = PlanRecovery(0, record, alive, "b");
  ASSERT_TRUE(recovery.ok()) << recovery.status();
  ShardRecord want = Record(5, "b", {"b", "a", "c"}, {"b"});
  want.acknowledged = {4, 90};
  EXPECT_EQ(recovery->write, want);
  EXPECT_EQ(recovery->copy, (LogEnd{4, 90}));
  EXPECT_EQ(recovery->loss,
            "writes acknowledged after entry 90 of epoch 4, this copy's end, "
            "are lost: at least those up to entry 120 of epoch 4 (known "
            "acknowledged at the last in-sync change), and any acknowledged "
            "since");
}

TEST(PlanRecoveryTest, NamesAMoreAdvancedCopy) {
  const ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a"});
  std::map<std::string, NodeRecord> alive = Alive({"b", "c"});
  alive["b"].positions[0] = Position{4, 90, 4};
  alive["c"].positions[0] = Position{4, 95, 4};
  absl::StatusOr<Recovery> recovery = PlanRecovery(0, record, alive, "b");
  ASSERT_TRUE(recovery.ok()) << recovery.status();
  EXPECT_EQ(recovery->best_node, "c");
  EXPECT_EQ(recovery->loss,
            "no write known acknowledged is past this copy's end (entry 90 "
            "of epoch 4; known acknowledged: none), but writes acknowledged "
            "since the last in-sync change may be lost; c's copy ends "
            "further, at entry 95 of epoch 4");
}

TEST(PlanRecoveryTest, RefusesWhileAPrimaryOrASafeCopyIsAlive) {
  ShardRecord record = Record(4, "a", {"a", "b", "c"}, {"a", "c"});
  std::map<std::string, NodeRecord> alive = Alive({"a", "b", "c"});
  absl::StatusOr<Recovery> refused = PlanRecovery(0, record, alive, "b");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "shard 0's primary a is alive: there is nothing to recover");
  alive.erase("a");
  refused = PlanRecovery(0, record, alive, "b");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("alive: c (in sync); the controller promotes it by "
                        "itself, without loss"));
  record.isr = {"a"};
  record.eligible = {"c"};
  refused = PlanRecovery(0, record, alive, "b");
  EXPECT_THAT(refused.status().message(), HasSubstr("alive: c (eligible)"));
  EXPECT_EQ(PlanRecovery(0, record, Alive({"b"}), "d").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hourglass::cluster
