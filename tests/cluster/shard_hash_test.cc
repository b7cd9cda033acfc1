// The topic-to-shard rule (cluster/shard_hash.h) against fixed vectors,
// which other clients (the Python client's hourglass.shard_of) share.

#include "cluster/shard_hash.h"

#include "gtest/gtest.h"

namespace hourglass::cluster {
namespace {

TEST(ShardHashTest, IsFnv1a64OfTheTopicsBytes) {
  // FNV-1a 64's published values.
  EXPECT_EQ(TopicHash(""), 0xcbf29ce484222325u);
  EXPECT_EQ(TopicHash("a"), 0xaf63dc4c8601ec8cu);
  EXPECT_EQ(TopicHash("foobar"), 0x85944171f73967e8u);
  EXPECT_EQ(TopicHash("orders"), 0x00125d9250be8b4cu);
  EXPECT_EQ(TopicHash("payments"), 0xe17ac5686623db26u);
}

TEST(ShardHashTest, ATopicAndItsDeadLetterTopicShareAShard) {
  EXPECT_EQ(TopicHash("orders.dlq"), TopicHash("orders"));
  EXPECT_EQ(ShardOf("orders.dlq", 16), 12);
  EXPECT_EQ(ShardOf("orders", 16), 12);
  // Only one suffix comes off: "a.dlq.dlq" hashes the bytes "a.dlq".
  EXPECT_EQ(TopicHash("a.dlq"), TopicHash("a"));
  EXPECT_EQ(TopicHash("a.dlq.dlq"), 0xf53ff7b50977075du);
}

TEST(ShardHashTest, ShardsAreTheHashModuloTheCount) {
  EXPECT_EQ(ShardOf("payments", 16), 6);
  EXPECT_EQ(ShardOf("payments", 1), 0);
  EXPECT_EQ(ShardOf("", 16), 5);
  EXPECT_EQ(ShardOf("foobar", 16), 8);
  EXPECT_EQ(ShardOf("a", 1024), static_cast<int>(0xaf63dc4c8601ec8cu % 1024));
}

}  // namespace
}  // namespace hourglass::cluster
