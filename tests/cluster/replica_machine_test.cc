// The per-shard replica state machine (cluster/replica_machine.h): facts in,
// actions out, stepped here by hand. The node is "a" unless a test says
// otherwise; the shard is 0, --min_insync 2, the lag timeout 5 s.

#include "cluster/replica_machine.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

ShardRecord Record(int64_t epoch, std::string primary,
                   std::vector<std::string> replicas,
                   std::vector<std::string> isr) {
  return ShardRecord{epoch, std::move(primary), std::move(replicas),
                     std::move(isr)};
}

class ReplicaMachineTest : public ::testing::Test {
 protected:
  // Facts with `record` at revision `revision`, nodes a, b and c alive, and
  // a copy that accepted epoch `accepted`.
  ReplicaFacts Facts(const ShardRecord& record, int64_t revision,
                     int64_t accepted = 0) {
    ReplicaFacts facts;
    facts.now = now_;
    facts.record = record;
    facts.record_revision = revision;
    facts.alive = {{"a", "a:7070"}, {"b", "b:7070"}, {"c", "c:7070"}};
    facts.has_copy = true;
    facts.accepted_epoch = accepted;
    return facts;
  }
  // The primary's facts at `epoch`, its log ending at `last` of that
  // epoch, the backups `in_sync` in the set its writes wait for, each
  // holding the whole log, heard just now.
  static ReplicaFacts::Primary Store(int64_t epoch, int64_t last,
                                     const std::vector<std::string>& in_sync,
                                     absl::Time now) {
    ReplicaFacts::Primary store;
    store.epoch = epoch;
    store.last = {epoch, last};
    for (const std::string& node : in_sync) {
      store.backups[node] = {.applied = {epoch, last},
                             .durable = {epoch, last},
                             .last_heard = now,
                             .in_sync = true,
                             .counted = true,
                             .connected = true};
    }
    return store;
  }
  std::vector<std::string> Step(const ReplicaFacts& facts) {
    std::vector<std::string> described;
    for (const ReplicaAction& action : machine_.Step(facts)) {
      described.push_back(Describe(action));
    }
    return described;
  }

  absl::Time now_ = kStart;
  ReplicaMachine machine_{{.node = "a", .shard = 0}};
};

TEST_F(ReplicaMachineTest, NamedPrimaryItOpensItsStoreThenShipsAndServes) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b", "c"});
  EXPECT_THAT(Step(Facts(record, 10, /*accepted=*/1)),
              ElementsAre("OpenPrimary epoch 2 in sync [b,c]"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kPrimary);
  EXPECT_EQ(machine_.epoch(), 2);
  ReplicaFacts facts = Facts(record, 10, /*accepted=*/2);
  facts.primary = Store(2, 4, {"b", "c"}, now_);
  EXPECT_THAT(Step(facts),
              ElementsAre("StartShipper b at b:7070",
                          "StartShipper c at c:7070", "OpenEngine"));
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpening;
  EXPECT_THAT(Step(facts), IsEmpty());
  // A store that failed to open: the role is over, and it is tried again.
  EXPECT_THAT(Step(Facts(record, 10, /*accepted=*/1)),
              ElementsAre("OpenPrimary epoch 2 in sync [b,c]"));
}

TEST_F(ReplicaMachineTest,
       AnEngineIsAskedForAgainAfterAWhileAndNotBelowMinInsync) {
  ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b", "c"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 4, {"b", "c"}, now_);
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  EXPECT_THAT(Step(facts), ElementsAre("OpenEngine"));
  // It failed to open (the host reports it closed again): not at once.
  facts.engine_error = "the disk is full";
  EXPECT_THAT(Step(facts), IsEmpty());
  now_ += absl::Milliseconds(500);
  facts.now = now_;
  EXPECT_THAT(Step(facts), ElementsAre("OpenEngine"));
  // With the in-sync set below --min_insync, no engine could open.
  record.isr = {"a"};
  facts = Facts(record, 11, 2);
  facts.primary = Store(2, 4, {}, now_);
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  now_ += absl::Seconds(1);
  facts.now = now_;
  EXPECT_THAT(Step(facts), IsEmpty());
}

