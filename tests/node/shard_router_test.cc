// The ShardRouter over real PrimaryGates, each in front of a fake engine
// that records what reached it: calls go to the topic's shard, cross-shard
// publishes are refused whole, consumer ids find the shard that gave them,
// refusals keep the primary they name, Stats gathers the open shards, and
// a snapshot of many shards copies each from its primary.

#include "node/shard_router.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "api/redirect.h"
#include "cluster/shard_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node/primary_gate.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::node {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int kShards = 4;

// An engine that answers at once and records each call as a line.
class FakeEngine final : public broker::Broker {
 public:
  explicit FakeEngine(std::vector<broker::TopicStats> topics = {})
      : topics_(std::move(topics)) {}

  std::vector<std::string> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  void Publish(std::vector<broker::NewMessage> messages,
               Callback<absl::StatusOr<std::vector<broker::PublishReceipt>>>
                   done) override {
    std::vector<broker::PublishReceipt> receipts;
    for (const broker::NewMessage& m : messages) {
      Record(absl::StrCat("publish ", m.topic));
      receipts.push_back({.id = m.id});
    }
    std::move(done)(std::move(receipts));
  }
  void Cancel(std::string topic, std::string id,
              Callback<absl::Status> done) override {
    Record(absl::StrCat("cancel ", topic, " ", id));
    std::move(done)(absl::OkStatus());
  }
  void Reschedule(
      std::string topic, std::string id, absl::Time,
      Callback<absl::StatusOr<broker::PublishReceipt>> done) override {
    Record(absl::StrCat("reschedule ", topic, " ", id));
    std::move(done)(broker::PublishReceipt{.id = id});
  }
  void Subscribe(broker::SubscribeOptions options,
                 std::shared_ptr<broker::Consumer>,
                 Callback<absl::StatusOr<broker::ConsumerId>> done) override {
    Record(absl::StrCat("subscribe ", options.topic));
    std::move(done)(broker::ConsumerId{7});
  }
  void Unsubscribe(broker::ConsumerId id) override {
    Record(absl::StrCat("unsubscribe ", id));
  }
  void Ack(broker::ConsumerId id,
           absl::Span<const std::string_view> message_ids) override {
    Record(absl::StrCat("ack ", id, " ", std::string(message_ids.front())));
  }
  void Nack(broker::ConsumerId id, std::string_view message_id,
            absl::Duration) override {
    Record(absl::StrCat("nack ", id, " ", std::string(message_id)));
  }
  void Written(broker::ConsumerId id, size_t deliveries, size_t) override {
    Record(absl::StrCat("written ", id, " ", deliveries));
  }
  void Stats(
      std::optional<std::string> topic,
      Callback<absl::StatusOr<std::vector<broker::TopicStats>>> done) override {
    Record(absl::StrCat("stats ", topic.value_or("*")));
    std::move(done)(topics_);
  }
  void ListMessages(broker::ListQuery query,
                    Callback<absl::StatusOr<broker::ListPage>> done) override {
    Record(absl::StrCat("list ", query.topic));
    std::move(done)(broker::ListPage{});
  }
  void GetSchedule(broker::ScheduleQuery query,
                   Callback<absl::StatusOr<std::vector<broker::ScheduleBucket>>>
                       done) override {
    Record(absl::StrCat("schedule ", query.topic));
    std::move(done)(std::vector<broker::ScheduleBucket>{});
  }
  void GetMessage(std::string topic, std::string id, size_t,
                  Callback<absl::StatusOr<broker::MessageView>> done) override {
    Record(absl::StrCat("get ", topic, " ", id));
    std::move(done)(broker::MessageView{});
  }
  void CreateGroup(std::string topic, std::string group,
                   Callback<absl::StatusOr<absl::Time>> done) override {
    Record(absl::StrCat("create-group ", topic, " ", group));
    std::move(done)(absl::UnixEpoch());
  }
  void DeleteGroup(std::string topic, std::string group,
                   Callback<absl::StatusOr<uint64_t>> done) override {
    Record(absl::StrCat("delete-group ", topic, " ", group));
    std::move(done)(uint64_t{0});
  }
  void Redrive(std::string topic, std::vector<std::string>,
               Callback<absl::StatusOr<uint64_t>> done) override {
    Record(absl::StrCat("redrive ", topic));
    std::move(done)(uint64_t{0});
  }
  void Purge(std::string topic, bool, bool,
             Callback<absl::StatusOr<uint64_t>> done) override {
    Record(absl::StrCat("purge ", topic));
    std::move(done)(uint64_t{0});
  }
  void CreateSnapshot(
      std::string dir,
      Callback<absl::StatusOr<broker::SnapshotInfo>> done) override {
    Record(absl::StrCat("snapshot ", dir));
    std::filesystem::create_directory(dir);
    std::move(done)(broker::SnapshotInfo{.dir = dir, .files = 1, .bytes = 100});
  }
  broker::BrokerInfo Info() override { return {.store_id = "fake"}; }

