// EtcdClient, Watch and LeaseKeeper against a real etcd on loopback ports.

#include "cluster/etcd_client.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cluster/keys.h"
#include "cluster/lease_keeper.h"
#include "cluster/watch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd_server.h"

namespace hourglass::cluster {
namespace {

using ::hourglass::testing::EtcdServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// How long a test waits for what etcd does by itself (a lease expiring, a
// stream noticing etcd is gone) before it fails.
constexpr absl::Duration kPatience = absl::Seconds(20);

KeyValue Kv(std::string key, std::string value, int64_t create_revision,
            int64_t mod_revision, int64_t version, int64_t lease = 0) {
  return KeyValue{std::move(key), std::move(value), create_revision,
                  mod_revision,   version,          lease};
}

WatchEvent Put(KeyValue kv) { return WatchEvent{WatchEvent::Type::kPut, kv}; }
WatchEvent Deleted(std::string key, int64_t revision) {
  KeyValue kv;
  kv.key = std::move(key);
  kv.mod_revision = revision;
  return WatchEvent{WatchEvent::Type::kDelete, kv};
}

MATCHER_P(EventIs, expected, "") {
  return arg.type == expected.type && arg.kv == expected.kv &&
         arg.prev == expected.prev;
}

// What a watch reported, for a test to wait on.
class EventLog {
 public:
  Watch::Callbacks Callbacks() {
    Watch::Callbacks callbacks;
    callbacks.on_event = [this](const WatchEvent& event) {
      absl::MutexLock lock(&mu_);
      events_.push_back(event);
    };
    callbacks.on_end = [this](absl::Status status) {
      absl::MutexLock lock(&mu_);
      end_ = std::move(status);
    };
    return callbacks;
  }

  // The events once there are at least `count`, or all of them when the
  // deadline passes first.
  std::vector<WatchEvent> Await(size_t count,
                                absl::Duration timeout = kPatience) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return events_.size() >= count;
    };
    mu_.AwaitWithDeadline(absl::Condition(&enough), absl::Now() + timeout);
    return events_;
  }

  std::optional<absl::Status> end() {
    absl::MutexLock lock(&mu_);
    return end_;
  }

 private:
  absl::Mutex mu_;
  std::vector<WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> end_ ABSL_GUARDED_BY(mu_);
};

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EtcdServer>> server = EtcdServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = NewClient({server_->endpoint()});
  }

  std::unique_ptr<EtcdClient> NewClient(
      std::vector<std::string> endpoints,
      absl::Duration call_timeout = absl::Seconds(5)) {
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Create(EtcdOptions{std::move(endpoints), call_timeout});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The store's revision now.
  int64_t Revision() {
    absl::StatusOr<GetResult> read = client_->Get("/revision-probe");
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? read->revision : -1;
  }

  std::unique_ptr<EtcdServer> server_;
  std::unique_ptr<EtcdClient> client_;
};

TEST(ParseEtcdEndpointsTest, ReadsCommaSeparatedHostPorts) {
  absl::StatusOr<std::vector<std::string>> endpoints =
      ParseEtcdEndpoints("127.0.0.1:2379, etcd-1:2379 ,[::1]:12379");
  ASSERT_TRUE(endpoints.ok()) << endpoints.status();
  EXPECT_THAT(*endpoints,
              ElementsAre("127.0.0.1:2379", "etcd-1:2379", "[::1]:12379"));
}

TEST(ParseEtcdEndpointsTest, RefusesWhatIsNotHostPort) {
  for (const char* flag : {"", "etcd", "etcd:", ":2379", "etcd:0", "etcd:65536",
                           "etcd:x", "a:1,,b:2"}) {
    absl::StatusOr<std::vector<std::string>> endpoints =
        ParseEtcdEndpoints(flag);
    EXPECT_EQ(endpoints.status().code(), absl::StatusCode::kInvalidArgument)
        << flag;
  }
  EXPECT_THAT(ParseEtcdEndpoints("a:1,b").status().message(),
              HasSubstr("\"b\" is not host:port"));
}