TEST_F(ReplicaMachineTest, ALeaderAtAnEpochItsCopyAcceptedGivesTheShardBack) {
  // a led epoch 3, crashed and came back before anyone was promoted (after
  // a power loss, a backup may hold entries of epoch 3 it lost).
  const ShardRecord record = Record(3, "a", {"a", "b", "c"}, {"a", "b", "c"});
  EXPECT_THAT(Step(Facts(record, 20, /*accepted=*/3)),
              ElementsAre("WriteRecord epoch 3 primary - isr [a,b,c] "
                          "eligible []"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kNone);
  // Not again from the same revision for a second (the write may still be
  // on its way), then again (it failed: etcd did not answer).
  now_ += absl::Milliseconds(500);
  EXPECT_THAT(Step(Facts(record, 20, 3)), IsEmpty());
  now_ += absl::Seconds(1);
  EXPECT_THAT(Step(Facts(record, 20, 3)),
              ElementsAre("WriteRecord epoch 3 primary - isr [a,b,c] "
                          "eligible []"));
  // The controller promoted it again, at epoch 4: it leads.
  EXPECT_THAT(
      Step(Facts(Record(4, "a", {"a", "b", "c"}, {"a", "b", "c"}), 22, 3)),
      ElementsAre("OpenPrimary epoch 4 in sync [b,c]"));
}

TEST_F(ReplicaMachineTest,
       APrimaryWhoseStoreClosedStepsDownAndGivesTheShardBack) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b", "c"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 9, {"b", "c"}, now_);
  facts.primary->closed = true;
  facts.primary->close_reason = "entry 9 of epoch 2 was not acknowledged";
  EXPECT_THAT(Step(facts),
              ElementsAre("StepDown: entry 9 of epoch 2 was not acknowledged",
                          "WriteRecord epoch 2 primary - isr [a,b,c] "
                          "eligible []"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kNone);
  // It does not take the lead again at that epoch (its copy accepted it):
  // the write is made again until the record moves on.
  now_ += absl::Seconds(2);
  EXPECT_THAT(Step(Facts(record, 10, 2)),
              ElementsAre("WriteRecord epoch 2 primary - isr [a,b,c] "
                          "eligible []"));
  // Given back: a backup until the controller promotes a copy, following
  // nothing meanwhile (there is no primary).
  ShardRecord given = record;
  given.primary.clear();
  EXPECT_THAT(Step(Facts(given, 11, 2)), ElementsAre("Refuse"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kBackup);
}

TEST_F(ReplicaMachineTest,
       AGoneBackupLeavesTheInSyncSetThroughTheRecordAndStaysEligibleBelowMin) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 30, {"b"}, now_);
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpen;
  facts.alive.erase("b");
  // The record first (writes go on waiting for b meanwhile); b, whose
  // removal leaves a alone, stays eligible.
  EXPECT_THAT(Step(facts), ElementsAre("StopShipper b",
                                       "WriteRecord epoch 2 primary a isr [a] "
                                       "eligible [b]"));
  // Once the record says so, writes stop waiting for b.
  ShardRecord written = record;
  written.isr = {"a"};
  written.eligible = {"b"};
  facts = Facts(written, 11, 2);
  facts.alive.erase("b");
  facts.primary = Store(2, 30, {"b"}, now_);
  facts.shippers = {{"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpen;
  EXPECT_THAT(Step(facts), ElementsAre("RemoveInSync b"));
}

TEST_F(ReplicaMachineTest,
       ABackupLackingAnOldEntryIsStuckOneLackingANewOneIsNot) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b", "c"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 30, {"b", "c"}, now_);
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpen;
  now_ += absl::Seconds(20);
  facts.now = now_;
  // c heard nothing for 20 s, but the entry it lacks was written just now.
  facts.primary->last = {2, 33};
  facts.primary->backups["c"].lacking_since = now_ - absl::Milliseconds(10);
  EXPECT_THAT(Step(facts), IsEmpty());
  // b has lacked entry 31 for 6 s.
  facts.primary->backups["b"].lacking_since = now_ - absl::Seconds(6);
  EXPECT_THAT(Step(facts), ElementsAre("WriteRecord epoch 2 primary a isr "
                                       "[a,c] eligible []"));
}

TEST_F(ReplicaMachineTest, ABackupThatCaughtUpJoinsOnceItMadeTheLogDurable) {
  ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 50, {"b"}, now_);
  facts.primary->backups["c"] = {.applied = {2, 49},
                                 .durable = {2, 40},
                                 .last_heard = now_,
                                 .lag_bytes = 100,
                                 .connected = true};
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpen;
  // Writes wait for c from now on; it joins the record once entry 50 (the
  // last when they began to) is durable on it.
  EXPECT_THAT(Step(facts), ElementsAre("AddInSync c"));
  facts.primary->backups["c"].in_sync = true;
  facts.primary->last = {2, 52};
  EXPECT_THAT(Step(facts), IsEmpty());
  // A position from a stream that has ended does not count: the node may
  // have lost that copy since (a wiped disk, back empty).
  facts.primary->backups["c"].durable = {2, 50};
  facts.primary->backups["c"].connected = false;
  EXPECT_THAT(Step(facts), IsEmpty());
  facts.primary->backups["c"].connected = true;
  EXPECT_THAT(Step(facts), ElementsAre("WriteRecord epoch 2 primary a isr "
                                       "[a,b,c] eligible []"));
  // In the record: it counts toward --min_insync from now on (not before:
  // a set below it must acknowledge nothing the eligible copies lack).
  record.isr = {"a", "b", "c"};
  facts.record = record;
  facts.record_revision = 11;
  EXPECT_THAT(Step(facts), ElementsAre("CountInSync c"));
}