 private:
  void Record(std::string call) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
  }

  const std::vector<broker::TopicStats> topics_;
  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// The other primaries, as the router reaches them: records each call as
// "address shards", answers with a topic "b-topic", or fails as told.
class FakeRemote final : public ShardRouter::Remote {
 public:
  void Stats(const std::string& address, std::vector<int> shards,
             ShardRouter::StatsCallback done) override {
    absl::Status fail;
    {
      absl::MutexLock lock(&mu_);
      asked_.push_back(absl::StrCat(address, " ", absl::StrJoin(shards, ",")));
      fail = fail_;
    }
    if (!fail.ok()) return std::move(done)(fail);
    std::move(done)(std::vector<broker::TopicStats>{{.topic = "b-topic"}});
  }
  void Checkpoint(
      const std::string& address, int shard, std::string dir,
      broker::Broker::Callback<absl::StatusOr<storage::CheckpointInfo>> done)
      override {
    absl::Status fail;
    {
      absl::MutexLock lock(&mu_);
      asked_.push_back(absl::StrCat(address, " checkpoint ", shard));
      fail = fail_;
    }
    if (!fail.ok()) return std::move(done)(fail);
    std::filesystem::create_directory(dir);
    std::move(done)(
        storage::CheckpointInfo{.dir = dir, .files = 2, .bytes = 50});
  }
  std::vector<std::string> asked() const {
    absl::MutexLock lock(&mu_);
    return asked_;
  }
  void Fail(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_ = std::move(status);
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> asked_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
};

// A topic of each shard, found by the documented hash.
std::vector<std::string> TopicPerShard() {
  std::vector<std::string> topics(kShards);
  for (int i = 0, found = 0; found < kShards; ++i) {
    const std::string topic = absl::StrCat("topic-", i);
    std::string& slot = topics[cluster::ShardOf(topic, kShards)];
    if (slot.empty()) {
      slot = topic;
      ++found;
    }
  }
  return topics;
}

class ShardRouterTest : public ::testing::Test {
 protected:
  ShardRouterTest() {
    std::vector<PrimaryGate*> gates;
    for (int shard = 0; shard < kShards; ++shard) {
      engines_.push_back(std::make_unique<FakeEngine>(
          std::vector<broker::TopicStats>{{.topic = topics_[shard]}}));
      gates_.push_back(std::make_unique<PrimaryGate>("closed"));
      gates_.back()->Open(engines_.back().get());
      gates.push_back(gates_.back().get());
    }
    router_ = std::make_unique<ShardRouter>(std::move(gates), &remote_);
  }

  // Every engine's calls, by shard.
  std::vector<std::vector<std::string>> Calls() const {
    std::vector<std::vector<std::string>> calls;
    for (const auto& engine : engines_) calls.push_back(engine->calls());
    return calls;
  }

  absl::StatusOr<std::vector<broker::PublishReceipt>> Publish(
      const std::vector<std::string>& topics) {
    std::vector<broker::NewMessage> messages;
    for (const std::string& topic : topics) {
      messages.push_back({.topic = topic, .id = "m"});
    }
    absl::StatusOr<std::vector<broker::PublishReceipt>> answer;
    router_->Publish(
        std::move(messages),
        [&](absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
          answer = std::move(receipts);
        });
    return answer;
  }