TEST(PrefixRangeEndTest, IncrementsTheLastByteThatCanBe) {
  EXPECT_EQ(PrefixRangeEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixRangeEnd("a\xff"), "b");
  EXPECT_EQ(PrefixRangeEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(PrefixRangeEnd(""), std::string(1, '\0'));
}

TEST(KeysTest, LiveUnderTheClustersPrefix) {
  EXPECT_EQ(ClusterPrefix("prod"), "/hourglass/prod/");
  EXPECT_EQ(ControllerKey("prod"), "/hourglass/prod/controller");
  EXPECT_EQ(NodesPrefix("prod"), "/hourglass/prod/nodes/");
  EXPECT_EQ(NodeKey("prod", "node-1"), "/hourglass/prod/nodes/node-1");
  EXPECT_EQ(ShardKey("prod", 7), "/hourglass/prod/shards/7");
}

TEST(KeysTest, NamesHoldNoSlash) {
  EXPECT_TRUE(ValidateName("--cluster", "hourglass").ok());
  EXPECT_TRUE(ValidateName("--node_id", "node-1.example_2").ok());
  EXPECT_EQ(ValidateName("--cluster", "").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateName("--cluster", std::string(201, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status slash = ValidateName("--node_id", "a/b");
  EXPECT_EQ(slash.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slash.message(), HasSubstr("--node_id: \"a/b\""));
}

TEST(EtcdClientCreateTest, NeedsAnEndpointAndATimeout) {
  EXPECT_EQ(EtcdClient::Create(EtcdOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      EtcdClient::Create(EtcdOptions{{"127.0.0.1:1"}, absl::ZeroDuration()})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(EtcdClientCreateTest, RefusesATlsFileItCannotRead) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(
      EtcdOptions{.endpoints = {"127.0.0.1:1"},
                  .tls = {.ca_file = "/nonexistent/etcd-ca.pem"}});
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(),
              HasSubstr("tls.ca_file: cannot read "
                        "\"/nonexistent/etcd-ca.pem\": "));
  client = EtcdClient::Create(
      EtcdOptions{.endpoints = {"127.0.0.1:1"},
                  .tls = {.cert_file = "/nonexistent/etcd-client.pem"}});
  EXPECT_EQ(client.status(), absl::InvalidArgumentError(
                                 "tls.cert_file and tls.key_file go together"));
}

TEST_F(EtcdClientTest, PutThenGetReturnsTheValueWithItsRevisions) {
  absl::StatusOr<int64_t> first = client_->Put("/t/k", "v1");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<GetResult> read = client_->Get("/t/k");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, Kv("/t/k", "v1", *first, *first, 1));
  EXPECT_EQ(read->revision, *first);

  absl::StatusOr<int64_t> second = client_->Put("/t/k", "v2");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *first + 1);
  read = client_->Get("/t/k");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, Kv("/t/k", "v2", *first, *second, 2));
  EXPECT_EQ(read->revision, *second);
}

TEST_F(EtcdClientTest, GetOfAnAbsentKeyFindsNothingAtTheCurrentRevision) {
  absl::StatusOr<int64_t> put = client_->Put("/t/other", "x");
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<GetResult> read = client_->Get("/t/absent");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, std::nullopt);
  EXPECT_EQ(read->revision, *put);
}

TEST_F(EtcdClientTest, GetPrefixReturnsItsKeysInKeyOrder) {
  absl::StatusOr<int64_t> b = client_->Put("/t/p/b", "2");
  absl::StatusOr<int64_t> a = client_->Put("/t/p/a", "1");
  absl::StatusOr<int64_t> outside = client_->Put("/t/q", "3");
  ASSERT_TRUE(b.ok() && a.ok() && outside.ok());
  absl::StatusOr<RangeResult> range = client_->GetPrefix("/t/p/");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_THAT(range->kvs, ElementsAre(Kv("/t/p/a", "1", *a, *a, 1),
                                      Kv("/t/p/b", "2", *b, *b, 1)));
  EXPECT_EQ(range->revision, *outside);
}

TEST_F(EtcdClientTest, DeleteRemovesTheKeyOnce) {
  absl::StatusOr<int64_t> put = client_->Put("/t/k", "v");
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<DeleteResult> deleted = client_->Delete("/t/k");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(deleted->deleted);
  EXPECT_EQ(deleted->revision, *put + 1);
  absl::StatusOr<GetResult> read = client_->Get("/t/k");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, std::nullopt);

  deleted = client_->Delete("/t/k");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_FALSE(deleted->deleted);
  EXPECT_EQ(deleted->revision, *put + 1);  // Nothing written.
}

