// Cluster mode with many shards, end to end: one etcd and three real
// hourglassd processes on loopback ports hosting four shards, each with
// the primary its record names; calls are routed by topic, refused across
// shards, and redirected per shard; a node's death fails over its shards
// and no others.

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "client/consumer.h"
#include "client/internal/channel_state.h"
#include "client/publisher.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/eventually.h"
#include "tests/testing/peer_secret.h"
#include "tests/testing/subprocess.h"

namespace hourglass {
namespace {

using ::hourglass::client::Channel;
using ::hourglass::client::Consumer;
using ::hourglass::client::ConsumerOptions;
using ::hourglass::client::Delivery;
using ::hourglass::client::Message;
using ::hourglass::client::Publisher;
using ::hourglass::client::PublisherOptions;
using ::hourglass::testing::Answer;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kShards = 4;
constexpr absl::Duration kPatience = testing::kClusterPatience;

class MultiShardTest : public testing::ClusterFixture {
 protected:
  // Admin.GetStats of `topic` at `node`: anything but UNAVAILABLE means
  // the node serves the topic's shard (NOT_FOUND: no such topic yet).
  Answer StatsOf(const std::string& node, const std::string& topic) {
    auto stub = v1::Admin::NewStub(nodes_.at(node)->Channel());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::GetStatsRequest request;
    request.set_topic(topic);
    v1::GetStatsResponse response;
    const grpc::Status status = stub->GetStats(&context, request, &response);
    return {status.error_code(), status.error_message()};
  }

  // Each shard's primary, once every node of `ids` sees all kShards shards
  // with that primary and epoch `epoch[shard]` (1 if absent), every node of
  // `ids` in each in-sync set, and each primary serves its shard; empty if
  // not within the patience. `primaries` names the primaries wanted (any
  // if empty).
  std::vector<std::string> AwaitShards(
      const std::vector<std::string>& ids, std::map<int, int64_t> epochs = {},
      std::map<int, std::string> primaries = {}) {
    std::vector<std::string> seen;
    const bool settled = testing::Eventually(
        [&] {
          seen.assign(kShards, "");
          for (const std::string& id : ids) {
            absl::StatusOr<v1::ClusterMap> map = MapOf(id);
            if (!map.ok() || map->shards_size() != kShards) return false;
            for (const v1::ShardInfo& shard : map->shards()) {
              const int n = static_cast<int>(shard.shard());
              const int64_t epoch =
                  epochs.contains(n) ? epochs.at(n) : int64_t{1};
              const std::set<std::string> isr(shard.isr().begin(),
                                              shard.isr().end());
              if (shard.epoch() != epoch ||
                  (!seen[n].empty() && seen[n] != shard.primary()) ||
                  (primaries.contains(n) &&
                   primaries.at(n) != shard.primary())) {
                return false;
              }
              for (const std::string& member : ids) {
                if (!isr.contains(member)) return false;
              }
              seen[n] = shard.primary();
            }
          }
          for (int n = 0; n < kShards; ++n) {
            if (!nodes_.contains(seen[n]) ||
                StatsOf(seen[n], topics_[n]).code ==
                    grpc::StatusCode::UNAVAILABLE) {
              return false;
            }
          }
          return true;
        },
        kPatience);
    if (!settled) return {};
    return seen;
  }

  // The ids of what one consumer of group "g" on each shard's topic gets,
  // within the patience, until it got `count` deliveries (all acked).
  std::multiset<std::string> ConsumeEveryShard(std::shared_ptr<Channel> channel,
                                               size_t count) {
    std::multiset<std::string> got;
    for (int n = 0; n < kShards; ++n) {
      ConsumerOptions options;
      options.topic = topics_[n];
      options.group = "g";
      options.rpc = ConsumerOptions::Rpc::kSubscribe;
      absl::StatusOr<std::unique_ptr<Consumer>> consumer =
          Consumer::Subscribe(channel, options, nullptr);
      EXPECT_TRUE(consumer.ok()) << topics_[n] << ": " << consumer.status();
      if (!consumer.ok()) continue;
      const absl::Time deadline = absl::Now() + kPatience;
      size_t of_topic = 0;
      while (of_topic < count && absl::Now() < deadline) {
        for (const Delivery& d : (*consumer)->Receive(8, deadline)) {
          EXPECT_EQ(d.topic, topics_[n]);
          got.insert(d.id);
          ++of_topic;
          EXPECT_TRUE((*consumer)->Ack(d.id).ok());
        }
      }
    }
    return got;
  }

