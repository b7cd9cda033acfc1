// The cluster's shard count (cluster/shard_count.h): fixed when the cluster
// is created, 16 unless the first node is given --shards, and taken from
// the cluster by a node given none; a node given another count exits,
// saying which to give. Against a real etcd, then end to end with real
// hourglassd processes.

#include "cluster/shard_count.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/etcd_test.h"
#include "tests/testing/eventually.h"
#include "tests/testing/peer_secret.h"
#include "tests/testing/subprocess.h"

namespace hourglass {
namespace {

using ::hourglass::cluster::AgreeOnShardCount;
using ::hourglass::cluster::EtcdClient;
using ::hourglass::cluster::EtcdOptions;
using ::hourglass::cluster::ShardCount;
using ::hourglass::cluster::ShardCountKey;
using ::hourglass::testing::Answer;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kPatience = testing::kClusterPatience;

// etcd's value at `key` ("" if absent or unreadable).
std::string Read(EtcdClient& client, const std::string& key) {
  absl::StatusOr<cluster::GetResult> read = client.Get(key);
  if (!read.ok() || !read->kv.has_value()) return "";
  return read->kv->value;
}

using AgreeOnShardCountTest = testing::EtcdTest;

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

// End to end: real hourglassd processes (HOURGLASSD_PATH).
class ShardCountTest : public testing::ClusterFixture {
 protected:
  // The cluster's count as etcd holds it ("" if none).
  std::string CountInEtcd() {
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Create(EtcdOptions{{etcd_->endpoint()}});
    if (!client.ok()) return client.status().ToString();
    return Read(**client, ShardCountKey("hourglass"));
  }

  // Each shard's primary, once every node of `ids` sees `count` shards,
  // each with a primary among them that takes a publish to
  // `topics[shard]` and every node of `ids` in its in-sync set; empty if
  // not within the patience.
  std::vector<std::string> AwaitShards(const std::vector<std::string>& ids,
                                       int count,
                                       const std::vector<std::string>& topics) {
    std::vector<std::string> primaries;
    int tries = 0;
    const bool settled = testing::Eventually(
        [&] {
          primaries.assign(count, "");
          for (const std::string& id : ids) {
            absl::StatusOr<v1::ClusterMap> map = MapOf(id);
            if (!map.ok() || map->shards_size() != count) return false;
            for (const v1::ShardInfo& shard : map->shards()) {
              std::string& primary = primaries[shard.shard()];
              if (!primary.empty() && primary != shard.primary()) return false;
              primary = shard.primary();
              for (const std::string& member : ids) {
                if (std::find(shard.isr().begin(), shard.isr().end(), member) ==
                    shard.isr().end()) {
                  return false;
                }
              }
            }
          }
          ++tries;
          for (int n = 0; n < count; ++n) {
            if (!nodes_.contains(primaries[n]) ||
                Publish(primaries[n], topics[n],
                        absl::StrCat("ready-", tries, "-", n), absl::Hours(1))
                        .code != grpc::StatusCode::OK) {
              return false;
            }
          }
          return true;
        },
        kPatience);
    if (!settled) return {};
    return primaries;
  }
};

// An upgraded node of a cluster of one shard, or a node added to a
// cluster, needs no --shards: it takes the cluster's count, builds its
// shards by it and routes by it.
TEST_F(ShardCountTest, ANodeGivenNoShardCountTakesTheClustersAndServesWithIt) {
  StartNodes({"a"}, {"--shards=3", "--replication_factor=2", "--min_insync=1"});
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "hourglassd created cluster hourglass with 3 shards (--shards)",
      kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_EQ(CountInEtcd(), "3");

  StartNodes({"b"}, {"--replication_factor=2", "--min_insync=1"});
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      "hourglassd takes cluster hourglass's shard count, 3, fixed when it "
      "was created",
      kPatience))
      << nodes_.at("b")->process().output();
  const std::vector<std::string> topics = testing::TopicPerShard(3);
  const std::vector<std::string> primary = AwaitShards({"a", "b"}, 3, topics);
  ASSERT_EQ(primary.size(), 3u) << "the shards did not settle";
  absl::StatusOr<v1::ClusterMap> map = MapOf("b");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->shard_count(), 3u);
  EXPECT_EQ(CountInEtcd(), "3");

  // b routes each topic to its shard of three: it takes the publishes of
  // the shards it leads and names the primary of the others.
  for (int n = 0; n < 3; ++n) {
    const Answer answer =
        Publish("b", topics[n], absl::StrCat("via-b-", n), absl::Hours(1));
    if (primary[n] == "b") {
      EXPECT_EQ(answer.code, grpc::StatusCode::OK) << n << answer.message;
      continue;
    }
    EXPECT_EQ(answer.code, grpc::StatusCode::UNAVAILABLE) << n;
    EXPECT_EQ(answer.primary, nodes_.at("a")->address()) << n;
    EXPECT_THAT(answer.message,
                HasSubstr(absl::StrCat("node b is not the primary of shard ", n,
                                       ": its primary is a")));
  }
  const Answer spanning =
      PublishBatch("b", {topics[0], topics[2]}, "x", absl::Hours(1));
  EXPECT_EQ(spanning.code, grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(spanning.message,
              HasSubstr(absl::StrCat("fall in shards 0 (topic \"", topics[0],
                                     "\") and 2 (topic \"", topics[2],
                                     "\") of this cluster's 3")));
}

// The first node given no --shards creates the cluster with sixteen.
TEST_F(ShardCountTest, TheFirstNodeGivenNoShardCountCreatesSixteen) {
  StartNodes({"a"}, {"--replication_factor=1", "--min_insync=1"});
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "hourglassd created cluster hourglass with 16 shards (the default; "
      "--shards gives another count to a new cluster)",
      kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_EQ(CountInEtcd(), "16");
  const std::vector<std::string> topics = testing::TopicPerShard(16);
  const std::vector<std::string> primary = AwaitShards({"a"}, 16, topics);
  ASSERT_EQ(primary.size(), 16u) << "the shards did not settle";
  absl::StatusOr<v1::ClusterMap> map = MapOf("a");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->shard_count(), 16u);
}

// A count given that is not the cluster's (here an old --shards=1 against
// a cluster created with the default): the node exits before it opens a
// shard or listens, saying which count to give.
TEST_F(ShardCountTest, ANodeGivenAnotherCountExitsSayingWhichToGive) {
  StartNodes({"a"}, {"--replication_factor=1", "--min_insync=1"});
  absl::StatusOr<std::unique_ptr<testing::Subprocess>> other =
      testing::Subprocess::Start(
          {HOURGLASSD_PATH, "--listen=127.0.0.1:0",
           "--metrics_listen=127.0.0.1:0", "--data_dir=" + dir_.path() + "/x",
           "--etcd=" + etcd_->endpoint(), "--node_id=x", "--shards=1",
           testing::PeerSecretFlag(dir_.path())});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ((*other)->Wait(kPatience), 1) << (*other)->output();
  EXPECT_THAT((*other)->output(),
              HasSubstr("hourglassd: cluster hourglass has 16 shards, fixed "
                        "when it was created; this node was started with "
                        "--shards=1: give it --shards=16, or no --shards to "
                        "take the cluster's"));
  EXPECT_THAT((*other)->output(), Not(HasSubstr("opened the stores")));
  EXPECT_THAT((*other)->output(), Not(HasSubstr("listening on")));
  EXPECT_EQ(CountInEtcd(), "16");
}

}  // namespace
}  // namespace hourglass