TEST_F(EtcdClientTest, AnEmptyKeyIsRefusedBeforeAnythingIsSent) {
  EXPECT_EQ(client_->Get("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->GetPrefix("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Put("", "v").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Delete("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->CreateIfAbsent("", "v").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, PutIfModRevisionSucceedsOnlyAtTheKeysRevision) {
  absl::StatusOr<int64_t> put = client_->Put("/t/shard", "epoch 1");
  ASSERT_TRUE(put.ok()) << put.status();

  // Two writers read the key at `put`; the first to write wins.
  absl::StatusOr<TxnResult> winner =
      client_->PutIfModRevision("/t/shard", "epoch 2 by a", *put);
  ASSERT_TRUE(winner.ok()) << winner.status();
  EXPECT_TRUE(winner->succeeded);
  EXPECT_EQ(winner->revision, *put + 1);
  EXPECT_EQ(winner->current, std::nullopt);

  // The other one's (a deposed writer's) compare-and-set fails, and says
  // what is there now.
  absl::StatusOr<TxnResult> loser =
      client_->PutIfModRevision("/t/shard", "epoch 2 by b", *put);
  ASSERT_TRUE(loser.ok()) << loser.status();
  EXPECT_FALSE(loser->succeeded);
  EXPECT_EQ(loser->revision, *put + 1);
  EXPECT_EQ(loser->current, Kv("/t/shard", "epoch 2 by a", *put, *put + 1, 2));

  absl::StatusOr<GetResult> read = client_->Get("/t/shard");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, Kv("/t/shard", "epoch 2 by a", *put, *put + 1, 2));
}

TEST_F(EtcdClientTest, PutIfModRevisionNeedsTheKeyToExist) {
  absl::StatusOr<TxnResult> result =
      client_->PutIfModRevision("/t/absent", "v", 5);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->succeeded);
  EXPECT_EQ(result->current, std::nullopt);
  // Revision 0 would match an absent key: that is CreateIfAbsent's job.
  EXPECT_EQ(client_->PutIfModRevision("/t/absent", "v", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<GetResult> read = client_->Get("/t/absent");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, std::nullopt);
}

TEST_F(EtcdClientTest, CreateIfAbsentCreatesOnlyOnce) {
  absl::StatusOr<TxnResult> first = client_->CreateIfAbsent("/t/once", "a");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded);
  absl::StatusOr<TxnResult> second = client_->CreateIfAbsent("/t/once", "b");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->succeeded);
  EXPECT_EQ(second->revision, first->revision);
  EXPECT_EQ(second->current,
            Kv("/t/once", "a", first->revision, first->revision, 1));
}