  // What `node`'s grpc.health.v1 says of `service`.
  std::string Health(const std::string& node, const std::string& service) {
    auto stub = grpc::health::v1::Health::NewStub(nodes_.at(node)->Channel());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    if (!status.ok()) return absl::StrCat("error ", status.error_code());
    return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
        response.status());
  }

  // topics_[n] is a topic of shard n.
  const std::vector<std::string> topics_ = testing::TopicPerShard(kShards);
};

TEST_F(MultiShardTest, EachShardIsServedByItsPrimaryAndTheOthersRedirectToIt) {
  for (const std::string id : {"a", "b", "c"}) {
    StartNodes({id}, {"--shards=4", "--zone=zone-" + id});
  }
  const std::vector<std::string> primary = AwaitShards({"a", "b", "c"});
  ASSERT_EQ(primary.size(), size_t{kShards}) << "the shards did not settle";
  // The map names each node's zone (--zone).
  absl::StatusOr<v1::ClusterMap> map = MapOf("b");
  ASSERT_TRUE(map.ok()) << map.status();
  for (const v1::ClusterNode& node : map->nodes()) {
    EXPECT_EQ(node.zone(), "zone-" + node.id());
  }
  // The controller rotates primaries with the shard number: each node is
  // the primary of one shard or two.
  EXPECT_EQ(std::set<std::string>(primary.begin(), primary.end()).size(), 3u);
  // `hourglass cluster` lists each node's shards by role, in one row.
  const testing::RunResult shown = testing::Run(
      {HOURGLASS_PATH, "--addr=" + nodes_.at("b")->address(), "cluster"},
      kPatience);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  for (const std::string id : {"a", "b", "c"}) {
    std::vector<int> leads, backs;
    for (int n = 0; n < kShards; ++n)
      (primary[n] == id ? leads : backs).push_back(n);
    const std::string roles =
        absl::StrCat("primary of ", absl::StrJoin(leads, ","), ", backup of ",
                     absl::StrJoin(backs, ","), "\n");
    EXPECT_THAT(shown.output, ::testing::ContainsRegex(absl::StrCat(
                                  "\n", id, " +", nodes_.at(id)->address(),
                                  " +zone-", id, " +(controller, )?", roles)))
        << id;
  }

  for (int n = 0; n < kShards; ++n) {
    const std::string id = absl::StrCat("m", n);
    const Answer served = Publish(primary[n], topics_[n], id, absl::Hours(1));
    EXPECT_EQ(served.code, grpc::StatusCode::OK) << n << ": " << served.message;
    EXPECT_EQ(served.primary, "");
    for (const std::string& other : {"a", "b", "c"}) {
      if (other == primary[n]) continue;
      const Answer redirected = Publish(other, topics_[n], id, absl::Hours(1));
      EXPECT_EQ(redirected.code, grpc::StatusCode::UNAVAILABLE) << n << other;
      EXPECT_EQ(redirected.primary, nodes_.at(primary[n])->address())
          << n << other;
      EXPECT_EQ(redirected.epoch, "1") << n << other;
      EXPECT_THAT(redirected.message,
                  HasSubstr(absl::StrCat(
                      "node ", other, " is not the primary of shard ", n,
                      ": its primary is ", primary[n], " at ",
                      nodes_.at(primary[n])->address())));
    }
  }

  // A request spanning shards is refused by any node, naming them.
  for (const std::string& node : {"a", "b", "c"}) {
    const Answer spanning =
        PublishBatch(node, {topics_[3], topics_[1]}, "x", absl::Hours(1));
    EXPECT_EQ(spanning.code, grpc::StatusCode::FAILED_PRECONDITION) << node;
    EXPECT_THAT(spanning.message,
                HasSubstr(absl::StrCat("fall in shards 1 (topic \"", topics_[1],
                                       "\") and 3 (topic \"", topics_[3],
                                       "\") of this cluster's 4")))
        << node;
    EXPECT_EQ(spanning.primary, "") << node;
  }

  // Stats of every topic, at any node: gathered from every shard's
  // primary, each topic with its own counts, in name order.
  std::vector<std::string> all(topics_.begin(), topics_.end());
  std::sort(all.begin(), all.end());
  for (const std::string& node : {"a", "b", "c"}) {
    auto stub = v1::Admin::NewStub(nodes_.at(node)->Channel());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
    v1::GetStatsResponse stats;
    const grpc::Status status =
        stub->GetStats(&context, v1::GetStatsRequest(), &stats);
    ASSERT_TRUE(status.ok()) << node << ": " << status.error_message();
    std::vector<std::string> listed;
    for (const auto& t : stats.topics()) {
      listed.push_back(t.topic());
      EXPECT_EQ(t.scheduled(), 1u) << node << " " << t.topic();
    }
    EXPECT_EQ(listed, all) << node;
    grpc::ClientContext topics_context;
    topics_context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
    v1::ListTopicsResponse topics;
    ASSERT_TRUE(
        stub->ListTopics(&topics_context, v1::ListTopicsRequest(), &topics)
            .ok());
    EXPECT_EQ(topics.topics_size(), kShards) << node;
  }

  // Each node is the primary of a shard, and in every in-sync set: its
  // health says both (node/README.md, "Health").
  for (const std::string& node : {"a", "b", "c"}) {
    EXPECT_TRUE(testing::Eventually(
        [&] {
          return Health(node, "") == "SERVING" &&
                 Health(node, "hourglass.v1.Primary") == "SERVING";
        },
        kPatience))
        << node;
  }

  // Each node's metrics say its role in every shard, each family once
  // (a node that is the primary of two shards runs two engines); the
  // engines' metrics carry the shard, and only the primary shows them.
  for (const std::string& node : {"a", "b", "c"}) {
    const std::string metrics = nodes_.at(node)->ScrapeMetrics();
    std::set<std::string> families;
    for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
      if (!absl::StartsWith(line, "# TYPE ")) continue;
      EXPECT_TRUE(families.insert(std::string(line)).second)
          << node << ": " << line;
    }
    for (int n = 0; n < kShards; ++n) {
      EXPECT_THAT(metrics,
                  HasSubstr(absl::StrCat(
                      "hourglass_cluster_role{shard=\"", n, "\",role=\"",
                      primary[n] == node ? "primary" : "backup", "\"} 1\n")))
          << node << " " << n;
      const std::string serving =
          absl::StrCat("\nhourglass_serving{shard=\"", n, "\"} 1\n");
      const std::string scheduled =
          absl::StrCat("\nhourglass_scheduled{topic=\"", topics_[n],
                       "\",shard=\"", n, "\"} 1\n");
      if (primary[n] == node) {
        EXPECT_THAT(metrics, HasSubstr(serving)) << node << " " << n;
        EXPECT_THAT(metrics, HasSubstr(scheduled)) << node << " " << n;
      } else {
        EXPECT_THAT(metrics, Not(HasSubstr(serving))) << node << " " << n;
        EXPECT_THAT(metrics, Not(HasSubstr(scheduled))) << node << " " << n;
      }
    }
    EXPECT_THAT(metrics, Not(HasSubstr("\nhourglass_serving "))) << node;
  }
}

