// Cluster mode end to end: one etcd and three real hourglassd processes on
// loopback ports, one shard (--shards=1) replicated on all three (many
// shards: multi_shard_test.cc).

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "client/consumer.h"
#include "client/publisher.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "cluster/records.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/broker.grpc.pb.h"
#include "hourglass/v1/cluster.grpc.pb.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/eventually.h"
#include "tests/testing/peer_secret.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::hourglass::client::Admin;
using ::hourglass::client::Channel;
using ::hourglass::client::ChannelOptions;
using ::hourglass::client::Consumer;
using ::hourglass::client::ConsumerOptions;
using ::hourglass::client::Delivery;
using ::hourglass::client::Message;
using ::hourglass::client::Publisher;
using ::hourglass::client::Receipt;
using ::hourglass::testing::Answer;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAreArray;

constexpr absl::Duration kPatience = testing::kClusterPatience;

using ClusterTest = testing::ClusterFixture;

TEST_F(ClusterTest, ThePrimaryServesAndTheOthersSendClientsToIt) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  // The shard is created once all three joined, with the first id primary.
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));

  const Answer published = Publish("a", "orders", "o1", absl::Minutes(5));
  EXPECT_EQ(published.code, grpc::StatusCode::OK) << published.message;
  EXPECT_EQ(published.primary, "");

  for (const char* other : {"b", "c"}) {
    const Answer redirected = Publish(other, "orders", "o2", absl::Minutes(5));
    EXPECT_EQ(redirected.code, grpc::StatusCode::UNAVAILABLE) << other;
    EXPECT_EQ(redirected.primary, nodes_.at("a")->address()) << other;
    EXPECT_EQ(redirected.epoch, "1") << other;
    EXPECT_THAT(redirected.message,
                HasSubstr(absl::StrCat("node ", other,
                                       " is not the primary of shard 0: its "
                                       "primary is a at ",
                                       nodes_.at("a")->address())));
    const Answer admin = Stats(other);
    EXPECT_EQ(admin.code, grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(admin.primary, nodes_.at("a")->address());
  }

  // Each node's metrics say its role; the primary's, its backups' lag.
  const std::string primary_metrics = nodes_.at("a")->ScrapeMetrics();
  EXPECT_THAT(
      primary_metrics,
      HasSubstr("hourglass_cluster_role{shard=\"0\",role=\"primary\"} 1\n"));
  EXPECT_THAT(primary_metrics,
              HasSubstr("hourglass_cluster_epoch{shard=\"0\"} 1\n"));
  EXPECT_THAT(primary_metrics,
              HasSubstr("hourglass_cluster_in_sync{shard=\"0\"} 3\n"));
  EXPECT_THAT(primary_metrics,
              HasSubstr("hourglass_cluster_promotions_total{shard=\"0\"} 1\n"));
  EXPECT_THAT(primary_metrics,
              ::testing::ContainsRegex("hourglass_replication_lag_entries\\{"
                                       "shard=\"0\",backup=\"b\"\\} [0-9]"));
  // b takes its role when its host thread applies the view it has seen.
  EXPECT_TRUE(testing::Eventually(
      [&] {
        return absl::StrContains(
            nodes_.at("b")->ScrapeMetrics(),
            "hourglass_cluster_role{shard=\"0\",role=\"backup\"} 1\n");
      },
      kPatience));
}

