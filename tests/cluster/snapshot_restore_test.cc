// A snapshot of a cluster of many shards, end to end: three real
// hourglassd processes hosting four shards write a snapshot of every shard
// on the node asked (each shard from its primary); a node started with
// --restore_from creates a new cluster from it, as every shard's primary;
// two more nodes join as backups, and the new cluster holds every message
// acknowledged before the snapshot, none after, and takes publishes.

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "client/consumer.h"
#include "client/publisher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/eventually.h"
#include "tests/testing/peer_secret.h"
#include "tests/testing/subprocess.h"

namespace hourglass {
namespace {

using ::hourglass::client::Admin;
using ::hourglass::client::Channel;
using ::hourglass::client::Consumer;
using ::hourglass::client::ConsumerOptions;
using ::hourglass::client::Delivery;
using ::hourglass::client::Message;
using ::hourglass::client::Publisher;
using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr int kShards = 4;
constexpr absl::Duration kPatience = testing::kClusterPatience;

class SnapshotRestoreTest : public testing::ClusterFixture {
 protected:
  // Publishes message `id` to `topic`, due after `delay`, once the
  // cluster takes it (its shards being created or caught up meanwhile).
  bool PublishOnce(Publisher& publisher, const std::string& topic,
                   const std::string& id, absl::Duration delay) {
    absl::Status last;
    const bool published = testing::Eventually(
        [&] {
          const auto receipt =
              publisher.Publish(Message{.topic = topic,
                                        .payload = "payload of " + id,
                                        .delay = delay,
                                        .id = id});
          last = receipt.status();
          return receipt.ok();
        },
        kPatience);
    EXPECT_TRUE(published) << id << ": " << last;
    return published;
  }

  // What GetMessage of `id` in `topic` answers, through `channel`, once
  // the topic's shard has a primary that serves (the controller may be
  // moving primaries; UNAVAILABLE if none serves within the patience).
  absl::StatusCode Find(std::shared_ptr<Channel> channel,
                        const std::string& topic, const std::string& id) {
    Admin admin(std::move(channel));
    v1::GetMessageRequest request;
    request.set_topic(topic);
    request.set_id(id);
    absl::StatusCode code = absl::StatusCode::kUnavailable;
    testing::Eventually(
        [&] {
          code = admin.GetMessage(request).status().code();
          return code != absl::StatusCode::kUnavailable;
        },
        kPatience);
    return code;
  }

  // Every shard of `node`'s map, as "epoch primary isr..." (the in-sync
  // set sorted), once each has as many in sync as `isr` names (empty if not
  // within the patience).
  std::vector<std::string> AwaitInSync(const std::string& node,
                                       const std::vector<std::string>& isr) {
    std::vector<std::string> shards;
    testing::Eventually(
        [&] {
          shards.clear();
          absl::StatusOr<v1::ClusterMap> map = MapOf(node);
          if (!map.ok() || map->shards_size() != kShards) return false;
          for (const v1::ShardInfo& shard : map->shards()) {
            if (shard.isr_size() != static_cast<int>(isr.size())) return false;
            std::string line =
                absl::StrCat(shard.epoch(), " ", shard.primary());
            std::vector<std::string> members(shard.isr().begin(),
                                             shard.isr().end());
            std::sort(members.begin(), members.end());
            for (const std::string& member : members) {
              absl::StrAppend(&line, " ", member);
            }
            shards.push_back(line);
          }
          return true;
        },
        kPatience);
    return shards;
  }

  // topics_[n] is a topic of shard n.
  const std::vector<std::string> topics_ = testing::TopicPerShard(kShards);
};

TEST_F(SnapshotRestoreTest, ASnapshotOfEveryShardRestoresAsANewCluster) {
  for (const std::string id : {"a", "b", "c"}) {
    StartNodes({id}, {"--shards=4"});
  }
  std::shared_ptr<Channel> old_cluster = ChannelToNodes({"a", "b", "c"});
  ASSERT_NE(old_cluster, nullptr);
  auto publisher = std::make_unique<Publisher>(old_cluster);
  // Two messages per shard, due in an hour: scheduled when the snapshot is
  // taken.
  for (int n = 0; n < kShards; ++n) {
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(PublishOnce(*publisher, topics_[n],
                              absl::StrCat("kept-", n, "-", i),
                              absl::Hours(1)));
    }
  }