// The client library, given one node, learns the shard count from the
// first refusal that gives it (hourglass-shards), splits a batch by shard
// and sends each part, and every later call, to the primary of its topic's
// shard.
TEST_F(MultiShardTest, TheClientSplitsABatchByShardAndRoutesEachCallByTopic) {
  StartNodes({"a", "b", "c"}, {"--shards=4"});
  const std::vector<std::string> primary = AwaitShards({"a", "b", "c"});
  ASSERT_EQ(primary.size(), size_t{kShards});
  // Each over a Publish call and over the stream, on a fresh channel that
  // knows nothing of shards: a batch of every shard, its receipts in the
  // batch's order.
  for (const auto rpc : {PublisherOptions::BatchRpc::kPublish,
                         PublisherOptions::BatchRpc::kPublishStream}) {
    const std::string name =
        rpc == PublisherOptions::BatchRpc::kPublish ? "call" : "stream";
    std::shared_ptr<Channel> channel = ChannelToNodes({"a"});
    Publisher publisher(channel, {.batch_rpc = rpc});
    std::vector<Message> batch;
    std::vector<std::string> ids;
    for (int k = 0; k < 8; ++k) {
      Message m;
      m.topic = topics_[(3 * k) % kShards];
      m.id = absl::StrCat(name, "-", k);
      m.payload = "x";
      m.delay = absl::Hours(1);
      ids.push_back(m.id);
      batch.push_back(std::move(m));
    }
    absl::StatusOr<std::vector<client::Receipt>> receipts =
        publisher.PublishBatch(batch);
    ASSERT_TRUE(receipts.ok()) << name << ": " << receipts.status();
    std::vector<std::string> answered;
    for (const client::Receipt& r : *receipts) answered.push_back(r.id);
    EXPECT_EQ(answered, ids) << name;
    // Every message is where its topic's shard is: the admin calls about
    // it, and the cancel, reach that shard's primary.
    client::Admin admin(channel);
    for (int k = 0; k < 8; ++k) {
      v1::GetMessageRequest get;
      get.set_topic(batch[k].topic);
      get.set_id(ids[k]);
      absl::StatusOr<v1::MessageInfo> info = admin.GetMessage(get);
      ASSERT_TRUE(info.ok()) << ids[k] << ": " << info.status();
      EXPECT_EQ(info->id(), ids[k]);
      EXPECT_EQ(info->topic(), batch[k].topic);
      EXPECT_TRUE(publisher.Cancel(batch[k].topic, ids[k]).ok()) << ids[k];
      EXPECT_EQ(admin.GetMessage(get).status().code(),
                absl::StatusCode::kNotFound)
          << ids[k];
    }
  }

  std::shared_ptr<Channel> channel = ChannelToNodes({"a", "b", "c"});
  Publisher publisher(channel);
  // One message at a time, each on the stream to its shard's primary.
  std::multiset<std::string> expected;
  for (int round = 0; round < 2; ++round) {
    for (int n = 0; n < kShards; ++n) {
      Message m;
      m.topic = topics_[n];
      m.id = absl::StrCat("r", round, "-", n);
      m.payload = "x";
      absl::StatusOr<client::Receipt> receipt = publisher.Publish(m);
      ASSERT_TRUE(receipt.ok()) << m.topic << ": " << receipt.status();
      EXPECT_EQ(receipt->id, m.id);
      expected.insert(m.id);
    }
  }
  // Once the channel knows the shards, a part that fails fails alone: the
  // error says which messages were stored, numbered as in the batch.
  std::vector<Message> batch(3);
  for (int k = 0; k < 3; ++k) {
    batch[k].topic = topics_[k];
    batch[k].id = absl::StrCat("part-", k);
    batch[k].payload = k == 1 ? std::string((1 << 20) + 1, 'x') : "x";
    batch[k].delay = absl::Hours(1);
  }
  absl::StatusOr<std::vector<client::Receipt>> failed =
      publisher.PublishBatch(batch);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(),
            "shard 1 (message 1) failed: message 1: payload is 1048577 bytes; "
            "the limit is 1048576 (--max_payload_bytes); the batch spans "
            "shards 0, 1, 2 and is all-or-nothing within each shard only: "
            "messages 0, 2 were stored");
  client::Admin admin(channel);
  for (int k = 0; k < 3; ++k) {
    v1::GetMessageRequest get;
    get.set_topic(batch[k].topic);
    get.set_id(batch[k].id);
    EXPECT_EQ(admin.GetMessage(get).status().code(),
              k == 1 ? absl::StatusCode::kNotFound : absl::StatusCode::kOk)
        << k;
  }

  // The channel now sends each shard's calls to its primary: no redirects.
  for (int n = 0; n < kShards; ++n) {
    EXPECT_EQ(
        client::internal::ChannelAccess::endpoint(*channel, topics_[n]).address,
        nodes_.at(primary[n])->address())
        << n;
  }
  EXPECT_EQ(ConsumeEveryShard(channel, 2), expected);
}