TEST_F(ClusterTest, AcknowledgedPublishesAndCancelsSurviveTheLossOfThePrimary) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));

  // Acknowledged by a: every in-sync backup has them durably.
  const absl::Time before =
      absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  std::vector<std::string> expected;
  for (int i = 1; i <= 20; ++i) {
    const std::string id = absl::StrCat("m", i);
    const Answer answer = Publish("a", "orders", id, absl::Seconds(4));
    ASSERT_EQ(answer.code, grpc::StatusCode::OK)
        << id << ": " << answer.message;
    if (i != 5) expected.push_back(id);
  }
  ASSERT_EQ(Cancel("a", "orders", "m5"), grpc::StatusCode::OK);

  nodes_.at("a")->Kill();
  // a's lease ends within 2 s; the controller promotes b or c at epoch 2.
  const std::string primary = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(primary.empty()) << "no new primary";
  const std::string other = primary == "b" ? "c" : "b";
  ASSERT_TRUE(AwaitEveryoneSees({"b", "c"}, 2, primary));
  const Answer redirected = Stats(other);
  EXPECT_EQ(redirected.code, grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(redirected.primary, nodes_.at(primary)->address());
  EXPECT_EQ(redirected.epoch, "2");

  // Every acknowledged message, never early; the cancelled one never.
  ChannelOptions channel_options;
  channel_options.address = nodes_.at(primary)->address();
  absl::StatusOr<std::shared_ptr<Channel>> channel =
      Channel::Create(channel_options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  ConsumerOptions options;
  options.topic = "orders";
  options.group = "g";
  options.rpc = ConsumerOptions::Rpc::kSubscribe;
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Subscribe(*channel, options, nullptr);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::vector<std::string> got;
  const absl::Time deadline = absl::Now() + kPatience;
  while (got.size() < expected.size() && absl::Now() < deadline) {
    for (const Delivery& d : (*consumer)->Receive(32, deadline)) {
      got.push_back(d.id);
      EXPECT_GE(d.deliver_at, before + absl::Seconds(4)) << d.id;
      EXPECT_GE(d.received_at, d.deliver_at) << d.id;  // never early
      EXPECT_TRUE((*consumer)->Ack(d.id).ok());
    }
  }
  EXPECT_THAT(got, UnorderedElementsAreArray(expected));
  EXPECT_TRUE((*consumer)->Receive(1, absl::Now()).empty());
}

TEST_F(ClusterTest, APausedPrimaryDeliversNothingOnceReplacedAndRejoins) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  // A consumer on a, and a message that comes due while a is paused.
  ChannelOptions on_a;
  on_a.address = nodes_.at("a")->address();
  absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(on_a);
  ASSERT_TRUE(channel.ok()) << channel.status();
  ConsumerOptions options;
  options.topic = "orders";
  options.group = "g";
  options.rpc = ConsumerOptions::Rpc::kSubscribe;
  absl::StatusOr<std::unique_ptr<Consumer>> old_consumer =
      Consumer::Subscribe(*channel, options, nullptr);
  ASSERT_TRUE(old_consumer.ok()) << old_consumer.status();
  const Answer published =
      Publish("a", "orders", "due-while-paused", absl::Milliseconds(1500));
  ASSERT_EQ(published.code, grpc::StatusCode::OK) << published.message;

  nodes_.at("a")->process().Signal(SIGSTOP);
  const std::string primary = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(primary.empty()) << "no new primary";
  // Resumed, a finds its lease gone: it joins again under a new one, sees
  // the new primary and becomes its backup. What came due meanwhile is not
  // delivered by it: its in-flight write cannot be accepted at its old
  // epoch.
  nodes_.at("a")->process().Signal(SIGCONT);
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "cluster: node a joined cluster hourglass again", kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 2, primary));
  EXPECT_THAT((*old_consumer)->Receive(1, absl::Now()), ::testing::IsEmpty());
  EXPECT_FALSE(nodes_.at("a")->process().Exited());

  // The new primary delivers it, for the first time.
  ChannelOptions on_primary;
  on_primary.address = nodes_.at(primary)->address();
  absl::StatusOr<std::shared_ptr<Channel>> new_channel =
      Channel::Create(on_primary);
  ASSERT_TRUE(new_channel.ok()) << new_channel.status();
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Subscribe(*new_channel, options, nullptr);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  const std::vector<Delivery> got =
      (*consumer)->Receive(1, absl::Now() + kPatience);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, "due-while-paused");
  EXPECT_EQ(got[0].attempt, 1u);
}

TEST_F(ClusterTest, TheClientLibraryFollowsThePrimaryFromAnyNode) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  // Pointed at b, a backup, and told of c.
  ChannelOptions options;
  options.address = nodes_.at("b")->address() + "," + nodes_.at("c")->address();
  absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  Publisher publisher(*channel);
  Message m;
  m.topic = "orders";
  m.id = "first";
  m.payload = "x";
  m.delay = absl::Seconds(2);
  absl::StatusOr<Receipt> receipt = publisher.Publish(m);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(receipt->id, "first");
  Admin admin(*channel);
  hourglass::v1::GetStatsRequest stats_request;
  absl::StatusOr<hourglass::v1::GetStatsResponse> stats =
      admin.GetStats(stats_request);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->topics_size(), 1);
  EXPECT_EQ(stats->topics(0).scheduled(), 1u);

  ConsumerOptions consumer_options;
  consumer_options.topic = "orders";
  consumer_options.group = "g";
  consumer_options.rpc = ConsumerOptions::Rpc::kSubscribe;
  consumer_options.reconnect = true;
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Subscribe(*channel, consumer_options, nullptr);
  ASSERT_TRUE(consumer.ok()) << consumer.status();

  // The primary dies: the consumer's stream ends, and it finds the new
  // primary through the nodes it knows; so does the publisher.
  nodes_.at("a")->Kill();
  ASSERT_FALSE(AwaitPrimary({"b", "c"}).empty());
  m.id = "second";
  receipt = publisher.Publish(m);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  std::vector<std::string> got;
  const absl::Time deadline = absl::Now() + kPatience;
  while (got.size() < 2 && absl::Now() < deadline) {
    for (const Delivery& d : (*consumer)->Receive(2, deadline)) {
      got.push_back(d.id);
      EXPECT_TRUE((*consumer)->Ack(d.id).ok());
    }
  }
  EXPECT_THAT(got, UnorderedElementsAreArray({"first", "second"}));
}

