// Cluster membership and the controller's shard assignments, against a
// real etcd on loopback ports.

#include "cluster/member.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "cluster/records.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/etcd_test.h"

namespace hourglass::cluster {

// Records show as their JSON in failures (found by argument lookup).
void PrintTo(const ShardRecord& r, std::ostream* out) {
  *out << EncodeShardRecord(r);
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kPatience = absl::Seconds(20);
constexpr char kCluster[] = "test";

ShardRecord Record(int64_t epoch, std::string primary,
                   std::vector<std::string> replicas,
                   std::vector<std::string> isr) {
  return ShardRecord{epoch, std::move(primary), std::move(replicas),
                     std::move(isr)};
}

class MemberTest : public testing::EtcdTest {
 protected:
  MemberOptions Options(const std::string& id) {
    MemberOptions options;
    options.cluster = kCluster;
    options.node_id = id;
    options.address = id + ".example:7070";
    options.lease_ttl = absl::Seconds(2);
    options.position_wait = absl::Seconds(30);
    options.retry_delay = absl::Milliseconds(100);
    return options;
  }

  // Joins node `id`, whose copy of every shard ends where SetPosition said
  // (none until then).
  std::unique_ptr<Member> Join(const std::string& id) {
    return Join(Options(id));
  }
  std::unique_ptr<Member> Join(MemberOptions options) {
    const std::string id = options.node_id;
    Member::Callbacks callbacks;
    callbacks.position = [this, id](int) -> std::optional<LogEnd> {
      absl::MutexLock lock(&mu_);
      auto it = positions_.find(id);
      if (it == positions_.end()) return std::nullopt;
      return LogEnd{1, it->second};  // Entries of epoch 1, the shard's first.
    };
    absl::StatusOr<std::unique_ptr<Member>> member =
        Member::Join(*client_, std::move(options), std::move(callbacks));
    EXPECT_TRUE(member.ok()) << member.status();
    return member.ok() ? *std::move(member) : nullptr;
  }

  void SetPosition(const std::string& id, int64_t index) {
    absl::MutexLock lock(&mu_);
    positions_[id] = index;
  }

  // Shard 0's record once `member` sees it equal `wanted` (or the last one
  // it saw when the wait times out).
  std::optional<ShardRecord> AwaitShard(const Member& member,
                                        const ShardRecord& wanted) {
    member.AwaitView(
        [&](const ClusterView& view) {
          auto it = view.shards.find(0);
          return it != view.shards.end() && it->second.record == wanted;
        },
        absl::Now() + kPatience);
    const ClusterView view = member.view();
    auto it = view.shards.find(0);
    if (it == view.shards.end()) return std::nullopt;
    return it->second.record;
  }

  absl::Mutex mu_;
  std::map<std::string, int64_t> positions_ ABSL_GUARDED_BY(mu_);
};

TEST_F(MemberTest, JoinRefusesBadOptions) {
  MemberOptions no_id = Options("a");
  no_id.node_id = "";
  EXPECT_EQ(Member::Join(*client_, no_id, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  MemberOptions slash = Options("a");
  slash.node_id = "a/b";
  EXPECT_EQ(Member::Join(*client_, slash, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  MemberOptions no_address = Options("a");
  no_address.address = "";
  EXPECT_EQ(Member::Join(*client_, no_address, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  MemberOptions no_replicas = Options("a");
  no_replicas.replication_factor = 0;
  EXPECT_EQ(Member::Join(*client_, no_replicas, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(MemberTest, TheControllerCreatesTheShardOnceEnoughNodesJoined) {
  std::unique_ptr<Member> a = Join("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(
      a->AwaitView([](const ClusterView& v) { return v.controller == "a"; },
                   absl::Now() + kPatience));
  std::unique_ptr<Member> b = Join("b");
  ASSERT_NE(b, nullptr);
  // Two of three: no shard yet, but each sees both nodes and a controller.
  ASSERT_TRUE(b->AwaitView(
      [](const ClusterView& v) {
        return v.nodes.size() == 2 && v.controller == "a";
      },
      absl::Now() + kPatience));
  EXPECT_TRUE(a->view().shards.empty());
  EXPECT_EQ(a->view().controller, "a");
  EXPECT_TRUE(a->controlling());
  EXPECT_FALSE(b->controlling());

  std::unique_ptr<Member> c = Join("c");
  ASSERT_NE(c, nullptr);
  const ShardRecord created = Record(1, "a", {"a", "b", "c"}, {"a", "b", "c"});
  for (const Member* m : {a.get(), b.get(), c.get()}) {
    EXPECT_EQ(AwaitShard(*m, created), created) << m->node_id();
  }
  const ClusterView view = c->view();
  EXPECT_EQ(view.nodes.at("b").address, "b.example:7070");
  EXPECT_EQ(view.controller, "a");

  // In etcd, readably.
  absl::StatusOr<GetResult> shard = client_->Get(ShardKey(kCluster, 0));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_TRUE(shard->kv.has_value());
  EXPECT_EQ(shard->kv->value,
            R"({"epoch":"1","primary":"a","replicas":["a","b","c"],)"
            R"("isr":["a","b","c"]})");
  absl::StatusOr<GetResult> node = client_->Get(NodeKey(kCluster, "b"));
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(node->kv.has_value());
  EXPECT_EQ(node->kv->value, R"({"address":"b.example:7070"})");
  EXPECT_EQ(node->kv->lease, b->lease());
}

TEST_F(MemberTest, ASecondNodeWithTheSameIdIsRefused) {
  std::unique_ptr<Member> a = Join("a");
  ASSERT_NE(a, nullptr);
  MemberOptions again = Options("a");
  again.address = "elsewhere:7070";
  absl::StatusOr<std::unique_ptr<Member>> twin =
      Member::Join(*client_, again, {});
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(twin.status().message(),
              HasSubstr("--node_id=a is already a live member of cluster test "
                        "(at a.example:7070)"));
}

// The first member fixes the shard count; a node given another is refused
// before it joins (it would send topics to other shards than the rest).
TEST_F(MemberTest, ANodeGivenAnotherShardCountThanTheClustersIsRefused) {
  MemberOptions first = Options("a");
  first.shards = 4;
  std::unique_ptr<Member> a = Join(first);
  ASSERT_NE(a, nullptr);
  MemberOptions other = Options("b");
  other.shards = 16;
  absl::StatusOr<std::unique_ptr<Member>> refused =
      Member::Join(*client_, other, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "cluster test has 4 shards, fixed when it was created; this node "
            "was started with --shards=16: give it --shards=4, or no "
            "--shards to take the cluster's");
  // b wrote nothing: a sees itself alone.
  EXPECT_TRUE(a->AwaitView(
      [](const ClusterView& view) { return view.nodes.contains("a"); },
      absl::Now() + kPatience));
  EXPECT_FALSE(a->view().nodes.contains("b"));
  // The same count joins, after the first has gone too: the count stays.
  a.reset();
  MemberOptions same = Options("b");
  same.shards = 4;
  EXPECT_NE(Join(same), nullptr);
}

TEST_F(MemberTest, ANodeRestartedAfterACrashTakesItsIdBackOnceItsLeaseEnds) {
  std::unique_ptr<Member> a = Join("a");
  ASSERT_NE(a, nullptr);
  a->Abandon();
  // Waits out the crashed lease (2 s) rather than refusing.
  std::unique_ptr<Member> again = Join("a");
  ASSERT_NE(again, nullptr);
  absl::StatusOr<GetResult> node = client_->Get(NodeKey(kCluster, "a"));
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(node->kv.has_value());
  EXPECT_EQ(node->kv->lease, again->lease());
}

// etcd ended the lease (an outage longer than its TTL, a paused process):
// the member joins again by itself, under a new lease, and the node stays.
TEST_F(MemberTest, AMemberWhoseLeaseEtcdEndedJoinsAgainUnderANewOne) {
  absl::Notification lost;
  absl::Status why;
  Member::Callbacks callbacks;
  callbacks.on_lost = [&](absl::Status status) {
    why = std::move(status);
    lost.Notify();
  };
  absl::StatusOr<std::unique_ptr<Member>> joined =
      Member::Join(*client_, Options("a"), std::move(callbacks));
  ASSERT_TRUE(joined.ok()) << joined.status();
  Member& a = **joined;
  const int64_t first = a.lease();
  ASSERT_TRUE(client_->RevokeLease(first).ok());
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(why.code(), absl::StatusCode::kNotFound) << why;
  // nodes/a again, under a lease of its own, and the controller again.
  ASSERT_TRUE(a.AwaitView(
      [&](const ClusterView& view) {
        return view.nodes.contains("a") && view.controller == "a";
      },
      absl::Now() + kPatience));
  const int64_t second = a.lease();
  EXPECT_NE(second, first);
  absl::StatusOr<GetResult> node = client_->Get(NodeKey(kCluster, "a"));
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(node->kv.has_value());
  EXPECT_EQ(node->kv->lease, second);
  // The controller key is a's again, under the new lease. (Member::
  // controlling() follows the election's own thread, which may learn of
  // its win just after the watch shows the key.)
  absl::StatusOr<GetResult> controller = client_->Get(ControllerKey(kCluster));
  ASSERT_TRUE(controller.ok()) << controller.status();
  ASSERT_TRUE(controller->kv.has_value());
  EXPECT_EQ(controller->kv->value, "a");
  EXPECT_EQ(controller->kv->lease, second);
}

TEST_F(MemberTest, APrimaryThatCrashesIsReplacedByTheMostAdvancedInSyncBackup) {
  std::unique_ptr<Member> a = Join("a");
  std::unique_ptr<Member> b = Join("b");
  std::unique_ptr<Member> c = Join("c");
  ASSERT_TRUE(a && b && c);
  const ShardRecord created = Record(1, "a", {"a", "b", "c"}, {"a", "b", "c"});
  ASSERT_EQ(AwaitShard(*b, created), created);
  SetPosition("b", 10);
  SetPosition("c", 12);

  // a is the primary and the controller: the controller moves to b or c
  // when a's lease ends, and it promotes c, which has more. b is in the new
  // in-sync set only because it reported too (a backup that does not is
  // left out, below). The reports themselves are withdrawn as soon as each
  // node sees c primary, so they are not looked for afterwards.
  a->Abandon();
  const ShardRecord promoted = Record(2, "c", {"c", "a", "b"}, {"c", "b"});
  EXPECT_EQ(AwaitShard(*b, promoted), promoted);
  EXPECT_EQ(AwaitShard(*c, promoted), promoted);
  EXPECT_FALSE(b->view().nodes.contains("a"));
}

TEST_F(MemberTest, ABackupThatDoesNotReportIsLeftOutOnceTheWaitIsOver) {
  std::vector<std::unique_ptr<Member>> members;
  for (const char* id : {"a", "b", "c"}) {
    MemberOptions options = Options(id);
    options.position_wait = absl::Seconds(1);
    members.push_back(Join(options));
    ASSERT_NE(members.back(), nullptr);
  }
  const ShardRecord created = Record(1, "a", {"a", "b", "c"}, {"a", "b", "c"});
  ASSERT_EQ(AwaitShard(*members[1], created), created);
  SetPosition("b", 10);  // c has no copy to report.
  members[0]->Abandon();
  // Alone in the in-sync set, below --min_insync: a and c held every
  // acknowledged write when they left it, and stay eligible.
  ShardRecord promoted = Record(2, "b", {"b", "a", "c"}, {"b"});
  promoted.eligible = {"a", "c"};
  EXPECT_EQ(AwaitShard(*members[2], promoted), promoted);
}

TEST_F(MemberTest, AGoneBackupIsReplacedByASpareNode) {
  std::unique_ptr<Member> a = Join("a");
  std::unique_ptr<Member> b = Join("b");
  std::unique_ptr<Member> c = Join("c");
  ASSERT_TRUE(a && b && c);
  const ShardRecord created = Record(1, "a", {"a", "b", "c"}, {"a", "b", "c"});
  ASSERT_EQ(AwaitShard(*a, created), created);
  std::unique_ptr<Member> d = Join("d");
  ASSERT_NE(d, nullptr);
  // A clean leave: c's key goes at once. Once the primary has taken it out
  // of the in-sync set (a gone copy in the set is never replaced: the
  // controller might need it), d takes its place, outside the set until it
  // has caught up.
  c.reset();
  absl::StatusOr<bool> shrunk = a->SetIsr(0, created, {"a", "b"});
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_TRUE(*shrunk);
  const ShardRecord replaced = Record(1, "a", {"a", "b", "d"}, {"a", "b"});
  EXPECT_EQ(AwaitShard(*d, replaced), replaced);
}

TEST_F(MemberTest, OnlyThePrimaryChangesTheInSyncSetAndOnlyAtItsEpoch) {
  std::unique_ptr<Member> a = Join("a");
  std::unique_ptr<Member> b = Join("b");
  std::unique_ptr<Member> c = Join("c");
  ASSERT_TRUE(a && b && c);
  const ShardRecord created = Record(1, "a", {"a", "b", "c"}, {"a", "b", "c"});
  ASSERT_EQ(AwaitShard(*a, created), created);
  ASSERT_EQ(AwaitShard(*b, created), created);

  EXPECT_EQ(b->SetIsr(0, created, {"b"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a->SetIsr(0, created, {"b", "a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Only replicas: a node the record does not name cannot be in sync.
  absl::StatusOr<bool> outsider = a->SetIsr(0, created, {"a", "x"});
  EXPECT_EQ(outsider.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outsider.status().message(),
              HasSubstr("the in-sync set of shard 0 can hold its replicas "
                        "only (a,b,c), not x"));
  absl::StatusOr<bool> shrunk = a->SetIsr(0, created, {"a", "b"});
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_TRUE(*shrunk);
  const ShardRecord smaller = Record(1, "a", {"a", "b", "c"}, {"a", "b"});
  EXPECT_EQ(AwaitShard(*c, smaller), smaller);
  ASSERT_EQ(AwaitShard(*a, smaller), smaller);
  // Decided on a record that has changed since (here the one before the
  // shrink, which would bring c back): not written.
  absl::StatusOr<bool> outdated = a->SetIsr(0, created, {"a", "b", "c"});
  ASSERT_TRUE(outdated.ok()) << outdated.status();
  EXPECT_FALSE(*outdated);
  // From a view that is no longer current, the write does not happen.
  ASSERT_TRUE(
      client_
          ->Put(ShardKey(kCluster, 0),
                EncodeShardRecord(Record(2, "b", {"b", "a", "c"}, {"b", "c"})))
          .ok());
  // a may or may not have seen the change yet: not written either way
  // (false from a stale view, FAILED_PRECONDITION from a current one).
  absl::StatusOr<bool> stale = a->SetIsr(0, smaller, {"a"});
  EXPECT_TRUE(stale.ok() ? !*stale
                         : stale.status().code() ==
                               absl::StatusCode::kFailedPrecondition)
      << stale.status();
  absl::StatusOr<GetResult> now = client_->Get(ShardKey(kCluster, 0));
  ASSERT_TRUE(now.ok() && now->kv.has_value());
  EXPECT_EQ(DecodeShardRecord(now->kv->value).value(),
            Record(2, "b", {"b", "a", "c"}, {"b", "c"}));
}

}  // namespace
}  // namespace hourglass::cluster
