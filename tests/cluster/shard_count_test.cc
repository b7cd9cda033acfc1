// The cluster's shard count (cluster/shard_count.h): fixed when the cluster
// is created, 16 unless the first node is given --shards, and taken from
// the cluster by a node given none; another count given is refused, saying
// which to give. Against a real etcd.

#include "cluster/shard_count.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd_server.h"

namespace hourglass {
namespace {

using ::hourglass::cluster::AgreeOnShardCount;
using ::hourglass::cluster::EtcdClient;
using ::hourglass::cluster::EtcdOptions;
using ::hourglass::cluster::ShardCount;
using ::hourglass::cluster::ShardCountKey;
using ::hourglass::testing::EtcdServer;
using ::testing::HasSubstr;

// etcd's value at `key` ("" if absent or unreadable).
std::string Read(EtcdClient& client, const std::string& key) {
  absl::StatusOr<cluster::GetResult> read = client.Get(key);
  if (!read.ok() || !read->kv.has_value()) return "";
  return read->kv->value;
}

class AgreeOnShardCountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EtcdServer>> server = EtcdServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Create(EtcdOptions{{server_->endpoint()}});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<EtcdServer> server_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(AgreeOnShardCountTest, ANewClusterGetsTheCountGivenOrSixteen) {
  absl::StatusOr<ShardCount> given = AgreeOnShardCount(*client_, "given", 3);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->count, 3);
  EXPECT_TRUE(given->created);
  EXPECT_EQ(Read(*client_, ShardCountKey("given")), "3");

  absl::StatusOr<ShardCount> defaulted =
      AgreeOnShardCount(*client_, "defaulted", std::nullopt);
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_EQ(defaulted->count, 16);
  EXPECT_EQ(cluster::kDefaultShardCount, 16);
  EXPECT_TRUE(defaulted->created);
  EXPECT_EQ(Read(*client_, ShardCountKey("defaulted")), "16");
}

TEST_F(AgreeOnShardCountTest, ALaterNodeTakesTheClustersCountOrGivesTheSame) {
  ASSERT_TRUE(AgreeOnShardCount(*client_, "c", 1).ok());
  // Given none (an upgraded node of a cluster of one shard): the cluster's.
  absl::StatusOr<ShardCount> taken =
      AgreeOnShardCount(*client_, "c", std::nullopt);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->count, 1);
  EXPECT_FALSE(taken->created);
  absl::StatusOr<ShardCount> same = AgreeOnShardCount(*client_, "c", 1);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->count, 1);
  EXPECT_FALSE(same->created);
  EXPECT_EQ(Read(*client_, ShardCountKey("c")), "1");
}

TEST_F(AgreeOnShardCountTest, AnotherCountGivenIsRefusedSayingWhichToGive) {
  ASSERT_TRUE(AgreeOnShardCount(*client_, "c", std::nullopt).ok());
  absl::StatusOr<ShardCount> refused = AgreeOnShardCount(*client_, "c", 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "cluster c has 16 shards, fixed when it was created; this node "
            "was started with --shards=1: give it --shards=16, or no "
            "--shards to take the cluster's");
  EXPECT_EQ(Read(*client_, ShardCountKey("c")), "16");
}

TEST_F(AgreeOnShardCountTest, BadInputAndABadKeyAreRefused) {
  absl::StatusOr<ShardCount> zero = AgreeOnShardCount(*client_, "c", 0);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.status().message(), "--shards must be at least 1, not 0");
  EXPECT_EQ(Read(*client_, ShardCountKey("c")), "");
  absl::StatusOr<ShardCount> name =
      AgreeOnShardCount(*client_, "a/b", std::nullopt);
  EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(name.status().message(), HasSubstr("--cluster"));

  ASSERT_TRUE(client_->Put(ShardCountKey("c"), "many").ok());
  absl::StatusOr<ShardCount> garbled =
      AgreeOnShardCount(*client_, "c", std::nullopt);
  EXPECT_EQ(garbled.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(garbled.status().message(),
            "/hourglass/c/shard_count holds \"many\", not a shard count");
}

TEST_F(AgreeOnShardCountTest, EtcdsSilenceIsUnavailable) {
  server_->Stop();
  absl::StatusOr<ShardCount> silent =
      AgreeOnShardCount(*client_, "c", std::nullopt);
  EXPECT_EQ(silent.status().code(), absl::StatusCode::kUnavailable)
      << silent.status();
}

}  // namespace
}  // namespace hourglass