TEST_F(ClusterTest, TheCliPublishesThroughAnyNodeAndShowsTheCluster) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  const std::string at_c = "--addr=" + nodes_.at("c")->address();
  testing::RunResult published =
      testing::Run({HOURGLASS_PATH, at_c, "publish", "--topic=orders",
                    "--id=o1", "--delay=1h", "--data=x"},
                   kPatience);
  EXPECT_EQ(published.exit_code, 0) << published.output;
  EXPECT_THAT(published.output, HasSubstr("o1"));

  testing::RunResult shown =
      testing::Run({HOURGLASS_PATH, at_c, "cluster"}, kPatience);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output,
              HasSubstr("cluster hourglass: 3 live nodes, 1 of 1 shards "
                        "created, controller a; as node c sees it"));
  EXPECT_THAT(shown.output,
              HasSubstr(absl::StrCat("a     ", nodes_.at("a")->address(),
                                     "  controller, primary of 0")));
  // The shard's line, and each backup's lag as the primary reports it.
  EXPECT_THAT(shown.output, ::testing::ContainsRegex(
                                "    0      1  a        a,b,c     a,b,c "));
  EXPECT_THAT(shown.output, ::testing::ContainsRegex(
                                "    0  b +[0-9]+ +[0-9]+ +[0-9]+ .* yes"));

  testing::RunResult json =
      testing::Run({HOURGLASS_PATH, at_c, "--json", "cluster"}, kPatience);
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_THAT(json.output, HasSubstr(R"("node":"c","controller":"a")"));
  EXPECT_THAT(json.output, HasSubstr(R"("epoch":"1","primary":"a")"));

  // Given every node, the CLI gets past a dead first one.
  const std::string all =
      absl::StrCat("--addr=", nodes_.at("a")->address(), ",",
                   nodes_.at("b")->address(), ",", nodes_.at("c")->address());
  nodes_.at("a")->Kill();
  const std::string primary = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(primary.empty());
  testing::RunResult after = testing::Run(
      {HOURGLASS_PATH, all, "publish", "--topic=orders", "--id=o2", "--data=x"},
      kPatience);
  EXPECT_EQ(after.exit_code, 0) << after.output;
  testing::RunResult shown_after =
      testing::Run({HOURGLASS_PATH, all, "--json", "cluster"}, kPatience);
  EXPECT_EQ(shown_after.exit_code, 0) << shown_after.output;
  EXPECT_THAT(
      shown_after.output,
      HasSubstr(absl::StrCat(R"("epoch":"2","primary":")", primary, R"(")")));
}

TEST_F(ClusterTest, AStoppedPrimaryHandsOverAndComesBackAsAnInSyncBackup) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  ASSERT_EQ(Publish("a", "orders", "kept", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  // SIGTERM: a stops serving, leaves (its lease revoked, not left to
  // expire), and an in-sync backup takes over at epoch 2.
  EXPECT_EQ(nodes_.at("a")->Stop(), 0);
  const std::string primary = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(primary.empty());
  Admin admin(ChannelTo(primary));
  absl::StatusOr<hourglass::v1::ClusterMap> map = admin.GetClusterMap();
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->shards_size(), 1);
  EXPECT_EQ(map->shards(0).epoch(), 2);
  EXPECT_EQ(map->shards(0).primary(), primary);
  EXPECT_EQ(map->nodes_size(), 2);
  hourglass::v1::GetMessageRequest get;
  get.set_topic("orders");
  get.set_id("kept");
  EXPECT_TRUE(admin.GetMessage(get).ok());

  // a comes back with the same data: its copy is a prefix of the new
  // primary's log, so it catches up and rejoins the in-sync set: first in
  // the primary's own view (its lag report), then in etcd's record (the
  // map's isr), which the primary writes right after.
  StartNodes({"a"}, {"--shards=1"});
  absl::StatusOr<hourglass::v1::ClusterMap> after;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        after = admin.GetClusterMap();
        if (!after.ok() || after->shards_size() != 1) return false;
        for (const auto& lag : after->shards(0).lag()) {
          if (lag.node() == "a") {
            return lag.in_sync() && after->shards(0).isr_size() == 3;
          }
        }
        return false;
      },
      kPatience));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(after->shards(0).isr(),
              ::testing::UnorderedElementsAre("a", "b", "c"));
}