  // Node b is the primary of some shards, not of others: it takes those
  // from their primaries.
  // It writes into its --snapshot_dir: snapshots under its data dir.
  const std::string snapshot = dir_.path() + "/b/snapshots/snap";
  v1::CreateSnapshotRequest request;
  request.set_dir("snap");
  absl::StatusOr<v1::Snapshot> written =
      Admin(ChannelToNodes({"b"})).CreateSnapshot(request);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->dir(), snapshot);
  EXPECT_EQ(written->shards(), uint32_t{kShards});
  EXPECT_EQ(written->store_id(), "");
  EXPECT_GT(written->files(), uint64_t{kShards});
  for (int n = 0; n < kShards; ++n) {
    EXPECT_TRUE(std::filesystem::exists(
        absl::StrCat(snapshot, "/shards/", n, "/CURRENT")))
        << "shard " << n;
  }
  EXPECT_TRUE(std::filesystem::exists(snapshot + "/CLUSTER_SNAPSHOT"));
  // Written after the snapshot: not in it.
  for (int n = 0; n < kShards; ++n) {
    ASSERT_TRUE(PublishOnce(*publisher, topics_[n], absl::StrCat("late-", n),
                            absl::Hours(1)));
  }

  // The new cluster: r restores. Each shard's record names r its primary,
  // alone, at the epoch after the one its copy was at (1, the old
  // cluster's first).
  StartNodes({"r"}, {"--cluster=restored", "--restore_from=" + snapshot});
  EXPECT_THAT(AwaitInSync("r", {"r"}),
              ElementsAre("2 r r", "2 r r", "2 r r", "2 r r"));
  // s and t join it as backups, copy the shards, and come in sync (the
  // controller may then move primaries to them, at later epochs).
  StartNodes({"s", "t"}, {"--cluster=restored", "--shards=4"});
  EXPECT_THAT(AwaitInSync("s", {"r", "s", "t"}),
              AllOf(SizeIs(kShards), Each(EndsWith(" r s t"))));

  std::shared_ptr<Channel> new_cluster = ChannelToNodes({"s", "t", "r"});
  ASSERT_NE(new_cluster, nullptr);
  for (int n = 0; n < kShards; ++n) {
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(Find(new_cluster, topics_[n], absl::StrCat("kept-", n, "-", i)),
                absl::StatusCode::kOk)
          << "shard " << n;
    }
    EXPECT_EQ(Find(new_cluster, topics_[n], absl::StrCat("late-", n)),
              absl::StatusCode::kNotFound)
        << "shard " << n;
  }

  // The new cluster takes publishes, and delivers them.
  auto new_publisher = std::make_unique<Publisher>(new_cluster);
  for (int n = 0; n < kShards; ++n) {
    ASSERT_TRUE(PublishOnce(*new_publisher, topics_[n], absl::StrCat("new-", n),
                            absl::ZeroDuration()));
    ConsumerOptions options;
    options.topic = topics_[n];
    options.group = "g";
    absl::StatusOr<std::unique_ptr<Consumer>> consumer =
        Consumer::Subscribe(new_cluster, options, nullptr);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    std::vector<std::string> got;
    const absl::Time deadline = absl::Now() + kPatience;
    while (got.empty() && absl::Now() < deadline) {
      for (const Delivery& d : (*consumer)->Receive(1, deadline)) {
        got.push_back(d.id);
        EXPECT_TRUE((*consumer)->Ack(d.id).ok());
      }
    }
    EXPECT_THAT(got, ElementsAre(absl::StrCat("new-", n)));
  }

  // The CLI says what it wrote.
  const testing::RunResult cli =
      testing::Run({HOURGLASS_PATH, "--addr=" + nodes_.at("t")->address(),
                    "snapshot", "--out=snap2"},
                   kPatience);
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_THAT(cli.output,
              HasSubstr(absl::StrCat("snapshot of the cluster's 4 shards "
                                     "(format 4) in ",
                                     dir_.path(), "/t/snapshots/snap2: ")));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() +
                                      "/t/snapshots/snap2/CLUSTER_SNAPSHOT"));

  // A restore creates a new cluster only.
  absl::StatusOr<std::unique_ptr<testing::Daemon>> again =
      testing::Daemon::Start(
          HOURGLASSD_PATH, dir_.path() + "/again",
          {"--etcd=" + etcd_->endpoint(), "--node_id=again",
           "--cluster=restored", "--restore_from=" + snapshot,
           testing::PeerSecretFlag(dir_.path())});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(again.status().message(),
              HasSubstr("cluster restored exists in etcd (with 4 shards): "
                        "--restore_from creates a new cluster"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/again/shards"));
}

}  // namespace
}  // namespace hourglass
