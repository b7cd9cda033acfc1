// A cluster node's health over its shards (node/node_health.h): "" while it
// plays its part in every shard that names it, hourglass.v1.Primary while
// it is a primary and takes writes in every shard it is the primary of.

#include "node/node_health.h"

#include <vector>

#include "gtest/gtest.h"

namespace hourglass::node {
namespace {

const ShardHealth kServingPrimary{
    .named = true, .named_primary = true, .node = {true, true}};
const ShardHealth kPrimaryOpening{
    .named = true, .named_primary = true, .node = {false, false}};
const ShardHealth kInSyncBackup{.named = true, .node = {true, false}};
const ShardHealth kCatchingUp{.named = true, .node = {false, false}};
const ShardHealth kNotNamed{};

TEST(NodeHealthTest, ANodeNamedByNoShardIsNotReady) {
  EXPECT_EQ(OverShards({}), (NodeHealth{false, false}));
  EXPECT_EQ(OverShards({kNotNamed, kNotNamed}), (NodeHealth{false, false}));
}

TEST(NodeHealthTest, ReadyWhileItPlaysItsPartInEveryShardThatNamesIt) {
  EXPECT_EQ(OverShards({kServingPrimary, kInSyncBackup, kNotNamed}),
            (NodeHealth{true, true}));
  EXPECT_EQ(OverShards({kInSyncBackup, kInSyncBackup}),
            (NodeHealth{true, false}));
  // One backup catching up is enough to be not ready; the primaries still
  // take writes.
  EXPECT_EQ(OverShards({kServingPrimary, kCatchingUp}),
            (NodeHealth{false, true}));
}

TEST(NodeHealthTest, APrimaryThatDoesNotTakeWritesYetMakesTheNodeNoPrimary) {
  EXPECT_EQ(OverShards({kServingPrimary, kPrimaryOpening, kInSyncBackup}),
            (NodeHealth{false, false}));
}

}  // namespace
}  // namespace hourglass::node