TEST_F(ClusterTest, AWipedBackupIsRebuiltFromTheNewPrimarysCheckpoint) {
  // One in-sync copy suffices here, so that the shard serves while two of
  // three nodes are down.
  StartNodes({"a", "b", "c"},
             {"--shards=1", "--min_insync=1", "--replication_log_keep=0"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  ASSERT_EQ(Publish("a", "orders", "m1", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  // b dies; a goes on (with c), then hands over to c at epoch 2. c's log
  // in memory starts there: what b lacks from before is not in it.
  nodes_.at("b")->Kill();
  ASSERT_EQ(Publish("a", "orders", "m2", absl::Hours(1)).code,
            grpc::StatusCode::OK);
  EXPECT_EQ(nodes_.at("a")->Stop(), 0);
  ASSERT_EQ(AwaitPrimary({"c"}), "c");
  ASSERT_EQ(Publish("c", "orders", "m3", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  // b comes back with its disk wiped: it must be rebuilt from c's
  // checkpoint (no node keeps its write-ahead log to catch up from:
  // --replication_log_keep=0), then follows c's log and rejoins the
  // in-sync set.
  std::filesystem::remove_all(dir_.path() + "/b");
  StartNodes({"b"},
             {"--shards=1", "--min_insync=1", "--replication_log_keep=0"});
  Admin at_c(ChannelTo("c"));
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<hourglass::v1::ClusterMap> map = at_c.GetClusterMap();
        return map.ok() && map->shards_size() == 1 &&
               std::find(map->shards(0).isr().begin(),
                         map->shards(0).isr().end(),
                         "b") != map->shards(0).isr().end();
      },
      kPatience))
      << nodes_.at("b")->process().output();
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      "rebuilt its copy of shard 0", kPatience))
      << nodes_.at("b")->process().output();

  // Then c goes: b, the only copy left, is promoted and holds all three.
  EXPECT_EQ(nodes_.at("c")->Stop(), 0);
  ASSERT_EQ(AwaitPrimary({"b"}), "b");
  Admin at_b(ChannelTo("b"));
  for (const char* id : {"m1", "m2", "m3"}) {
    hourglass::v1::GetMessageRequest get;
    get.set_topic("orders");
    get.set_id(id);
    EXPECT_TRUE(at_b.GetMessage(get).ok()) << id;
  }
}

// A primary whose --data_dir is relative (as in README's walkthrough) sends
// checkpoints too: RocksDB makes them only at an absolute path, so the
// node makes its data dir absolute as it opens.
TEST_F(ClusterTest, APrimaryGivenARelativeDataDirSendsItsCheckpoint) {
  // No write-ahead log kept: a wiped node is rebuilt from a checkpoint.
  const std::vector<std::string> flags = {
      "--shards=1", "--replication_factor=2", "--min_insync=1",
      "--replication_log_keep=0"};
  StartNodes({"a"}, flags);
  std::vector<std::string> relative = {"--etcd=" + etcd_->endpoint(),
                                       "--node_id=b",
                                       "--lease_ttl=2s",
                                       "--shutdown_grace=500ms",
                                       "--data_dir=b",
                                       testing::PeerSecretFlag(dir_.path())};
  relative.insert(relative.end(), flags.begin(), flags.end());
  absl::StatusOr<std::unique_ptr<testing::Daemon>> b =
      testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/b", relative,
                             {"/usr/bin/env", "--chdir=" + dir_.path()});
  ASSERT_TRUE(b.ok()) << b.status();
  nodes_["b"] = *std::move(b);
  ASSERT_EQ(AwaitPrimary({"a", "b"}), "a");
  ASSERT_EQ(Publish("a", "orders", "m1", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  // a hands over to b at epoch 2, whose log starts there; a comes back
  // wiped, and only b's checkpoint can give it m1.
  EXPECT_EQ(nodes_.at("a")->Stop(), 0);
  ASSERT_EQ(AwaitPrimary({"b"}), "b");
  std::filesystem::remove_all(dir_.path() + "/a");
  StartNodes({"a"}, flags);
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "rebuilt its copy of shard 0", kPatience))
      << nodes_.at("a")->process().output() << "\n--- b:\n"
      << nodes_.at("b")->process().output();
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/b/shards/0"));
}