TEST_F(EtcdClientTest, CreateIfAbsentWithWritesEveryKeyOrNone) {
  absl::StatusOr<TxnResult> first = client_->CreateIfAbsentWith(
      "/t/count", "2", {{"/t/s/0", "zero"}, {"/t/s/1", "one"}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded);
  for (const auto& [key, value] :
       {std::pair{"/t/count", "2"}, {"/t/s/0", "zero"}, {"/t/s/1", "one"}}) {
    absl::StatusOr<GetResult> read = client_->Get(key);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->kv, Kv(key, value, first->revision, first->revision, 1));
  }
  // The first key exists: nothing is written.
  absl::StatusOr<TxnResult> second =
      client_->CreateIfAbsentWith("/t/count", "3", {{"/t/s/2", "two"}});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->succeeded);
  EXPECT_EQ(second->current,
            Kv("/t/count", "2", first->revision, first->revision, 1));
  absl::StatusOr<GetResult> absent = client_->Get("/t/s/2");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(absent->kv, std::nullopt);
  EXPECT_EQ(
      client_->CreateIfAbsentWith("/t/other", "v", {{"", "x"}}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, AFencedWriteHoldsOnlyWhileTheFenceKeyIsTheSame) {
  // A controller's term is the create_revision of the election key.
  absl::StatusOr<int64_t> term = client_->Put("/t/controller", "a");
  ASSERT_TRUE(term.ok()) << term.status();
  const Fence fence{"/t/controller", *term};

  absl::StatusOr<TxnResult> created =
      client_->CreateIfAbsent("/t/shard", "epoch 1", 0, fence);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->succeeded);
  EXPECT_FALSE(created->fenced_out);
  absl::StatusOr<TxnResult> changed = client_->PutIfModRevision(
      "/t/shard", "epoch 2", created->revision, 0, fence);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(changed->succeeded);

  // A new term: the key deleted and created again.
  ASSERT_TRUE(client_->Delete("/t/controller").ok());
  absl::StatusOr<int64_t> next_term = client_->Put("/t/controller", "b");
  ASSERT_TRUE(next_term.ok()) << next_term.status();

  // The deposed term's write fails though the shard's revision is right,
  // and says the fence is why.
  absl::StatusOr<TxnResult> stale = client_->PutIfModRevision(
      "/t/shard", "epoch 3 by a", changed->revision, 0, fence);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(stale->succeeded);
  EXPECT_TRUE(stale->fenced_out);
  EXPECT_EQ(stale->current,
            Kv("/t/shard", "epoch 2", created->revision, changed->revision, 2));
  absl::StatusOr<TxnResult> stale_create =
      client_->CreateIfAbsent("/t/other", "x", 0, fence);
  ASSERT_TRUE(stale_create.ok()) << stale_create.status();
  EXPECT_FALSE(stale_create->succeeded);
  EXPECT_TRUE(stale_create->fenced_out);
  EXPECT_EQ(stale_create->current, std::nullopt);

  // A write that fails on the revision alone is not fenced out.
  absl::StatusOr<TxnResult> lost =
      client_->PutIfModRevision("/t/shard", "epoch 3", created->revision, 0,
                                Fence{"/t/controller", *next_term});
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_FALSE(lost->succeeded);
  EXPECT_FALSE(lost->fenced_out);
}

TEST_F(EtcdClientTest, DeleteIfModRevisionDeletesOnlyAtTheKeysRevision) {
  absl::StatusOr<int64_t> put = client_->Put("/t/k", "v");
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<TxnResult> stale =
      client_->DeleteIfModRevision("/t/k", *put - 1);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(stale->succeeded);
  EXPECT_EQ(stale->current, Kv("/t/k", "v", *put, *put, 1));

  absl::StatusOr<TxnResult> current =
      client_->DeleteIfModRevision("/t/k", *put);
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_TRUE(current->succeeded);
  EXPECT_EQ(current->revision, *put + 1);
  absl::StatusOr<GetResult> read = client_->Get("/t/k");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, std::nullopt);
}

TEST_F(EtcdClientTest, APutUnderAnUnknownLeaseIsNotFound) {
  absl::StatusOr<int64_t> put = client_->Put("/t/k", "v", 0x1234);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<TxnResult> create =
      client_->CreateIfAbsent("/t/k", "v", 0x1234);
  EXPECT_EQ(create.status().code(), absl::StatusCode::kNotFound);
  // When the comparison fails no put is made, and the lease is not looked
  // at.
  ASSERT_TRUE(client_->Put("/t/k", "v").ok());
  create = client_->CreateIfAbsent("/t/k", "w", 0x1234);
  ASSERT_TRUE(create.ok()) << create.status();
  EXPECT_FALSE(create->succeeded);
}