TEST_F(MultiShardTest, KillingANodeFailsOverExactlyItsShards) {
  StartNodes({"a", "b", "c"}, {"--shards=4"});
  const std::vector<std::string> before = AwaitShards({"a", "b", "c"});
  ASSERT_EQ(before.size(), size_t{kShards});
  std::multiset<std::string> expected;
  for (int n = 0; n < kShards; ++n) {
    const std::string id = absl::StrCat("kept-", n);
    ASSERT_EQ(Publish(before[n], topics_[n], id, absl::Seconds(2)).code,
              grpc::StatusCode::OK);
    expected.insert(id);
  }

  const std::string victim = before[0];
  std::vector<std::string> survivors;
  for (const std::string& id : {"a", "b", "c"}) {
    if (id != victim) survivors.push_back(id);
  }
  nodes_.at(victim)->Kill();
  // The victim's shards move to a survivor at epoch 2; the others stay at
  // epoch 1 (unless the controller then evens the leads out between the
  // survivors: a leader transfer, at the next epoch).
  std::vector<std::string> after(kShards);
  v1::ClusterMap map;
  ASSERT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<v1::ClusterMap> read = MapOf(survivors[0]);
        if (!read.ok() || read->shards_size() != kShards) return false;
        map = *std::move(read);
        for (const v1::ShardInfo& shard : map.shards()) {
          const int n = static_cast<int>(shard.shard());
          const std::set<std::string> isr(shard.isr().begin(),
                                          shard.isr().end());
          const bool moved = before[n] == victim;
          if (shard.primary() == victim || !shard.transfer_to().empty() ||
              shard.epoch() < (moved ? 2 : 1) ||
              (shard.epoch() == 1 && shard.primary() != before[n]) ||
              !isr.contains(survivors[0]) || !isr.contains(survivors[1]) ||
              StatsOf(shard.primary(), topics_[n]).code !=
                  grpc::StatusCode::OK) {
            return false;
          }
          after[n] = shard.primary();
        }
        return true;
      },
      kPatience))
      << "the shards did not settle: " << map.DebugString();

  // Every acknowledged message is delivered, from every shard.
  EXPECT_EQ(ConsumeEveryShard(ChannelToNodes(survivors), 1), expected);

  // The victim comes back on its data: it opens its copies of the four
  // shards at start, catches up with each primary, and rejoins every
  // in-sync set; the controller then evens the leads out again (leader
  // transfers), so that each node leads one or two of the four shards.
  StartNodes({victim}, {"--shards=4"});
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<v1::ClusterMap> read = MapOf(victim);
        if (!read.ok() || read->shards_size() != kShards) return false;
        map = *std::move(read);
        std::map<std::string, int> leads = {{"a", 0}, {"b", 0}, {"c", 0}};
        for (const v1::ShardInfo& shard : map.shards()) {
          if (shard.isr_size() != 3 || !shard.transfer_to().empty()) {
            return false;
          }
          ++leads[shard.primary()];
        }
        for (const auto& [id, count] : leads) {
          if (count < 1 || count > 2) return false;
        }
        return true;
      },
      kPatience))
      << map.DebugString() << nodes_.at(victim)->process().output();
}