// Under writes that never pause, a backup that restarts is never at the
// very last entry when the primary looks: it must still rejoin the in-sync
// set (the primary makes writes wait for it while it closes the gap).
TEST_F(ClusterTest, ARestartedBackupRejoinsTheInSyncSetWhilePublishesGoOn) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  const std::shared_ptr<Channel> channel = ChannelTo("a");
  Admin admin(channel);
  auto isr_size = [&] {
    absl::StatusOr<hourglass::v1::ClusterMap> map = admin.GetClusterMap();
    return map.ok() && map->shards_size() == 1 ? map->shards(0).isr_size() : -1;
  };

  // Two publishers, batches of 50, back to back until told to stop.
  std::atomic<bool> stop = false;
  std::atomic<int64_t> acknowledged = 0;
  std::vector<std::thread> publishers;
  for (int p = 0; p < 2; ++p) {
    publishers.emplace_back([&, p] {
      Publisher publisher(channel);
      for (int batch = 0; !stop.load(); ++batch) {
        std::vector<Message> messages(50);
        for (int i = 0; i < 50; ++i) {
          messages[i].topic = "orders";
          messages[i].id = absl::StrCat("p", p, "-", batch, "-", i);
          messages[i].payload = "x";
          messages[i].delay = absl::Hours(1);
        }
        if (publisher.PublishBatch(std::move(messages)).ok()) {
          acknowledged += 50;
        }
      }
    });
  }
  auto stop_publishers = absl::MakeCleanup([&] {
    stop = true;
    for (std::thread& t : publishers) t.join();
  });

  ASSERT_TRUE(testing::Eventually([&] { return acknowledged.load() >= 1000; },
                                  kPatience));
  nodes_.at("c")->Kill();
  ASSERT_TRUE(testing::Eventually([&] { return isr_size() == 2; }, kPatience));
  StartNodes({"c"}, {"--shards=1"});
  const int64_t before = acknowledged.load();
  EXPECT_TRUE(testing::Eventually([&] { return isr_size() == 3; }, kPatience));
  // Publishing goes on (the rejoin may take less time than a batch).
  EXPECT_TRUE(testing::Eventually([&] { return acknowledged.load() > before; },
                                  kPatience));
}

// `hourglass cluster drain` of a backup: the controller adds a copy on the
// node that holds none, which follows the primary's log (from its start:
// the primary still keeps it all) and joins the in-sync set; only then does
// the drained node's copy leave. The
// new copy holds every acknowledged publish, from before and during the
// move.
TEST_F(ClusterTest, ADrainedBackupsCopyMovesToASpareNode) {
  // One in-sync copy suffices, so that d alone can serve at the end.
  StartNodes({"a", "b", "c"}, {"--shards=1", "--min_insync=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  StartNodes({"d"}, {"--shards=1", "--min_insync=1"});
  ASSERT_EQ(Publish("a", "orders", "m1", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  const std::string at_c = "--addr=" + nodes_.at("c")->address();
  testing::RunResult drained = testing::Run(
      {HOURGLASS_PATH, at_c, "cluster", "drain", "--node=b"}, kPatience);
  EXPECT_EQ(drained.exit_code, 0) << drained.output;
  EXPECT_THAT(drained.output,
              HasSubstr("node b is being drained: the controller moves its "
                        "replicas (1 now, primary of 0) to other nodes"));
  ASSERT_EQ(Publish("a", "orders", "m2", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  Admin at_c_admin(ChannelTo("c"));
  hourglass::v1::ClusterMap map;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<hourglass::v1::ClusterMap> read =
            at_c_admin.GetClusterMap();
        if (!read.ok() || read->shards_size() != 1) return false;
        map = *std::move(read);
        return absl::StrJoin(map.shards(0).replicas(), ",") == "a,c,d" &&
               absl::StrJoin(map.shards(0).isr(), ",") == "a,c,d";
      },
      kPatience))
      << map.DebugString() << nodes_.at("a")->process().output();
  EXPECT_EQ(map.shards(0).epoch(), 1);
  EXPECT_EQ(absl::StrJoin(map.draining(), ","), "b");
  EXPECT_TRUE(nodes_.at("d")->process().WaitForOutput(
      "following primary a of shard 0 at epoch 1", kPatience))
      << nodes_.at("d")->process().output();
  // The controller (a) moved it in two steps, d joining the in-sync set
  // in between, and the primary (a too) stopped waiting for b's
  // acknowledgements. (The primary logs the in-sync set once etcd has it,
  // which the controller may see, and log its next step on, first: only
  // the controller's steps are in order in the log.)
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "primary a no longer waits for b in shard 0", kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_THAT(nodes_.at("a")->process().output(),
              ::testing::ContainsRegex(
                  "controller a: shard 0: d joins its replicas to take b's "
                  "place \\(draining\\).*\n(.*\n)*.*controller a: shard "
                  "0: b leaves its replicas \\(a,b,c,d -> a,c,d\\), "
                  "draining"));
  EXPECT_THAT(nodes_.at("a")->process().output(),
              HasSubstr("primary a set the in-sync set of shard 0 at epoch 1 "
                        "to [a,b,c,d]"));
  // b's copy, which no record names now, is removed with its files.
  const std::string b_copy = dir_.path() + "/b/shards/0";
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      "node b holds no copy of shard 0 any more", kPatience))
      << nodes_.at("b")->process().output();
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      absl::StrCat("node b removed its copy of shard 0 (", b_copy), kPatience))
      << nodes_.at("b")->process().output();
  EXPECT_FALSE(std::filesystem::exists(b_copy));
  ASSERT_EQ(Publish("a", "orders", "m3", absl::Hours(1)).code,
            grpc::StatusCode::OK);
  testing::RunResult shown =
      testing::Run({HOURGLASS_PATH, at_c, "cluster"}, kPatience);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_THAT(shown.output,
              HasSubstr(absl::StrCat("b     ", nodes_.at("b")->address(),
                                     "  draining\n")));

  // The drain is undone on request (b would get copies again as needed).
  testing::RunResult undone = testing::Run(
      {HOURGLASS_PATH, at_c, "cluster", "drain", "--node=b", "--undo"},
      kPatience);
  EXPECT_EQ(undone.exit_code, 0) << undone.output;
  EXPECT_THAT(undone.output, HasSubstr("node b is no longer drained"));
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<hourglass::v1::ClusterMap> read =
            at_c_admin.GetClusterMap();
        return read.ok() && read->draining_size() == 0;
      },
      kPatience));

  // a and c go: d, the copy that moved, is promoted and holds all three.
  nodes_.at("a")->Kill();
  nodes_.at("c")->Kill();
  ASSERT_EQ(AwaitPrimary({"d"}), "d");
  Admin at_d(ChannelTo("d"));
  for (const char* id : {"m1", "m2", "m3"}) {
    hourglass::v1::GetMessageRequest get;
    get.set_topic("orders");
    get.set_id(id);
    EXPECT_TRUE(at_d.GetMessage(get).ok()) << id;
  }
}