// With nothing written, a caught-up backup has nothing to answer: it is
// added however long ago it last did, while its stream is up.
TEST_F(ReplicaMachineTest,
       AQuietBackupHoldingTheWholeLogIsAddedWhileConnected) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 50, {"b"}, now_);
  facts.primary->backups["c"] = {.applied = {2, 50},
                                 .durable = {2, 50},
                                 .last_heard = now_ - absl::Minutes(1),
                                 .connected = false};
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpen;
  EXPECT_THAT(Step(facts), IsEmpty());
  facts.primary->backups["c"].connected = true;
  EXPECT_THAT(Step(facts), ElementsAre("AddInSync c"));
}

TEST_F(ReplicaMachineTest,
       ABackupThatDoesNotMakeTheLogDurableInTimeIsNotAdded) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 50, {"b"}, now_);
  facts.primary->backups["c"] = {.applied = {2, 50},
                                 .durable = {2, 40},
                                 .last_heard = now_,
                                 .connected = true};
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpen;
  EXPECT_THAT(Step(facts), ElementsAre("AddInSync c"));
  facts.primary->backups["c"].in_sync = true;
  now_ += absl::Seconds(6);
  facts.now = now_;
  facts.primary->backups["c"].last_heard = now_;
  EXPECT_THAT(Step(facts), ElementsAre("RemoveInSync c"));
  // Not tried again for the lag timeout: writes wait for a backup being
  // added, and this one is slow.
  facts.primary->backups["c"].in_sync = false;
  now_ += absl::Seconds(1);
  facts.now = now_;
  facts.primary->backups["c"].last_heard = now_;
  EXPECT_THAT(Step(facts), IsEmpty());
  now_ += absl::Seconds(5);
  facts.now = now_;
  facts.primary->backups["c"].last_heard = now_;
  EXPECT_THAT(Step(facts), ElementsAre("AddInSync c"));
}

TEST_F(ReplicaMachineTest,
       ALeaderTransferStopsWritingAndReportsOnceTheTargetHasItAll) {
  ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b", "c"});
  Step(Facts(record, 10, 1));
  record.transfer_to = "b";
  ReplicaFacts facts = Facts(record, 11, 2);
  facts.primary = Store(2, 70, {"b", "c"}, now_);
  facts.primary->backups["b"].durable = {2, 69};
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  facts.engine = ReplicaFacts::Engine::kOpen;
  EXPECT_THAT(Step(facts), ElementsAre("CloseEngine: shard 0 is being handed "
                                       "over from a to b; retry shortly"));
  facts.engine = ReplicaFacts::Engine::kClosed;
  EXPECT_THAT(Step(facts), IsEmpty());
  EXPECT_EQ(machine_.handed_over(), std::nullopt);
  facts.primary->backups["b"].durable = {2, 70};
  EXPECT_THAT(Step(facts), ElementsAre("HandedOver at 70"));
  EXPECT_EQ(machine_.handed_over(), 70);
  EXPECT_THAT(Step(facts), IsEmpty());
  // Given up: the engine opens again.
  record.transfer_to.clear();
  facts = Facts(record, 12, 2);
  facts.primary = Store(2, 70, {"b", "c"}, now_);
  facts.shippers = {{"b", "b:7070"}, {"c", "c:7070"}};
  EXPECT_THAT(Step(facts), ElementsAre("OpenEngine"));
  EXPECT_EQ(machine_.handed_over(), std::nullopt);
}

