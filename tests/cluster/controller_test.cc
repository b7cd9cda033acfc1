// The controller's decisions (cluster/controller.h) over views built by
// hand, the clock given.

#include "cluster/controller.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::cluster {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

ClusterView ThreeNodes() {
  ClusterView view;
  for (const char* id : {"a", "b", "c"}) {
    view.nodes[id].address = std::string(id) + ":7070";
  }
  return view;
}

TEST(ControllerTest, CreatesTheShardsOnceEnoughNodesJoined) {
  Controller controller({.shards = 2});
  ClusterView view = ThreeNodes();
  const Controller::Decision decision = controller.Decide(view, kStart);
  ASSERT_EQ(decision.writes.size(), 2u);
  EXPECT_EQ(decision.writes[0].shard, 0);
  EXPECT_EQ(decision.writes[0].mod_revision, std::nullopt);
  EXPECT_EQ(decision.writes[0].record.primary, "a");
  EXPECT_EQ(decision.writes[1].record.primary, "b");
  EXPECT_EQ(decision.writes[1].reason,
            "created shard 1 with primary b and replicas b,c,a");
}

TEST(ControllerTest, WaitsForTheInSyncBackupsToReportAtMostThePositionWait) {
  Controller controller({.position_wait = absl::Seconds(3)});
  ClusterView view = ThreeNodes();
  view.nodes.erase("a");
  view.shards[0] = {ShardRecord{4, "a", {"a", "b", "c"}, {"a", "b", "c"}}, 77};
  view.nodes["b"].positions[0] = Position{4, 10, 4};
  Controller::Decision decision = controller.Decide(view, kStart);
  EXPECT_THAT(decision.writes, IsEmpty());
  EXPECT_THAT(decision.waiting,
              ElementsAre("shard 0 has lost its primary a: waiting for 1 "
                          "in-sync backups to report their positions"));
  EXPECT_EQ(decision.next, kStart + absl::Seconds(3));
  // Said once.
  EXPECT_THAT(controller.Decide(view, kStart + absl::Seconds(1)).waiting,
              IsEmpty());
  // The wait over, b is promoted without c's report.
  decision = controller.Decide(view, kStart + absl::Seconds(3));
  ASSERT_EQ(decision.writes.size(), 1u);
  EXPECT_EQ(decision.writes[0].mod_revision, 77);
  EXPECT_EQ(decision.writes[0].record.primary, "b");
  EXPECT_EQ(decision.writes[0].record.epoch, 5);
}

TEST(ControllerTest, AResetStartsThePositionWaitAgain) {
  Controller controller({.position_wait = absl::Seconds(3)});
  ClusterView view = ThreeNodes();
  view.nodes.erase("a");
  view.shards[0] = {ShardRecord{4, "a", {"a", "b", "c"}, {"a", "b", "c"}}, 77};
  view.nodes["b"].positions[0] = Position{4, 10, 4};
  controller.Decide(view, kStart);
  controller.Reset();  // Another node led meanwhile.
  EXPECT_THAT(controller.Decide(view, kStart + absl::Seconds(3)).writes,
              IsEmpty());
}

}  // namespace
}  // namespace hourglass::cluster