TEST_F(EtcdClientTest, RevokingALeaseDeletesItsKeys) {
  absl::StatusOr<Lease> lease = client_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_NE(lease->id, 0);
  EXPECT_EQ(lease->ttl, absl::Seconds(30));
  absl::StatusOr<absl::Duration> left = client_->LeaseTimeToLive(lease->id);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_GE(*left, absl::Seconds(28));
  EXPECT_LE(*left, absl::Seconds(30));

  absl::StatusOr<int64_t> put = client_->Put("/t/leased", "v", lease->id);
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<GetResult> read = client_->Get("/t/leased");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, Kv("/t/leased", "v", *put, *put, 1, lease->id));

  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  read = client_->Get("/t/leased");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, std::nullopt);
  EXPECT_EQ(read->revision, *put + 1);
  EXPECT_EQ(client_->LeaseTimeToLive(lease->id).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->RevokeLease(lease->id).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, GrantLeaseRefusesANonPositiveTtl) {
  EXPECT_EQ(client_->GrantLease(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, WatchReportsPutsAndDeletesInOrderFromARevision) {
  absl::StatusOr<int64_t> r1 = client_->Put("/t/w/a", "1");
  ASSERT_TRUE(r1.ok()) << r1.status();
  const int64_t r2 = *client_->Put("/t/w/b", "2");
  ASSERT_TRUE(client_->Put("/t/outside", "x").ok());  // r2 + 1
  const int64_t r4 = client_->Delete("/t/w/a")->revision;
  const int64_t r5 = *client_->Put("/t/w/a", "3");

  // From r2: what happened before the watch started, then what follows.
  EventLog log;
  absl::StatusOr<std::unique_ptr<Watch>> watch = Watch::Start(
      *client_,
      WatchOptions{.key = "/t/w/", .prefix = true, .from_revision = r2},
      log.Callbacks());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE((*watch)->WaitCreated(absl::Now() + kPatience));
  const int64_t r6 = *client_->Put("/t/w/b", "4");
  const int64_t r7 = client_->Delete("/t/w/b")->revision;

  EXPECT_THAT(log.Await(5),
              ElementsAre(EventIs(Put(Kv("/t/w/b", "2", r2, r2, 1))),
                          EventIs(Deleted("/t/w/a", r4)),
                          EventIs(Put(Kv("/t/w/a", "3", r5, r5, 1))),
                          EventIs(Put(Kv("/t/w/b", "4", r2, r6, 2))),
                          EventIs(Deleted("/t/w/b", r7))));
  EXPECT_EQ((*watch)->next_revision(), r7 + 1);
  EXPECT_EQ(log.end(), std::nullopt);
}

TEST_F(EtcdClientTest, WatchOfOneKeyWithPreviousValues) {
  const int64_t r1 = *client_->Put("/t/key", "old");
  EventLog log;
  absl::StatusOr<std::unique_ptr<Watch>> watch = Watch::Start(
      *client_,
      WatchOptions{.key = "/t/key", .from_revision = r1 + 1, .prev_kv = true},
      log.Callbacks());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(client_->Put("/t/key2", "not watched").ok());
  const int64_t r3 = *client_->Put("/t/key", "new");
  const int64_t r4 = client_->Delete("/t/key")->revision;

  WatchEvent put = Put(Kv("/t/key", "new", r1, r3, 2));
  put.prev = Kv("/t/key", "old", r1, r1, 1);
  WatchEvent deleted = Deleted("/t/key", r4);
  deleted.prev = Kv("/t/key", "new", r1, r3, 2);
  EXPECT_THAT(log.Await(2), ElementsAre(EventIs(put), EventIs(deleted)));
}

TEST_F(EtcdClientTest, WatchFromACompactedRevisionEndsOutOfRange) {
  const int64_t r1 = *client_->Put("/t/k", "1");
  const int64_t r2 = *client_->Put("/t/k", "2");
  ASSERT_TRUE(server_->Compact(r2).ok());
  EventLog log;
  absl::StatusOr<std::unique_ptr<Watch>> watch =
      Watch::Start(*client_, WatchOptions{.key = "/t/k", .from_revision = r1},
                   log.Callbacks());
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::optional<absl::Status> end =
      (*watch)->WaitEnded(absl::Now() + kPatience);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code(), absl::StatusCode::kOutOfRange) << *end;
  EXPECT_THAT(end->message(),
              HasSubstr(absl::StrCat("the oldest revision kept is ", r2)));
  EXPECT_EQ(log.end(), end);
  EXPECT_THAT(log.Await(0), ElementsAre());
}

TEST_F(EtcdClientTest, WatchRefusesAnEmptyKey) {
  EventLog log;
  EXPECT_EQ(
      Watch::Start(*client_, WatchOptions{}, log.Callbacks()).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdClientTest, ALeaseKeeperKeepsTheKeyPastItsTtl) {
  absl::StatusOr<Lease> lease = client_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const int64_t put = *client_->Put("/t/alive", "v", lease->id);
  EventLog log;
  auto watch = Watch::Start(
      *client_, WatchOptions{.key = "/t/alive", .from_revision = put + 1},
      log.Callbacks());
  ASSERT_TRUE(watch.ok()) << watch.status();
  bool lost = false;
  std::unique_ptr<LeaseKeeper> keeper = LeaseKeeper::Start(
      *client_, *lease, [&lost](absl::Status) { lost = true; });

  // A renewal sent after the lease's first TTL ran out has been confirmed:
  // the TTL has passed, and the key is still there.
  ASSERT_TRUE(keeper->AwaitAliveUntil(lease->alive_until + lease->ttl,
                                      absl::Now() + kPatience));
  EXPECT_GT(absl::Now(), lease->alive_until);
  EXPECT_GE(keeper->renewals(), 2);
  absl::StatusOr<GetResult> read = client_->Get("/t/alive");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, Kv("/t/alive", "v", put, put, 1, lease->id));
  EXPECT_THAT(log.Await(0), ElementsAre());
  EXPECT_FALSE(keeper->lost());

  // Destroying the keeper revokes the lease: the key goes at once.
  keeper.reset();
  read = client_->Get("/t/alive");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, std::nullopt);
  EXPECT_THAT(log.Await(1), ElementsAre(EventIs(Deleted("/t/alive", put + 1))));
  EXPECT_EQ(client_->LeaseTimeToLive(lease->id).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(lost);
}

TEST_F(EtcdClientTest, TheKeyExpiresWhenKeepAlivesStop) {
  absl::StatusOr<Lease> lease = client_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const int64_t put = *client_->Put("/t/expiring", "v", lease->id);
  EventLog log;
  auto watch = Watch::Start(
      *client_, WatchOptions{.key = "/t/expiring", .from_revision = put + 1},
      log.Callbacks());
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::unique_ptr<LeaseKeeper> keeper =
      LeaseKeeper::Start(*client_, *lease, nullptr);
  ASSERT_TRUE(keeper->AwaitAliveUntil(lease->alive_until + absl::Seconds(1),
                                      absl::Now() + kPatience));

  // As if the process died: no revoke, the lease runs out its TTL.
  const absl::Time last_renewed_by = keeper->alive_until();
  keeper->Abandon();
  EXPECT_THAT(log.Await(1),
              ElementsAre(EventIs(Deleted("/t/expiring", put + 1))));
  EXPECT_GE(absl::Now(), last_renewed_by);
  EXPECT_EQ(client_->LeaseTimeToLive(lease->id).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(keeper->lost());
}

TEST_F(EtcdClientTest, ALeaseKeeperReportsALeaseRevokedElsewhereAsNotFound) {
  absl::StatusOr<Lease> lease = client_->GrantLease(absl::Seconds(3));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::Notification lost;
  absl::Status loss;
  std::unique_ptr<LeaseKeeper> keeper =
      LeaseKeeper::Start(*client_, *lease, [&](absl::Status status) {
        loss = std::move(status);
        lost.Notify();
      });
  ASSERT_TRUE(client_->RevokeLease(lease->id).ok());
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(loss.code(), absl::StatusCode::kNotFound) << loss;
  EXPECT_TRUE(keeper->lost());
  EXPECT_FALSE(keeper->AwaitAliveUntil(absl::InfiniteFuture(), absl::Now()));
}

TEST_F(EtcdClientTest,
       CallsAnswerUnavailableWithinTheirDeadlineWhileEtcdIsDown) {
  const int64_t put = *client_->Put("/t/k", "before");
  std::unique_ptr<EtcdClient> quick =
      NewClient({server_->endpoint()}, absl::Seconds(1));
  EventLog log;
  auto watch = Watch::Start(
      *quick,
      WatchOptions{.key = "/t/", .prefix = true, .from_revision = put + 1},
      log.Callbacks());
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE((*watch)->WaitCreated(absl::Now() + kPatience));

  server_->Stop();
  // The watch ends.
  std::optional<absl::Status> end =
      (*watch)->WaitEnded(absl::Now() + kPatience);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code(), absl::StatusCode::kUnavailable) << *end;

  // Each call, the first after the stop and later ones, fails within its
  // deadline (plus a little for the test's own scheduling).
  const absl::Duration bound = absl::Seconds(1) + absl::Milliseconds(250);
  for (int i = 0; i < 2; ++i) {
    absl::Time start = absl::Now();
    absl::StatusOr<GetResult> read = quick->Get("/t/k");
    EXPECT_LE(absl::Now() - start, bound);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable)
        << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr(server_->endpoint()));
    start = absl::Now();
    absl::StatusOr<int64_t> write = quick->Put("/t/k", "during");
    EXPECT_LE(absl::Now() - start, bound);
    EXPECT_EQ(write.status().code(), absl::StatusCode::kUnavailable)
        << write.status();
  }

  // Back on the same data: the client reconnects, the write made before is
  // there, and a new watch goes on where the old one ended.
  ASSERT_TRUE(server_->Restart().ok()) << server_->LogTail();
  absl::StatusOr<GetResult> read = quick->Get("/t/k");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, Kv("/t/k", "before", put, put, 1));
  EventLog after;
  auto resumed =
      Watch::Start(*quick,
                   WatchOptions{.key = "/t/",
                                .prefix = true,
                                .from_revision = (*watch)->next_revision()},
                   after.Callbacks());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const int64_t next = *quick->Put("/t/k", "after");
  EXPECT_EQ((*watch)->next_revision(), put + 1);
  EXPECT_THAT(after.Await(1),
              ElementsAre(EventIs(Put(Kv("/t/k", "after", put, next, 2)))));
}