TEST_F(ReplicaMachineTest, AReplicaFollowsItsPrimaryAndIsRebuiltWhenItCannot) {
  const ShardRecord record = Record(2, "b", {"b", "a", "c"}, {"b", "c"});
  ReplicaFacts facts = Facts(record, 10, 2);
  EXPECT_THAT(Step(facts), ElementsAre("Refuse", "Follow"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kLearner);
  facts.following = true;
  facts.rebuild_asked = "its copy diverged";
  EXPECT_THAT(Step(facts), ElementsAre("Refuse", "Rebuild from b:7070"));
  // In the in-sync set: a backup.
  facts = Facts(Record(2, "b", {"b", "a", "c"}, {"b", "a", "c"}), 11, 2);
  facts.following = true;
  EXPECT_THAT(Step(facts), ElementsAre("Refuse"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kBackup);
}

TEST_F(ReplicaMachineTest, AReplicaStopsFollowingAPrimaryThatIsGone) {
  const ShardRecord record = Record(4, "b", {"b", "a", "c"}, {"b", "a", "c"});
  ReplicaFacts facts = Facts(record, 10, 4);
  facts.following = true;
  EXPECT_THAT(Step(facts), ElementsAre("Refuse"));
  // b's lease ended: what b sent and a has not applied yet stays out, so
  // the position a reports for the controller to rank is final.
  facts.alive.erase("b");
  EXPECT_THAT(Step(facts), ElementsAre("Refuse", "StopFollowing"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kBackup);
  facts.following = false;
  EXPECT_THAT(Step(facts), ElementsAre("Refuse"));
  // b came back before a copy was promoted: a follows it again.
  facts.alive["b"] = "b:7070";
  EXPECT_THAT(Step(facts), ElementsAre("Refuse", "Follow"));
  // Promoted at epoch 5, c is followed.
  facts = Facts(Record(5, "c", {"c", "a"}, {"c", "a"}), 12, 4);
  facts.alive.erase("b");
  EXPECT_THAT(Step(facts), ElementsAre("Refuse", "Follow"));
}

TEST_F(ReplicaMachineTest, ACopyTheRecordDoesNotNameIsRemovedUnlessItIsNewer) {
  ReplicaFacts facts = Facts(Record(3, "b", {"b", "c", "d"}, {"b", "c"}), 10,
                             /*accepted=*/3);
  facts.following = true;
  EXPECT_THAT(Step(facts),
              ElementsAre("Refuse", "StopFollowing", "RemoveCopy"));
  // A copy that followed epoch 5 under a record of epoch 3: etcd's data
  // was replaced; it stays, said once.
  facts = Facts(Record(3, "b", {"b", "c", "d"}, {"b", "c"}), 10, 5);
  EXPECT_THAT(Step(facts), ElementsAre("Refuse", "KeepCopy of epoch 5"));
  EXPECT_THAT(Step(facts), ElementsAre("Refuse"));
}

TEST_F(ReplicaMachineTest, APrimaryDeposedByANewerRecordStepsDownAndFollows) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b", "c"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts =
      Facts(Record(3, "b", {"b", "a", "c"}, {"b", "c"}), 12, 2);
  facts.primary = Store(2, 9, {"b", "c"}, now_);
  EXPECT_THAT(Step(facts), ElementsAre("Refuse",
                                       "StepDown: a newer primary exists (b at "
                                       "epoch 3)",
                                       "Follow"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kLearner);
}

TEST_F(ReplicaMachineTest, ALeavingNodeStepsDownAndTakesNoRole) {
  const ShardRecord record = Record(2, "a", {"a", "b", "c"}, {"a", "b", "c"});
  Step(Facts(record, 10, 1));
  ReplicaFacts facts = Facts(record, 10, 2);
  facts.primary = Store(2, 9, {"b", "c"}, now_);
  facts.leaving = true;
  EXPECT_THAT(Step(facts),
              ElementsAre("StepDown: this node is leaving the cluster"));
  EXPECT_EQ(machine_.role(), ReplicaMachine::Role::kNone);
}

}  // namespace
}  // namespace hourglass::cluster