// A copy that leaves a node is removed; moving the shard back to that node
// starts it from an empty copy, which the primary fills, and the node then
// leads the shard holding every acknowledged message.
TEST_F(ClusterTest, ACopyMovedAwayIsRemovedAndRefilledWhenTheShardComesBack) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  StartNodes({"d"}, {"--shards=1"});
  ASSERT_EQ(Publish("a", "orders", "m1", absl::Hours(1)).code,
            grpc::StatusCode::OK);
  Admin at_c(ChannelTo("c"));
  ASSERT_TRUE(at_c.DrainNode("b", false).ok());
  const std::string b_copy = dir_.path() + "/b/shards/0";
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      absl::StrCat("node b removed its copy of shard 0 (", b_copy), kPatience))
      << nodes_.at("b")->process().output();
  EXPECT_FALSE(std::filesystem::exists(b_copy));
  ASSERT_EQ(Publish("a", "orders", "m2", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  ASSERT_TRUE(at_c.DrainNode("b", true).ok());
  const testing::RunResult moved = testing::Run(
      {HOURGLASS_PATH, "--addr=" + nodes_.at("c")->address(), "cluster", "move",
       "--shard=0", "--to=b", "--wait=" + absl::FormatDuration(kPatience)},
      kPatience + absl::Seconds(10));
  EXPECT_EQ(moved.exit_code, 0) << moved.output;
  EXPECT_THAT(moved.output, HasSubstr("\n  done, b leads it at epoch 2 ("));
  // b started again from an empty copy (the primary still kept its whole
  // log, so it shipped it rather than a checkpoint).
  EXPECT_TRUE(nodes_.at("b")->process().WaitForOutput(
      "node b serves shard 0 at epoch 2", kPatience))
      << nodes_.at("b")->process().output();
  EXPECT_THAT(nodes_.at("b")->process().output(),
              ::testing::ContainsRegex(
                  "node b removed its copy of shard 0.*\n(.*\n)*.*node b is "
                  "a backup of shard 0 \\(its copy ends at entry 0 of epoch "
                  "0\\)\n(.*\n)*.*node b is the primary of shard 0 at "
                  "epoch 2"));
  EXPECT_TRUE(std::filesystem::exists(b_copy));
  Admin at_b(ChannelTo("b"));
  for (const char* id : {"m1", "m2"}) {
    hourglass::v1::GetMessageRequest get;
    get.set_topic("orders");
    get.set_id(id);
    const absl::Status read = at_b.GetMessage(get).status();
    EXPECT_TRUE(read.ok()) << id << ": " << read;
  }
  ASSERT_EQ(Publish("b", "orders", "m3", absl::Hours(1)).code,
            grpc::StatusCode::OK);

  // What a crash left of a removal (the directory is renamed first) is
  // deleted at start; the copy itself is untouched.
  nodes_.at("b")->Kill();
  const std::string leftover = b_copy + ".removed";
  std::filesystem::create_directories(leftover);
  {
    std::ofstream junk(leftover + "/000042.sst");
    junk << "half a removal";
  }
  StartNodes({"b"}, {"--shards=1"});
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_TRUE(std::filesystem::exists(b_copy));
  // Killing b (the primary) failed the shard over: once it is served
  // again, m3 is there.
  Admin after_restart(ChannelToNodes({"a", "b", "c", "d"}));
  hourglass::v1::GetMessageRequest get;
  get.set_topic("orders");
  get.set_id("m3");
  absl::Status found;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        found = after_restart.GetMessage(get).status();
        return found.ok() || absl::IsNotFound(found);
      },
      kPatience))
      << found;
  EXPECT_TRUE(found.ok()) << found;
}

