// The web console's JSON API on a real cluster: etcd and three hourglassd
// (a, b, c) holding three shards, with tokens on. Every node's GET
// /api/v1/cluster lists the same nodes and shards (primary, replicas,
// in-sync set, and each backup's lag, asked of the primaries); a topic
// whose shard one node leads is listed, published to, found by id and
// changed through another node's API, which forwards those calls to the
// primary with the caller's token (the primary checks it by its own token
// file); bad input is refused where it arrives. Waits are conditions with
// deadlines, never sleeps.

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.pb.h"
#include "httplib.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/eventually.h"

namespace hourglass {
namespace {

namespace pb = google::protobuf;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr int kShards = 3;
// Known to every node.
constexpr char kAdminToken[] = "admin-token-of-the-console-cluster-test";
// Known to b and c only: a's answers to calls forwarded with it are a's
// own refusals.
constexpr char kLocalToken[] = "token-that-node-a-does-not-know";

template <typename Message>
Message Parse(const std::string& json) {
  Message message;
  const auto status = pb::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.message().ToString() << " in " << json;
  return message;
}

// The strings of a JSON array.
std::vector<std::string> Strings(const pb::Value& list) {
  std::vector<std::string> out;
  for (const pb::Value& v : list.list_value().values()) {
    out.push_back(v.string_value());
  }
  return out;
}

class ConsoleClusterTest : public testing::ClusterFixture {
 protected:
  void SetUp() override {
    ClusterFixture::SetUp();
    const std::string everyone = dir_.path() + "/tokens-everyone.txt";
    std::ofstream(everyone) << kAdminToken << " admin,produce,consume\n";
    const std::string local = dir_.path() + "/tokens-local.txt";
    std::ofstream(local) << kAdminToken << " admin,produce,consume\n"
                         << kLocalToken << " admin,produce\n";
    ASSERT_EQ(chmod(everyone.c_str(), 0600), 0);
    ASSERT_EQ(chmod(local.c_str(), 0600), 0);
    token_ = kAdminToken;  // The fixture's gRPC calls.
    StartNodes({"a"}, {"--shards=3", "--auth_tokens=" + everyone});
    StartNodes({"b", "c"}, {"--shards=3", "--auth_tokens=" + local});
    for (const std::string id : {"a", "b", "c"}) {
      const int port = nodes_.at(id)->metrics_port();
      ASSERT_NE(port, 0) << id;
      web_[id] = std::make_unique<httplib::Client>("127.0.0.1", port);
      web_[id]->set_read_timeout(30, 0);
    }
  }

  httplib::Headers Auth(const std::string& token) {
    return {{"Authorization", absl::StrCat("Bearer ", token)}};
  }
  httplib::Result Get(const std::string& node, const std::string& path,
                      const std::string& token = kAdminToken) {
    return web_.at(node)->Get(path.c_str(), Auth(token));
  }
  httplib::Result Post(const std::string& node, const std::string& path,
                       const std::string& body,
                       const std::string& token = kAdminToken) {
    return web_.at(node)->Post(path.c_str(), Auth(token), body,
                               "application/json");
  }

  // `node`'s GET /api/v1/cluster, parsed; an empty Struct if it did not
  // answer 200.
  pb::Struct ClusterOf(const std::string& node) {
    httplib::Result result = Get(node, "/api/v1/cluster");
    if (!result || result->status != 200) return {};
    return Parse<pb::Struct>(result->body);
  }

  // Whether `answer` shows all kShards shards, each with a primary, all
  // three nodes in its in-sync set, and the lag of both its backups.
  static bool Settled(const pb::Struct& answer) {
    if (!answer.fields().contains("shards") ||
        !answer.fields().contains("lagErrors") ||
        answer.fields().at("lagErrors").list_value().values_size() != 0) {
      return false;
    }
    const auto& shards = answer.fields().at("shards").list_value().values();
    if (shards.size() != kShards) return false;
    for (const pb::Value& shard : shards) {
      const auto& f = shard.struct_value().fields();
      if (f.at("primary").string_value().empty() ||
          f.at("isr").list_value().values_size() != 3 ||
          f.at("lag").list_value().values_size() != 2) {
        return false;
      }
    }
    return true;
  }