TEST_F(EtcdClientTest, ALeaseKeeperKeepsItsLeaseThroughAnEtcdRestart) {
  absl::StatusOr<Lease> lease = client_->GrantLease(absl::Seconds(6));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const int64_t put = *client_->Put("/t/node", "v", lease->id);
  bool lost = false;
  std::unique_ptr<LeaseKeeper> keeper = LeaseKeeper::Start(
      *client_, *lease, [&lost](absl::Status) { lost = true; });

  server_->Stop();
  ASSERT_TRUE(server_->Restart().ok()) << server_->LogTail();
  const absl::Time restarted = absl::Now();
  // A renewal sent after the restart was confirmed.
  ASSERT_TRUE(
      keeper->AwaitAliveUntil(restarted + lease->ttl, absl::Now() + kPatience));
  EXPECT_FALSE(keeper->lost());
  absl::StatusOr<GetResult> read = client_->Get("/t/node");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kv, Kv("/t/node", "v", put, put, 1, lease->id));
  keeper.reset();
  EXPECT_FALSE(lost);
}

TEST_F(EtcdClientTest,
       ALeaseKeeperSaysWhenEtcdStaysAwayPastTheTtlAndGoesOnTrying) {
  absl::StatusOr<Lease> lease = client_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  absl::Mutex mu;
  std::vector<absl::Status> changes;
  absl::Time overdue_at;
  std::unique_ptr<LeaseKeeper> keeper =
      LeaseKeeper::Start(*client_, *lease, [&](absl::Status status) {
        absl::MutexLock lock(&mu);
        if (changes.empty()) overdue_at = absl::Now();
        changes.push_back(std::move(status));
      });
  auto await_changes = [&](size_t n) {
    absl::MutexLock lock(&mu);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return changes.size() >= n;
    };
    return mu.AwaitWithTimeout(absl::Condition(&enough), kPatience);
  };
  ASSERT_TRUE(keeper->AwaitAliveUntil(lease->alive_until + absl::Seconds(1),
                                      absl::Now() + kPatience));
  server_->Kill();
  const absl::Time alive_until = keeper->alive_until();
  ASSERT_TRUE(await_changes(1));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(changes[0].code(), absl::StatusCode::kUnavailable) << changes[0];
    EXPECT_THAT(changes[0].message(),
                HasSubstr("may have expired; still trying"));
    // Not before the lease could have expired, and soon after.
    EXPECT_GE(overdue_at, alive_until);
    EXPECT_LE(overdue_at, alive_until + absl::Seconds(1));
  }
  EXPECT_TRUE(keeper->overdue());
  EXPECT_FALSE(keeper->lost());
  // etcd restores its leases with a full TTL as it starts: the keeper's
  // next renewal gets through, and the lease is kept.
  ASSERT_TRUE(server_->Restart().ok()) << server_->LogTail();
  ASSERT_TRUE(await_changes(2));
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(changes[1].ok()) << changes[1];
    EXPECT_EQ(changes.size(), 2u);
  }
  EXPECT_FALSE(keeper->overdue());
  EXPECT_FALSE(keeper->lost());
  EXPECT_TRUE(client_->Put("/t/kept", "v", lease->id).ok());
}