// A copy that followed a newer epoch than the record that leaves it out is
// not one a move left behind: etcd's data was replaced (here: the nodes
// join under another cluster name, whose records start again at epoch 1).
// It may be the only copy of its messages left, so it stays.
TEST_F(ClusterTest, ACopyThatFollowedANewerEpochThanItsRecordIsKept) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  nodes_.at("a")->Kill();
  const std::string next = AwaitPrimary({"b", "c"});
  ASSERT_TRUE(AwaitEveryoneSees({"b", "c"}, 2, next));
  StartNodes({"a"}, {"--shards=1"});
  ASSERT_TRUE(nodes_.at("a")->process().WaitForOutput(
      absl::StrCat("following primary ", next, " of shard 0 at epoch 2"),
      kPatience))
      << nodes_.at("a")->process().output();
  for (const char* id : {"a", "b", "c"}) nodes_.at(id)->Kill();

  const std::vector<std::string> again = {"--shards=1", "--cluster=again",
                                          "--replication_factor=1",
                                          "--min_insync=1"};
  StartNodes({"d"}, again);
  ASSERT_EQ(AwaitPrimary({"d"}), "d");
  StartNodes({"a"}, again);
  const std::string a_copy = dir_.path() + "/a/shards/0";
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      absl::StrCat("node a keeps its copy of shard 0 in ", a_copy,
                   ", which the shard's record (epoch 1) does not name: the "
                   "copy followed epoch 2, newer than the record's"),
      kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_TRUE(std::filesystem::exists(a_copy));
  EXPECT_THAT(nodes_.at("a")->process().output(),
              Not(HasSubstr("removed its copy")));
}

// An in-sync set naming a node that is not a replica (as a primary could
// write before Member::SetIsr checked the record it decided on) is mended
// by the primary: no shipper feeds that node, and the controller could
// promote it.
TEST_F(ClusterTest, APrimaryDropsANodeThatIsNoReplicaFromTheInSyncSet) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd =
      cluster::EtcdClient::Create(cluster::EtcdOptions{{etcd_->endpoint()}});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string key = cluster::ShardKey("hourglass", 0);
  absl::StatusOr<cluster::GetResult> read = (*etcd)->Get(key);
  ASSERT_TRUE(read.ok() && read->kv.has_value()) << read.status();
  cluster::ShardRecord record =
      cluster::DecodeShardRecord(read->kv->value).value();
  record.isr.push_back("x");
  ASSERT_TRUE((*etcd)->Put(key, cluster::EncodeShardRecord(record)).ok());

  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "primary a removed x from the in-sync set of shard 0: it is not a "
      "replica",
      kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<cluster::GetResult> now = (*etcd)->Get(key);
        if (!now.ok() || !now->kv.has_value()) return false;
        absl::StatusOr<cluster::ShardRecord> mended =
            cluster::DecodeShardRecord(now->kv->value);
        return mended.ok() && absl::StrJoin(mended->isr, ",") ==
                                  absl::StrJoin(record.replicas, ",");
      },
      kPatience));
  ASSERT_EQ(Publish("a", "orders", "after", absl::Hours(1)).code,
            grpc::StatusCode::OK);
}