// A node that holds no copy (drained before it started, so that the
// controller gives it none) sends the calls of each shard to that shard's
// primary, and is not ready. Then `hourglass cluster move` (refused while
// it drains) makes it the primary of shard 0: it joins the replicas,
// catches up, an old backup leaves and the lead is handed over; every
// acknowledged message of the shard is delivered from it.
TEST_F(MultiShardTest, ANodeHoldingNoCopySendsEachShardsCallsToItsPrimary) {
  StartNodes({"a", "b", "c"}, {"--shards=4"});
  const std::vector<std::string> primary = AwaitShards({"a", "b", "c"});
  ASSERT_EQ(primary.size(), size_t{kShards});
  ASSERT_TRUE(client::Admin(ChannelToNodes({"a"})).DrainNode("d", false).ok());
  StartNodes({"d"}, {"--shards=4"});
  ASSERT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<v1::ClusterMap> map = MapOf("d");
        return map.ok() && map->nodes_size() == 4 &&
               map->shards_size() == kShards;
      },
      kPatience));
  for (int n = 0; n < kShards; ++n) {
    Answer redirected;
    // d closes the shards' gates with their primaries once it has the view.
    EXPECT_TRUE(testing::Eventually(
        [&] {
          redirected = Publish("d", topics_[n], "x", absl::Hours(1));
          return !redirected.primary.empty();
        },
        kPatience))
        << n << ": " << redirected.message;
    EXPECT_EQ(redirected.code, grpc::StatusCode::UNAVAILABLE) << n;
    EXPECT_EQ(redirected.primary, nodes_.at(primary[n])->address()) << n;
    EXPECT_EQ(redirected.epoch, "1") << n;
    EXPECT_THAT(redirected.message,
                HasSubstr(absl::StrCat("node d is not the primary of shard ", n,
                                       ": its primary is ", primary[n])));
  }
  EXPECT_EQ(Health("d", ""), "NOT_SERVING");
  EXPECT_EQ(Health("d", "hourglass.v1.Primary"), "NOT_SERVING");
  // A client given d alone gets to every shard.
  std::shared_ptr<Channel> channel = ChannelToNodes({"d"});
  Publisher publisher(channel);
  for (int n = 0; n < kShards; ++n) {
    Message m;
    m.topic = topics_[n];
    m.id = absl::StrCat("via-d-", n);
    m.payload = "x";
    absl::StatusOr<client::Receipt> receipt = publisher.Publish(m);
    EXPECT_TRUE(receipt.ok()) << m.topic << ": " << receipt.status();
  }
  // And d, which is the primary of nothing, gathers every shard's stats.
  auto stub = v1::Admin::NewStub(nodes_.at("d")->Channel());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
  v1::GetStatsResponse stats;
  const grpc::Status status =
      stub->GetStats(&context, v1::GetStatsRequest(), &stats);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stats.topics_size(), kShards);

  // A message of shard 0 due after the move; via-d-0, due now, waits too.
  ASSERT_EQ(
      Publish(primary[0], topics_[0], "before-move", absl::Seconds(3)).code,
      grpc::StatusCode::OK);
  const std::string at_d = "--addr=" + nodes_.at("d")->address();
  auto move = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {HOURGLASS_PATH, at_d, "cluster", "move"});
    return testing::Run(args, kPatience + absl::Seconds(10));
  };
  testing::RunResult refused = move({"--shard=4", "--to=d"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr("INVALID_ARGUMENT: shard 4 is out of range: cluster "
                        "hourglass has shards 0 to 3"));
  refused = move({"--shard=0", "--to=x"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr("NOT_FOUND: node x is not a live node of cluster "
                        "hourglass (live: a, b, c, d)"));
  refused = move({"--shard=0", "--to=d"});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr("FAILED_PRECONDITION: node d is being drained"));

  ASSERT_TRUE(client::Admin(ChannelToNodes({"a"})).DrainNode("d", true).ok());
  const testing::RunResult moved = move(
      {"--shard=0", "--to=d", "--wait=" + absl::FormatDuration(kPatience)});
  EXPECT_EQ(moved.exit_code, 0) << moved.output;
  EXPECT_THAT(moved.output,
              HasSubstr("shard 0 is pinned to d: the controller makes d its "
                        "primary and keeps it there"));
  EXPECT_THAT(moved.output, HasSubstr("\n  done, d leads it at epoch 2 ("));
  // Every node sees the pin; d leads shard 0 with three replicas in sync,
  // and serves it (it opens the shard's engine once it sees the record).
  v1::ClusterMap map;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        for (const char* id : {"a", "b", "c", "d"}) {
          absl::StatusOr<v1::ClusterMap> read = MapOf(id);
          if (!read.ok() || read->pins_size() != 1) return false;
          map = *std::move(read);
        }
        const v1::ShardInfo& shard = map.shards(0);
        return shard.primary() == "d" && shard.epoch() == 2 &&
               shard.replicas_size() == 3 && shard.isr_size() == 3 &&
               StatsOf("d", topics_[0]).code == grpc::StatusCode::OK;
      },
      kPatience))
      << map.DebugString();
  EXPECT_EQ(map.pins(0).shard(), 0u);
  EXPECT_EQ(map.pins(0).node(), "d");
  const Answer after =
      Publish("d", topics_[0], "after-move", absl::ZeroDuration());
  EXPECT_EQ(after.code, grpc::StatusCode::OK) << after.message;

  // Every acknowledged message of shard 0 comes from d.
  ConsumerOptions options;
  options.topic = topics_[0];
  options.group = "g";
  options.rpc = ConsumerOptions::Rpc::kSubscribe;
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Subscribe(ChannelToNodes({"d"}), options, nullptr);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::multiset<std::string> got;
  const absl::Time deadline = absl::Now() + kPatience;
  while (got.size() < 3 && absl::Now() < deadline) {
    for (const Delivery& d : (*consumer)->Receive(8, deadline)) {
      got.insert(d.id);
      EXPECT_TRUE((*consumer)->Ack(d.id).ok());
    }
  }
  EXPECT_EQ(got, (std::multiset<std::string>{"after-move", "before-move",
                                             "via-d-0"}));

  const testing::RunResult shown =
      testing::Run({HOURGLASS_PATH, at_d, "cluster"}, kPatience);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output, HasSubstr("\nshards moved (hourglass cluster "
                                      "move):\n  shard 0 to d: done, d leads "
                                      "it at epoch 2 ("));

  // --undo lets the controller place the shard again.
  const testing::RunResult undone = move({"--shard=0", "--undo"});
  EXPECT_EQ(undone.exit_code, 0) << undone.output;
  EXPECT_THAT(undone.output,
              HasSubstr("shard 0 is no longer pinned to d: the controller "
                        "places it with the others again"));
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<v1::ClusterMap> read = MapOf("a");
        return read.ok() && read->pins_size() == 0;
      },
      kPatience));
}