  std::map<std::string, std::unique_ptr<httplib::Client>> web_;
};

TEST_F(ConsoleClusterTest, EveryNodeShowsTheSameShardsAndServesEveryTopic) {
  // Once the shards are made and in sync, and each primary serves its
  // shard, every node answers the same map.
  const std::vector<std::string> topics = testing::TopicPerShard(kShards);
  std::map<std::string, pb::Struct> answers;
  ASSERT_TRUE(testing::Eventually(
      [&] {
        for (const std::string id : {"a", "b", "c"}) {
          answers[id] = ClusterOf(id);
          if (!Settled(answers[id])) return false;
        }
        for (const pb::Value& shard :
             answers["a"].fields().at("shards").list_value().values()) {
          const auto& s = shard.struct_value().fields();
          httplib::Result serves =
              Get(s.at("primary").string_value(),
                  absl::StrCat(
                      "/api/v1/stats?topic=",
                      topics[static_cast<int>(s.at("shard").number_value())]));
          // 404 for a topic it does not hold yet: the shard's engine
          // answered; 503 while it does not serve the shard.
          if (!serves || (serves->status != 200 && serves->status != 404)) {
            return false;
          }
        }
        return true;
      },
      testing::kClusterPatience))
      << answers["a"].DebugString();
  std::map<int, std::string> primary_of;  // By shard.
  for (const std::string id : {"a", "b", "c"}) {
    const auto& f = answers[id].fields();
    EXPECT_EQ(f.at("mode").string_value(), "cluster");
    EXPECT_EQ(f.at("node").string_value(), id);
    EXPECT_EQ(f.at("cluster").string_value(), "hourglass");
    EXPECT_EQ(f.at("hash").string_value(), "fnv1a-64");
    EXPECT_EQ(f.at("shardCount").number_value(), kShards);
    std::vector<std::string> ids;
    for (const pb::Value& node : f.at("nodes").list_value().values()) {
      const auto& n = node.struct_value().fields();
      ids.push_back(n.at("id").string_value());
      EXPECT_EQ(n.at("address").string_value(),
                nodes_.at(n.at("id").string_value())->address());
      EXPECT_TRUE(n.at("alive").bool_value());
      EXPECT_FALSE(n.at("draining").bool_value());
      EXPECT_EQ(n.at("controller").bool_value(),
                n.at("id").string_value() == f.at("controller").string_value());
    }
    EXPECT_THAT(ids, ElementsAre("a", "b", "c"));
    int number = 0;
    for (const pb::Value& shard : f.at("shards").list_value().values()) {
      const auto& s = shard.struct_value().fields();
      EXPECT_EQ(s.at("shard").number_value(), number);
      const std::string primary = s.at("primary").string_value();
      if (!primary_of.contains(number)) primary_of[number] = primary;
      EXPECT_EQ(primary, primary_of[number]) << "shard " << number;
      EXPECT_EQ(s.at("epoch").string_value(), "1");
      EXPECT_THAT(Strings(s.at("replicas")),
                  UnorderedElementsAre("a", "b", "c"));
      EXPECT_EQ(Strings(s.at("replicas")).front(), primary);
      EXPECT_THAT(Strings(s.at("isr")), UnorderedElementsAre("a", "b", "c"));
      std::set<std::string> backups;
      for (const pb::Value& lag : s.at("lag").list_value().values()) {
        backups.insert(lag.struct_value().fields().at("node").string_value());
      }
      std::set<std::string> expected = {"a", "b", "c"};
      expected.erase(primary);
      EXPECT_EQ(backups, expected) << "shard " << number;
      ++number;
    }
  }
  // Placement rotates primaries: each node leads one shard.
  std::set<std::string> primaries;
  for (const auto& [shard, id] : primary_of) primaries.insert(id);
  ASSERT_EQ(primaries, (std::set<std::string>{"a", "b", "c"}));

  // A topic of the shard a leads, served through b's and c's API.
  std::string topic;
  for (const auto& [shard, id] : primary_of) {
    if (id == "a") topic = topics[shard];
  }
  const std::string base = absl::StrCat("/api/v1/topics/", topic);
  httplib::Result published =
      Post("b", base + "/publish",
           R"({"payload":"from b","delay":"1h","id":"m-1",)"
           R"("headers":{"via":"b"}})");
  ASSERT_TRUE(published);
  ASSERT_EQ(published->status, 200) << published->body;
  const v1::Receipt receipt = Parse<v1::Receipt>(published->body);
  EXPECT_EQ(receipt.id(), "m-1");
  EXPECT_FALSE(receipt.duplicate());
  for (const std::string id : {"a", "b", "c"}) {
    httplib::Result found = Get(id, base + "/messages/m-1");
    ASSERT_TRUE(found) << id;
    ASSERT_EQ(found->status, 200) << id << ": " << found->body;
    const v1::MessageInfo m = Parse<v1::MessageInfo>(found->body);
    EXPECT_EQ(m.payload_preview(), "from b") << id;
    EXPECT_EQ(m.headers().at("via"), "b") << id;
    EXPECT_EQ(m.deliver_at().seconds(), receipt.deliver_at().seconds()) << id;
    EXPECT_EQ(m.state(), v1::MESSAGE_STATE_SCHEDULED) << id;

    // Listed by every node: the overview's topics come from every primary.
    httplib::Result listed = Get(id, "/api/v1/topics");
    ASSERT_TRUE(listed) << id;
    ASSERT_EQ(listed->status, 200) << id << ": " << listed->body;
    const auto list = Parse<v1::ListTopicsResponse>(listed->body);
    std::vector<std::string> names;
    for (const v1::Topic& t : list.topics()) names.push_back(t.name());
    EXPECT_THAT(names, ElementsAre(topic)) << id;
    httplib::Result stats =
        Get(id, absl::StrCat("/api/v1/stats?topic=", topic));
    ASSERT_TRUE(stats) << id;
    ASSERT_EQ(stats->status, 200) << id << ": " << stats->body;
    EXPECT_EQ(Parse<v1::GetStatsResponse>(stats->body).topics(0).scheduled(),
              1u)
        << id;
  }

  // The same id again, through c: the primary's first receipt.
  httplib::Result again =
      Post("c", base + "/publish", R"({"payload":"x","id":"m-1"})");
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_TRUE(Parse<v1::Receipt>(again->body).duplicate());

  // Bad input is refused where it arrives, with the reason.
  httplib::Result bad =
      Post("b", base + "/publish", R"({"payload":"x","delay":"soon"})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body,
            R"({"code":"INVALID_ARGUMENT","message":"delay \"soon\" is not )"
            R"(a duration such as \"250ms\", \"10s\" or \"1h30m\""})");
  httplib::Result negative =
      Post("c", base + "/publish", R"({"payload":"x","delay":"-1s"})");
  ASSERT_TRUE(negative);
  EXPECT_EQ(negative->status, 400);
  EXPECT_EQ(negative->body,
            R"({"code":"INVALID_ARGUMENT","message":"message 0: delay -1s )"
            R"(is negative"})");

  // The primary checks the caller's token itself: b knows kLocalToken, a
  // does not, so a refuses what b forwards with it.
  httplib::Result stranger = Get("b", base + "/messages/m-1", kLocalToken);
  ASSERT_TRUE(stranger);
  EXPECT_EQ(stranger->status, 401);
  EXPECT_EQ(stranger->body,
            R"({"code":"UNAUTHENTICATED","message":"unknown token"})");

  // Cancelled through c: gone everywhere, with the primary's NOT_FOUND.
  httplib::Result cancelled = Post("c", base + "/messages/m-1/cancel", "{}");
  ASSERT_TRUE(cancelled);
  ASSERT_EQ(cancelled->status, 200) << cancelled->body;
  for (const std::string id : {"a", "b"}) {
    httplib::Result gone = Get(id, base + "/messages/m-1");
    ASSERT_TRUE(gone) << id;
    EXPECT_EQ(gone->status, 404) << id << ": " << gone->body;
  }
  httplib::Result here = Get("a", base + "/messages/m-1");
  httplib::Result there = Get("b", base + "/messages/m-1");
  ASSERT_TRUE(here);
  ASSERT_TRUE(there);
  EXPECT_EQ(there->body, here->body);
}

}  // namespace
}  // namespace hourglass