// Draining the primary: it hands the shard over (leader transfer) to an
// in-sync backup at the next epoch, stays in sync as a backup, and then its
// copy moves to the spare node like a backup's. A publisher going through
// the client library all along (retrying each batch until acknowledged,
// ids making retries safe) loses nothing, and the shard is never without a
// primary for long: the new one holds exactly the messages acknowledged.
TEST_F(ClusterTest, ADrainedPrimaryHandsItsShardOverAndItsCopyMoves) {
  StartNodes({"a", "b", "c"}, {"--shards=1"});
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
  StartNodes({"d"}, {"--shards=1"});

  ChannelOptions options;
  options.address = absl::StrCat(
      nodes_.at("a")->address(), ",", nodes_.at("b")->address(), ",",
      nodes_.at("c")->address(), ",", nodes_.at("d")->address());
  absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  std::atomic<bool> stop = false;
  std::atomic<int64_t> acknowledged = 0;
  std::thread publishing([&] {
    Publisher publisher(*channel);
    for (int batch = 0; !stop.load(); ++batch) {
      std::vector<Message> messages(10);
      for (int i = 0; i < 10; ++i) {
        messages[i].topic = "orders";
        messages[i].id = absl::StrCat(batch, "-", i);
        messages[i].payload = "x";
        messages[i].delay = absl::Hours(1);
      }
      // The same batch again until it is acknowledged: its ids dedupe.
      while (!publisher.PublishBatch(messages).ok()) {
      }
      acknowledged += 10;
    }
  });
  auto stop_publishing = absl::MakeCleanup([&] {
    stop = true;
    publishing.join();
  });
  ASSERT_TRUE(testing::Eventually([&] { return acknowledged.load() >= 200; },
                                  kPatience));

  Admin at_c(ChannelTo("c"));
  ASSERT_TRUE(at_c.DrainNode("a", /*undo=*/false).ok());
  hourglass::v1::ClusterMap map;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        absl::StatusOr<hourglass::v1::ClusterMap> read = at_c.GetClusterMap();
        if (!read.ok() || read->shards_size() != 1) return false;
        map = *std::move(read);
        std::vector<std::string> replicas(map.shards(0).replicas().begin(),
                                          map.shards(0).replicas().end());
        std::sort(replicas.begin(), replicas.end());
        return absl::StrJoin(replicas, ",") == "b,c,d" &&
               map.shards(0).isr_size() == 3;
      },
      kPatience))
      << map.DebugString() << nodes_.at("a")->process().output();
  const std::string primary = map.shards(0).primary();
  EXPECT_EQ(map.shards(0).epoch(), 2);  // One change of primary.
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      absl::StrCat("stopped writing shard 0 at entry"), kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "holds no copy of shard 0 any more", kPatience))
      << nodes_.at("a")->process().output();

  const int64_t at_move = acknowledged.load();
  ASSERT_TRUE(testing::Eventually(
      [&] { return acknowledged.load() >= at_move + 100; }, kPatience));
  std::move(stop_publishing).Invoke();
  Admin at_primary(ChannelTo(primary));
  hourglass::v1::GetStatsRequest request;
  request.set_topic("orders");
  absl::StatusOr<hourglass::v1::GetStatsResponse> stats =
      at_primary.GetStats(request);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->topics_size(), 1);
  EXPECT_EQ(stats->topics(0).scheduled(),
            static_cast<uint64_t>(acknowledged.load()));
}

// A node started while etcd is away waits for it, saying so, and joins once
// it answers: nodes and etcd may start in any order.
TEST_F(ClusterTest, ANodeStartedBeforeEtcdWaitsAndJoinsOnceEtcdAnswers) {
  etcd_->Stop();
  absl::StatusOr<std::unique_ptr<testing::Subprocess>> node =
      testing::Subprocess::Start(
          {HOURGLASSD_PATH, "--listen=127.0.0.1:0",
           "--metrics_listen=127.0.0.1:0", "--data_dir=" + dir_.path() + "/a",
           "--etcd=" + etcd_->endpoint(), "--node_id=a", "--lease_ttl=2s",
           "--shards=1", "--replication_factor=1", "--min_insync=1",
           testing::PeerSecretFlag(dir_.path())});
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(
      (*node)->WaitForOutput("cannot join cluster hourglass yet", kPatience))
      << (*node)->output();
  EXPECT_FALSE((*node)->Exited());

  ASSERT_TRUE(etcd_->Restart().ok());
  ASSERT_TRUE((*node)->WaitForOutput(
      "hourglassd joined cluster hourglass as node a", kPatience))
      << (*node)->output();
  (*node)->Signal(SIGTERM);
  EXPECT_EQ((*node)->Wait(kPatience), 0) << (*node)->output();
}

// SIGTERM ends the wait for etcd: the node stops cleanly, never joined.
// (Given no --shards, it waits for etcd to learn the cluster's count.)
TEST_F(ClusterTest, ANodeWaitingForEtcdStopsOnSigterm) {
  etcd_->Stop();
  absl::StatusOr<std::unique_ptr<testing::Subprocess>> node =
      testing::Subprocess::Start({HOURGLASSD_PATH, "--listen=127.0.0.1:0",
                                  "--metrics_listen=127.0.0.1:0",
                                  "--data_dir=" + dir_.path() + "/a",
                                  "--etcd=" + etcd_->endpoint(), "--node_id=a",
                                  testing::PeerSecretFlag(dir_.path())});
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(
      (*node)->WaitForOutput("cannot join cluster hourglass yet", kPatience))
      << (*node)->output();
  (*node)->Signal(SIGTERM);
  EXPECT_EQ((*node)->Wait(kPatience), 0) << (*node)->output();
  EXPECT_THAT((*node)->output(), HasSubstr("received SIGTERM"));
  EXPECT_THAT((*node)->output(), ::testing::Not(HasSubstr("joined cluster")));
}

}  // namespace
}  // namespace hourglass