// The shard count is the cluster's: a node given another exits before it
// opens its shards, saying which to give, rather than send topics to
// other shards (more in shard_count_test.cc).
TEST_F(MultiShardTest, ANodeGivenAnotherShardCountExitsSayingWhichToGive) {
  StartNodes({"a"}, {"--shards=4", "--replication_factor=1", "--min_insync=1"});
  ASSERT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<v1::ClusterMap> map = MapOf("a");
        return map.ok() && map->nodes_size() == 1;
      },
      kPatience));
  absl::StatusOr<std::unique_ptr<testing::Subprocess>> other =
      testing::Subprocess::Start(
          {HOURGLASSD_PATH, "--listen=127.0.0.1:0",
           "--metrics_listen=127.0.0.1:0", "--data_dir=" + dir_.path() + "/x",
           "--etcd=" + etcd_->endpoint(), "--node_id=x", "--shards=8",
           testing::PeerSecretFlag(dir_.path())});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ((*other)->Wait(kPatience), 1) << (*other)->output();
  EXPECT_THAT((*other)->output(),
              HasSubstr("cluster hourglass has 4 shards, fixed when it was "
                        "created; this node was started with --shards=8: "
                        "give it --shards=4, or no --shards to take the "
                        "cluster's"));
}

}  // namespace
}  // namespace hourglass