TEST_F(EtcdClientTest, CallsMoveOnToTheNextEndpoint) {
  const std::string nobody =
      absl::StrCat("127.0.0.1:", hourglass::testing::FreeLoopbackPort());
  for (const std::vector<std::string>& endpoints :
       {std::vector<std::string>{nobody, server_->endpoint()},
        std::vector<std::string>{server_->endpoint(), nobody}}) {
    std::unique_ptr<EtcdClient> client = NewClient(endpoints);
    // A write too: nothing can have been sent to an endpoint that was
    // never connected.
    absl::StatusOr<int64_t> put = client->Put("/t/many", endpoints[0]);
    ASSERT_TRUE(put.ok()) << put.status();
    absl::StatusOr<GetResult> read = client->Get("/t/many");
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_TRUE(read->kv.has_value());
    EXPECT_EQ(read->kv->value, endpoints[0]);
  }
}

TEST_F(EtcdClientTest, WithNoEndpointAnsweringTheErrorNamesEach) {
  const std::string a =
      absl::StrCat("127.0.0.1:", hourglass::testing::FreeLoopbackPort());
  const std::string b =
      absl::StrCat("127.0.0.1:", hourglass::testing::FreeLoopbackPort());
  std::unique_ptr<EtcdClient> client = NewClient({a, b}, absl::Seconds(1));
  const absl::Time start = absl::Now();
  absl::StatusOr<GetResult> read = client->Get("/t/k");
  EXPECT_LE(absl::Now() - start, absl::Milliseconds(1500));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(read.status().message(), HasSubstr(a));
  EXPECT_THAT(read.status().message(), HasSubstr(b));
}

}  // namespace
}  // namespace hourglass::cluster
