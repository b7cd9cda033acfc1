// A node whose disk died comes back at once, before its etcd lease ran
// out, while the shard's record still names it primary: it must not lead
// the shard from an empty copy (its backups would rebuild themselves from
// it, and every acknowledged message would be gone). Nor may a backup
// whose disk died join while the record still counts it in sync: it could
// be promoted from its empty copy. One etcd and three real hourglassd
// processes, one shard (--shards=1).
//
// Without the guard, what happens depends on a race: the node's new key
// may appear before the controller acted on the old lease's end, and the
// record then still names it primary of a shard it holds nothing of. The
// five-node chaos run (HOURGLASS_CHAOS_SEED=2026112707, BENCHMARKS.md) lost
// acknowledged publishes that way; here the node must say that it waits.

#include <filesystem>
#include <string>

#include "absl/time/time.h"
#include "client/admin.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.pb.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/eventually.h"

namespace hourglass {
namespace {

using ::hourglass::client::Admin;

constexpr absl::Duration kPatience = testing::kClusterPatience;
using WipedNodeTest = testing::ClusterFixture;

TEST_F(WipedNodeTest, AWipedPrimaryBackAtOnceWaitsForABackupToBePromoted) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  for (const char* id : {"m1", "m2"}) {
    ASSERT_EQ(Publish("a", "orders", id, absl::Hours(1)).code,
              grpc::StatusCode::OK);
  }

  // a dies with its disk and restarts within its 2 s lease: the record
  // still names it primary at epoch 1. It says why it does not join yet.
  nodes_.at("a")->Kill();
  std::filesystem::remove_all(dir_.path() + "/a");
  StartNodes({"a"}, {"--shards=1"});
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "shard 0's record names this node its primary (epoch 1), but this "
      "node holds no copy of it",
      kPatience))
      << nodes_.at("a")->process().output();

  // Its lease ends; b or c is promoted at epoch 2 with both messages.
  const std::string primary = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(primary.empty());
  Admin admin(ChannelTo(primary));
  for (const char* id : {"m1", "m2"}) {
    hourglass::v1::GetMessageRequest get;
    get.set_topic("orders");
    get.set_id(id);
    EXPECT_TRUE(admin.GetMessage(get).ok()) << id;
  }
  // a then joins as a backup. The new primary's write-ahead log still holds
  // every entry since the shard was created (--replication_log_keep), so
  // a's empty copy catches up from it, entry 1 on, and rejoins the in-sync
  // set without a checkpoint.
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<v1::ClusterMap> map = MapOf(primary);
        return map.ok() && map->shards_size() == 1 &&
               map->shards(0).primary() == primary &&
               map->shards(0).isr_size() == 3;
      },
      kPatience));
  EXPECT_THAT(nodes_.at("a")->process().output(),
              ::testing::Not(::testing::HasSubstr("rebuilds its copy")));
}

TEST_F(WipedNodeTest, AWipedInSyncBackupWaitsToBeTakenOutOfTheInSyncSet) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  ASSERT_EQ(Publish("a", "orders", "m1", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  // b dies with its disk and comes back at once, still in the in-sync set.
  // Joined, it could be promoted from its empty copy if the primary died
  // with c away: it waits for the primary to take it out.
  nodes_.at("b")->Kill();
  std::filesystem::remove_all(dir_.path() + "/b");
  StartNodes({"b"}, {"--shards=1"});
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      "shard 0's in-sync set names this node (epoch 1, primary a), but this "
      "node holds no copy of it",
      kPatience))
      << nodes_.at("b")->process().output();
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "cluster: primary a removed b from the in-sync set of shard 0",
      kPatience))
      << nodes_.at("a")->process().output();

  // Then it joins, copies a's log from the start (a keeps it all, this
  // young) and is in sync again.
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      "cluster: node b is a backup of shard 0 (its copy ends at entry 0 of "
      "epoch 0)",
      kPatience))
      << nodes_.at("b")->process().output();
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "cluster: primary a added b to the in-sync set of shard 0", kPatience))
      << nodes_.at("a")->process().output();
  ASSERT_EQ(Publish("a", "orders", "m2", absl::Hours(1)).code,
            grpc::StatusCode::OK);
}

}  // namespace
}  // namespace hourglass