  broker::ConsumerId Subscribe(const std::string& topic) {
    absl::StatusOr<broker::ConsumerId> id;
    router_->Subscribe(
        {.topic = topic, .group = "g"}, nullptr,
        [&](absl::StatusOr<broker::ConsumerId> got) { id = std::move(got); });
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  const std::vector<std::string> topics_ = TopicPerShard();
  FakeRemote remote_;
  std::vector<std::unique_ptr<FakeEngine>> engines_;
  std::vector<std::unique_ptr<PrimaryGate>> gates_;
  std::unique_ptr<ShardRouter> router_;
};

TEST_F(ShardRouterTest, CallsByTopicReachTheTopicsShardOnly) {
  const std::string& topic = topics_[2];
  ASSERT_TRUE(Publish({topic, topic + ".dlq"}).ok());
  router_->Cancel(topic, "c", [](absl::Status s) { EXPECT_TRUE(s.ok()); });
  router_->GetMessage(
      topic, "g", 10,
      [](absl::StatusOr<broker::MessageView> v) { EXPECT_TRUE(v.ok()); });
  router_->Purge(topic + ".dlq", true, true,
                 [](absl::StatusOr<uint64_t> n) { EXPECT_TRUE(n.ok()); });
  router_->Stats(topic, [](absl::StatusOr<std::vector<broker::TopicStats>> s) {
    EXPECT_TRUE(s.ok());
  });
  EXPECT_THAT(
      Calls(),
      ElementsAre(IsEmpty(), IsEmpty(),
                  ElementsAre("publish " + topic, "publish " + topic + ".dlq",
                              "cancel " + topic + " c", "get " + topic + " g",
                              "purge " + topic + ".dlq", "stats " + topic),
                  IsEmpty()));
}

TEST_F(ShardRouterTest, APublishSpanningShardsIsRefusedWholeNamingThem) {
  absl::StatusOr<std::vector<broker::PublishReceipt>> answer =
      Publish({topics_[3], topics_[1], topics_[3]});
  ASSERT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(answer.status().message(),
            absl::StrCat("the request's messages fall in shards 1 (topic \"",
                         topics_[1], "\") and 3 (topic \"", topics_[3],
                         "\") of this cluster's 4: a publish is "
                         "all-or-nothing within one shard only; send each "
                         "shard's messages in a request of their own (client "
                         "libraries split batches by shard)"));
  // The shard count, for the hourglass-shards trailer; no primary.
  EXPECT_EQ(api::PrimaryOf(answer.status()), (api::Primary{.shard_count = 4}));
  EXPECT_THAT(Calls(), ElementsAre(IsEmpty(), IsEmpty(), IsEmpty(), IsEmpty()));
}

TEST_F(ShardRouterTest, ConsumerCallsReachTheShardWhoseEngineGaveTheId) {
  const broker::ConsumerId on_1 = Subscribe(topics_[1]);
  const broker::ConsumerId on_3 = Subscribe(topics_[3]);
  EXPECT_NE(on_1, on_3);  // Both engines gave id 7.
  const std::string_view ids[] = {"m1"};
  router_->Ack(on_3, ids);
  router_->Nack(on_1, "m2", absl::Seconds(1));
  router_->Written(on_3, 2, 100);
  router_->Unsubscribe(on_1);
  // An id of a shard this router does not have is ignored.
  router_->Ack(on_1 | (uint64_t{kShards + 1} << PrimaryGate::kGateIdBits), ids);
  EXPECT_THAT(
      Calls(),
      ElementsAre(
          IsEmpty(),
          ElementsAre("subscribe " + topics_[1], "nack 7 m2", "unsubscribe 7"),
          IsEmpty(),
          ElementsAre("subscribe " + topics_[3], "ack 7 m1", "written 7 2")));
  EXPECT_EQ(router_->Split(on_3)->shard, 3);
}

TEST_F(ShardRouterTest, AConsumerIdOfAnEngineSinceReplacedIsIgnored) {
  const broker::ConsumerId old = Subscribe(topics_[0]);
  gates_[0]->Close(absl::UnavailableError("stepped down"));
  FakeEngine next;
  gates_[0]->Open(&next);
  const std::string_view ids[] = {"m1"};
  router_->Ack(old, ids);
  EXPECT_THAT(next.calls(), IsEmpty());
  gates_[0]->Close(absl::UnavailableError("done"));
}

TEST_F(ShardRouterTest, ARefusalKeepsThePrimaryItNames) {
  gates_[2]->Close(api::WithPrimary(absl::UnavailableError("not primary"),
                                    {"10.0.0.2:7070", 5}));
  absl::Status answer;
  router_->Cancel(topics_[2], "c", [&](absl::Status s) { answer = s; });
  EXPECT_EQ(answer.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(answer.message(), "not primary");
  EXPECT_EQ(api::PrimaryOf(answer), (api::Primary{"10.0.0.2:7070", 5}));
  // The other shards still serve.
  router_->Cancel(topics_[1], "c",
                  [](absl::Status s) { EXPECT_TRUE(s.ok()) << s; });
}

// The topics' names in `stats`, or the error.
absl::StatusOr<std::vector<std::string>> Names(
    const absl::StatusOr<std::vector<broker::TopicStats>>& stats) {
  if (!stats.ok()) return stats.status();
  std::vector<std::string> names;
  for (const broker::TopicStats& t : *stats) names.push_back(t.topic);
  return names;
}

TEST_F(ShardRouterTest, StatsOfEveryTopicGatherEveryShardHereAndFromPrimaries) {
  // Shards 1 and 2 have their primary at node-b, which answers for both in
  // one call.
  for (int shard : {1, 2}) {
    gates_[shard]->Close(api::WithPrimary(absl::UnavailableError("not primary"),
                                          {"node-b:1", 1}));
  }
  absl::StatusOr<std::vector<broker::TopicStats>> stats;
  router_->Stats(std::nullopt,
                 [&](absl::StatusOr<std::vector<broker::TopicStats>> s) {
                   stats = std::move(s);
                 });
  std::vector<std::string> expected = {topics_[0], topics_[3], "b-topic"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Names(stats).value_or(std::vector<std::string>{}), expected)
      << stats.status();
  EXPECT_THAT(remote_.asked(), ElementsAre("node-b:1 1,2"));

  // A primary that fails the call fails the whole: every shard or none.
  remote_.Fail(absl::UnavailableError("node-b is not the primary of 2"));
  router_->Stats(std::nullopt,
                 [&](absl::StatusOr<std::vector<broker::TopicStats>> s) {
                   stats = std::move(s);
                 });
  EXPECT_EQ(stats.status(),
            absl::UnavailableError("node-b is not the primary of 2"));

  // A shard whose primary is not known (a failover under way): its
  // refusal, and nobody is asked.
  gates_[3]->Close(absl::UnavailableError("shard 3's primary is gone"));
  router_->Stats(std::nullopt,
                 [&](absl::StatusOr<std::vector<broker::TopicStats>> s) {
                   stats = std::move(s);
                 });
  EXPECT_EQ(stats.status(),
            absl::UnavailableError("shard 3's primary is gone"));
  EXPECT_EQ(remote_.asked().size(), 2u);
}

TEST_F(ShardRouterTest, LocalStatsAnswerOnlyForShardsThisNodeIsPrimaryOf) {
  absl::StatusOr<std::vector<broker::TopicStats>> stats;
  auto keep = [&](absl::StatusOr<std::vector<broker::TopicStats>> s) {
    stats = std::move(s);
  };
  router_->LocalStats({3, 0}, keep);
  std::vector<std::string> expected = {topics_[0], topics_[3]};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Names(stats).value_or(std::vector<std::string>{}), expected);
  gates_[0]->Close(absl::UnavailableError("not the primary of shard 0"));
  router_->LocalStats({3, 0}, keep);
  EXPECT_EQ(stats.status(),
            absl::UnavailableError("not the primary of shard 0"));
  router_->LocalStats({kShards}, keep);
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(remote_.asked(), IsEmpty());
}

// The snapshot in `dir`: its manifest and its shards' directories.
std::vector<std::string> SnapshotFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    files.push_back(std::filesystem::relative(entry.path(), dir).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST_F(ShardRouterTest, ASnapshotOfManyShardsTakesEachFromItsPrimary) {
  // Shards 1 and 3 have their primary at node-b.
  for (int shard : {1, 3}) {
    gates_[shard]->Close(api::WithPrimary(absl::UnavailableError("not primary"),
                                          {"node-b:1", 1}));
  }
  testing::TempDir tmp;
  const std::string dir = tmp.path() + "/snap";
  absl::StatusOr<broker::SnapshotInfo> info;
  router_->CreateSnapshot(dir, [&](absl::StatusOr<broker::SnapshotInfo> i) {
    info = std::move(i);
  });
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->dir, dir);
  EXPECT_EQ(info->shards, kShards);
  EXPECT_EQ(info->files, 1u + 2 + 1 + 2);
  EXPECT_EQ(info->bytes, 100u + 50 + 100 + 50);
  EXPECT_EQ(info->store_id, "");
  EXPECT_THAT(
      Calls(),
      ElementsAre(ElementsAre("snapshot " + dir + "/shards/0"), IsEmpty(),
                  ElementsAre("snapshot " + dir + "/shards/2"), IsEmpty()));
  EXPECT_THAT(remote_.asked(),
              ElementsAre("node-b:1 checkpoint 1", "node-b:1 checkpoint 3"));
  EXPECT_THAT(SnapshotFiles(dir),
              ElementsAre("CLUSTER_SNAPSHOT", "shards", "shards/0", "shards/1",
                          "shards/2", "shards/3"));
  std::ifstream manifest(dir + "/CLUSTER_SNAPSHOT");
  std::stringstream text;
  text << manifest.rdbuf();
  EXPECT_EQ(text.str(), "hourglass cluster snapshot\nshards 4\n");

  // The directory must be new.
  router_->CreateSnapshot(dir, [&](absl::StatusOr<broker::SnapshotInfo> i) {
    info = std::move(i);
  });
  EXPECT_EQ(info.status().code(), absl::StatusCode::kAlreadyExists);
  router_->CreateSnapshot(
      "relative/snap",
      [&](absl::StatusOr<broker::SnapshotInfo> i) { info = std::move(i); });
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  router_->CreateSnapshot(
      tmp.path() + "/missing/snap",
      [&](absl::StatusOr<broker::SnapshotInfo> i) { info = std::move(i); });
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ShardRouterTest, ASnapshotThatAShardFailsLeavesNothing) {
  gates_[2]->Close(
      api::WithPrimary(absl::UnavailableError("not primary"), {"node-b:1", 1}));
  remote_.Fail(absl::UnavailableError("node-b is not the primary of 2"));
  testing::TempDir tmp;
  const std::string dir = tmp.path() + "/snap";
  absl::StatusOr<broker::SnapshotInfo> info;
  router_->CreateSnapshot(dir, [&](absl::StatusOr<broker::SnapshotInfo> i) {
    info = std::move(i);
  });
  EXPECT_EQ(info.status(), absl::UnavailableError(
                               "shard 2 of 4: node-b is not the primary of 2"));
  EXPECT_FALSE(std::filesystem::exists(dir));

  // A shard whose primary is not known (a failover under way): its refusal.
  gates_[2]->Close(absl::UnavailableError("shard 2's primary is gone"));
  router_->CreateSnapshot(dir, [&](absl::StatusOr<broker::SnapshotInfo> i) {
    info = std::move(i);
  });
  EXPECT_EQ(info.status(),
            absl::UnavailableError("shard 2 of 4: shard 2's primary is gone"));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(RedirectTest, ThePrimaryTravelsFromStatusToDetailsAndBack) {
  for (const api::Primary& primary :
       {api::Primary{"127.0.0.1:7071", 12}, api::Primary{"[::1]:7071", 3, 16},
        api::Primary{.shard_count = 4}}) {
    SCOPED_TRACE(primary.address);
    const absl::Status status =
        api::WithPrimary(absl::UnavailableError("elsewhere"), primary);
    EXPECT_EQ(api::PrimaryOf(status), primary);
    EXPECT_EQ(api::PrimaryOfDetails(api::RedirectDetails(primary)), primary);
  }
  EXPECT_EQ(api::PrimaryOf(absl::UnavailableError("elsewhere")), std::nullopt);
  EXPECT_EQ(api::PrimaryOfDetails("some other details"), std::nullopt);
  // Neither a primary nor a shard count: nothing to say.
  EXPECT_EQ(api::PrimaryOfDetails("hourglass-redirect:0 0 "), std::nullopt);
}

}  // namespace
}  // namespace hourglass::node
