// Fault injection: the broker, served over loopback gRPC to real clients, on
// a store whose writes fail (I/O error, disk full), whose log sync fails, or
// whose syncs stall (tests/testing/faulty_store.h). Each test keeps a ledger
// of what the broker told producers and checks every delivery against it:
// an acknowledged publish is delivered, a failed one never (at most once
// where its outcome is unknown), a succeeded cancel is never delivered, a
// message comes again only with a higher attempt, and nothing comes early.
//
// The broker's clock is a FakeClock: ack timeouts never pass unless a test
// moves it, so a delivery seen twice is a redelivery the test caused (a
// disconnect, a restart) or a bug.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/broker_service.h"
#include "api/server.h"
#include "broker/engine.h"
#include "client/admin.h"
#include "client/channel.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/message_store.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/eventually.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/faulty_store.h"

namespace hourglass::api {
namespace {

using ::hourglass::testing::BrokerClient;
using ::hourglass::testing::Eventually;
using ::hourglass::testing::FakeClock;
using ::hourglass::testing::FaultyStore;
using ::hourglass::testing::Received;
using ::hourglass::testing::Subscription;
using ::hourglass::testing::ToTime;
using storage::Table;
using storage::WriteBatch;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kWait = absl::Seconds(30);
// Longer than any test runs on the fake clock: no delivery times out, and
// no stream counts as stalled, unless a test says so. (The fake clock jumps
// by minutes while streams write in real time.)
constexpr absl::Duration kAckTimeout = absl::Hours(1);
constexpr absl::Duration kStallTimeout = absl::Hours(1);
constexpr char kTopic[] = "orders";
constexpr char kGroup[] = "billing";

// The errors RocksDB's store gives (storage/rocksdb_store.cc, ToStatus).
absl::Status IoError() {
  return absl::UnavailableError(
      "write /data/000012.log: IO error: Input/output error");
}
absl::Status DiskFull() {
  return absl::ResourceExhaustedError(
      "write /data: disk full (IO error: No space left on device)");
}
absl::Status SyncError() {
  return absl::UnavailableError(
      "write /data/000012.log: IO error: fsync: Input/output error");
}

// A FaultyStore filter: the writes no client waits on (unsynced) that put
// or delete in `table`. Unsynced writes are the engine's dispatch (ready
// puts), the dispatcher's deliveries (in-flight puts) and its acks
// (in-flight deletes); publishes are synced and never match, even when a
// group commit carries an unsynced write with them.
FaultyStore::Filter UnsyncedWriting(Table table,
                                    WriteBatch::Operation::Kind kind) {
  return [table, kind](const WriteBatch& batch) {
    if (batch.needs_sync()) return false;
    for (const WriteBatch::Operation& op : batch.operations()) {
      if (op.table == table && op.kind == kind) return true;
    }
    return false;
  };
}

// What the broker told producers, and what consumers received.
//
// Not thread-safe: the test's thread records and checks.
class Ledger {
 public:
  enum class Fate {
    kDeliver,     // Publish succeeded: delivered at least once.
    kNever,       // Publish failed before the log, or cancelled.
    kAtMostOnce,  // Outcome unknown (the log sync failed).
  };

  // The latest call for an id wins (a failed publish retried with its id).
  void Expect(const std::string& id, Fate fate) { fates_[id] = fate; }
  // Records a publish's outcome: OK means kDeliver, an error `failed`.
  void Published(const std::string& id, const absl::Status& status,
                 Fate failed = Fate::kNever) {
    Expect(id, status.ok() ? Fate::kDeliver : failed);
  }

  // `now`: the broker's clock when the delivery was taken. It only moves
  // forward, so a delivery due after it came early.
  void Delivered(const hourglass::v1::Delivery& d, absl::Time now) {
    attempts_[d.id()].push_back(d.attempt());
    if (ToTime(d.deliver_at()) > now) {
      early_.push_back(absl::StrCat(d.id(), " due ",
                                    absl::FormatTime(ToTime(d.deliver_at())),
                                    " came at ", absl::FormatTime(now)));
    }
  }

  // True once every kDeliver id has come at least once.
  bool AllDelivered() const {
    for (const auto& [id, fate] : fates_) {
      if (fate == Fate::kDeliver && !attempts_.contains(id)) return false;
    }
    return true;
  }

  // The attempts each id came with, in order.
  std::vector<uint32_t> Attempts(const std::string& id) const {
    auto it = attempts_.find(id);
    return it == attempts_.end() ? std::vector<uint32_t>() : it->second;
  }

  // Checks the ledger's promises. With `redelivered` (ids a test caused to
  // come again) those may come more than once, each time with a higher
  // attempt; every other id comes at most once, with attempt 1.
  void Check(const std::vector<std::string>& redelivered = {}) const {
    EXPECT_THAT(early_, IsEmpty()) << "deliveries before their due time";
    for (const auto& [id, attempts] : attempts_) {
      auto fate = fates_.find(id);
      if (fate == fates_.end()) {
        ADD_FAILURE() << id << " was delivered but never published";
        continue;
      }
      EXPECT_NE(fate->second, Fate::kNever)
          << id << " was delivered though its publish failed or it was "
          << "cancelled";
      const bool may_repeat = std::find(redelivered.begin(), redelivered.end(),
                                        id) != redelivered.end();
      if (fate->second == Fate::kAtMostOnce || !may_repeat) {
        EXPECT_THAT(attempts, ElementsAre(1u)) << id;
        continue;
      }
      EXPECT_EQ(attempts.front(), 1u) << id;
      for (size_t i = 1; i < attempts.size(); ++i) {
        EXPECT_GT(attempts[i], attempts[i - 1])
            << id << " came again without a higher attempt";
      }
    }
    for (const auto& [id, fate] : fates_) {
      if (fate == Fate::kDeliver) {
        EXPECT_TRUE(attempts_.contains(id)) << id << " was never delivered";
      }
    }
  }

 private:
  std::map<std::string, Fate> fates_;
  std::map<std::string, std::vector<uint32_t>> attempts_;
  std::vector<std::string> early_;
};

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { StartBroker(); }
  void TearDown() override { StopBroker(); }

  void StartBroker() {
    broker::Engine::Options options;
    options.dispatcher.stall_timeout = kStallTimeout;
    options.store_health.probe_every = absl::Milliseconds(20);
    auto engine = broker::Engine::Open(&store_, &clock_, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->Start();
    service_ = std::make_unique<BrokerService>(engine_.get(), &clock_, limits_);
    auto server = Server::Start(
        {.listen_address = "127.0.0.1:0", .services = {service_.get()}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    FollowStoreHealth(engine_->store_health(), server_.get());
    client_ = std::make_unique<BrokerClient>(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials()));
  }

  // As a process stop: streams end, the engine writes what it still can,
  // and only the store remains.
  void StopBroker() {
    if (engine_ != nullptr) {
      engine_->Shutdown(absl::UnavailableError("the broker is stopping"));
    }
    client_.reset();
    if (engine_ != nullptr) engine_->store_health().Unwatch();
    server_.reset();
    service_.reset();
    engine_.reset();
  }

  std::unique_ptr<Subscription> Subscribe(const std::string& topic = kTopic,
                                          uint32_t max_in_flight = 100) {
    return client_->Subscribe(topic, kGroup, max_in_flight, kAckTimeout);
  }

  // Publishes one message with id `id` due after `delay`; the client's
  // status.
  absl::Status Publish(const std::string& id,
                       absl::Duration delay = absl::ZeroDuration(),
                       const std::string& topic = kTopic) {
    absl::StatusOr<hourglass::v1::Receipt> receipt =
        client_->Publish(topic, absl::StrCat("payload of ", id), delay, id);
    if (!receipt.ok()) return receipt.status();
    EXPECT_EQ(receipt->id(), id);
    EXPECT_FALSE(receipt->duplicate()) << id;
    return absl::OkStatus();
  }

  absl::Status Cancel(const std::string& id) {
    const grpc::Status status = client_->Cancel(kTopic, id);
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }

  // Takes what `sub` delivers within `timeout` (at most one) into the
  // ledger, and acks it.
  void TakeOne(Subscription& sub, Ledger& ledger, absl::Duration timeout) {
    for (const Received& r : sub.Take(1, timeout)) {
      ledger.Delivered(r.delivery, clock_.Now());
      EXPECT_TRUE(sub.Ack({r.delivery.id()}));
    }
  }

  // Takes deliveries into the ledger, acking each, until every id the
  // ledger expects has come.
  void Drain(Subscription& sub, Ledger& ledger) {
    const absl::Time deadline = absl::Now() + kWait;
    while (!ledger.AllDelivered() && absl::Now() < deadline) {
      TakeOne(sub, ledger, deadline - absl::Now());
    }
    ASSERT_TRUE(ledger.AllDelivered()) << "deliveries missing after " << kWait;
  }

  // Brings the broker to rest: moves the clock by `advance` (past what is
  // scheduled), takes every delivery, acking it, until the store holds no
  // message (every ack written). It does so twice, each time after a
  // marker message due now: deliveries reach a stream in the order they
  // were made, and none of a deleted message can be made any more, so a
  // duplicate comes before the second marker.
  void Settle(Subscription& sub, Ledger& ledger,
              absl::Duration advance = absl::ZeroDuration()) {
    clock_.Advance(advance);
    for (int round = 0; round < 2; ++round) {
      // A publish also wakes the timer thread, which sleeps by real time.
      const std::string marker = absl::StrCat("marker-", ++markers_);
      ASSERT_TRUE(Publish(marker).ok());
      ledger.Expect(marker, Ledger::Fate::kDeliver);
      Drain(sub, ledger);
      const absl::Time deadline = absl::Now() + kWait;
      while (Count(Table::kMessages) > 0 && absl::Now() < deadline) {
        TakeOne(sub, ledger, absl::Milliseconds(10));
      }
      ASSERT_EQ(Count(Table::kMessages), 0u) << "messages left after " << kWait;
    }
  }

  size_t Count(Table table) {
    size_t n = 0;
    EXPECT_TRUE(store_
                    .Scan(table, "", "",
                          [&](std::string_view, std::string_view) {
                            ++n;
                            return true;
                          })
                    .ok());
    return n;
  }

  // Whether the store holds a message with `id` (in any table).
  bool Stored(const std::string& id, const std::string& topic = kTopic) {
    absl::StatusOr<std::optional<std::string>> value =
        store_.Get(Table::kIds, storage::IdKey(topic, id));
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() && value->has_value();
  }

  // In-flight deliveries of the group, as the dispatcher holds them.
  size_t InFlight() {
    for (const broker::Dispatcher::GroupInfo& g :
         engine_->dispatcher().Groups()) {
      if (g.topic == kTopic && g.group == kGroup) return g.in_flight;
    }
    return 0;
  }

  // Waits until `n` more writes than `before` failed: the broker kept
  // retrying under the fault.
  void AwaitFailedWrites(uint64_t before, uint64_t n) {
    ASSERT_TRUE(Eventually([&] {
      return store_.counts().failed_writes >= before + n;
    })) << store_.counts().failed_writes - before
        << " writes failed";
  }

  FaultyStore store_;
  FakeClock clock_{absl::FromUnixSeconds(1'900'000'000)};
  // The Broker service's limits; a test that changes them restarts the
  // broker.
  Limits limits_;
  std::unique_ptr<broker::Engine> engine_;
  std::unique_ptr<BrokerService> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<BrokerClient> client_;
  int markers_ = 0;
};

// An I/O error on the publish's write: the producer gets UNAVAILABLE with
// the store's reason, nothing of the publish (or of a batch) is stored, a
// cancel fails the same way and leaves its message scheduled, and once the
// disk works again publishes succeed and every acknowledged message comes
// exactly once.
TEST_F(FaultTest, AnIoErrorFailsPublishesWithUnavailableAndStoresNothing) {
  Ledger ledger;
  auto sub = Subscribe();
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("before-", i);
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  ASSERT_TRUE(Publish("later", absl::Minutes(1)).ok());
  ledger.Expect("later", Ledger::Fate::kDeliver);
  ASSERT_TRUE(Publish("cancelled", absl::Minutes(1)).ok());
  ASSERT_TRUE(Cancel("cancelled").ok());
  ledger.Expect("cancelled", Ledger::Fate::kNever);

  store_.FailWrites(IoError());
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("failed-", i);
    const absl::Status status = Publish(id);
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(status.message(), HasSubstr("Input/output error"));
    ledger.Published(id, status);
  }
  // A batch fails whole.
  hourglass::v1::PublishRequest batch;
  for (int i = 0; i < 3; ++i) {
    *batch.add_messages() = hourglass::testing::NewMessage(
        kTopic, "x", absl::ZeroDuration(), absl::StrCat("batch-", i));
  }
  hourglass::v1::PublishResponse response;
  EXPECT_EQ(client_->Publish(batch, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  for (int i = 0; i < 3; ++i) {
    ledger.Expect(absl::StrCat("batch-", i), Ledger::Fate::kNever);
  }
  const absl::Status cancel = Cancel("later");
  EXPECT_EQ(cancel.code(), absl::StatusCode::kUnavailable) << cancel;
  for (const std::string id :
       {"failed-0", "failed-1", "failed-2", "batch-0", "batch-1", "batch-2"}) {
    EXPECT_FALSE(Stored(id)) << id << " was half written";
  }
  EXPECT_TRUE(Stored("later"));

  store_.FailWrites(absl::OkStatus());
  // A producer retries with its id: the failed attempt left nothing, so the
  // retry is no duplicate.
  ASSERT_TRUE(Publish("failed-0").ok());
  ledger.Expect("failed-0", Ledger::Fate::kDeliver);
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("after-", i);
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  Settle(*sub, ledger, absl::Minutes(1));
  ledger.Check();
}

// A full disk: RESOURCE_EXHAUSTED for publishes, cancels and the
// registration of a new group, and everything works again once space
// returns, without a restart.
TEST_F(FaultTest, AFullDiskAnswersResourceExhaustedUntilSpaceReturns) {
  Ledger ledger;
  auto sub = Subscribe();
  ASSERT_TRUE(Publish("before", absl::Seconds(10)).ok());
  ledger.Expect("before", Ledger::Fate::kDeliver);

  store_.FailWrites(DiskFull());
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("failed-", i);
    const absl::Status status = Publish(id);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_THAT(status.message(), HasSubstr("disk full"));
    ledger.Published(id, status);
    EXPECT_FALSE(Stored(id));
  }
  EXPECT_EQ(Cancel("before").code(), absl::StatusCode::kResourceExhausted);
  // Subscribing to a new group writes its registration: refused too.
  auto refused = Subscribe("other-topic");
  const std::optional<grpc::Status> end = refused->WaitEnd(kWait);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << end->error_message();

  store_.FailWrites(absl::OkStatus());
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("after-", i);
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  auto other = Subscribe("other-topic");
  ASSERT_TRUE(Publish("other", absl::ZeroDuration(), "other-topic").ok());
  ledger.Expect("other", Ledger::Fate::kDeliver);
  std::vector<Received> got = other->Take(1, kWait);
  ASSERT_EQ(got.size(), 1u);
  ledger.Delivered(got[0].delivery, clock_.Now());
  EXPECT_TRUE(other->Ack({"other"}));
  Settle(*sub, ledger, absl::Seconds(10));
  ledger.Check();
}

// gRPC health of the whole server, as a load balancer or probe asks it.
std::string HealthOf(int port) {
  auto channel =
      client::Channel::Create({.address = absl::StrCat("127.0.0.1:", port)});
  if (!channel.ok()) return channel.status().ToString();
  absl::StatusOr<std::string> health = client::Admin(*channel).Health();
  return health.ok() ? *health : health.status().ToString();
}

TEST_F(FaultTest,
       HealthIsNotServingWhileTheDiskIsFullAndServingOnceSpaceReturns) {
  const int port = server_->port();
  EXPECT_EQ(HealthOf(port), "SERVING");
  store_.FailWrites(DiskFull());
  const absl::Status refused = Publish("refused");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  // Set by the failed write itself, before the publish was answered.
  EXPECT_EQ(HealthOf(port), "NOT_SERVING");
  EXPECT_EQ(engine_->Info().store_health, DiskFull());

  // Space returns; no client writes: the probe finds out.
  store_.FailWrites(absl::OkStatus());
  EXPECT_TRUE(Eventually([&] { return HealthOf(port) == "SERVING"; }, kWait));
  EXPECT_TRUE(engine_->Info().store_health.ok());
  ASSERT_TRUE(Publish("after").ok());
  EXPECT_EQ(HealthOf(port), "SERVING");
}

// A failed log sync: the producer gets UNAVAILABLE, and the store, like
// RocksDB after a failed WAL sync, refuses every write until the process
// restarts. After a restart on the same store every acknowledged message
// is there and comes; the one whose sync failed comes at most once (once
// if its batch reached the log, never if not); a delivery whose ack could
// not be written comes again with a higher attempt.
class FailedSyncTest : public FaultTest,
                       public ::testing::WithParamInterface<bool> {};

TEST_P(FailedSyncTest, FailsThePublishAndNeedsARestart) {
  const bool in_log = GetParam();
  Ledger ledger;
  auto sub = Subscribe();
  for (const std::string id : {"acked-0", "acked-1"}) {
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  Drain(*sub, ledger);
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("scheduled-", i);
    ASSERT_TRUE(Publish(id, absl::Minutes(1)).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  ASSERT_TRUE(Publish("unacked").ok());
  ledger.Expect("unacked", Ledger::Fate::kDeliver);
  std::vector<Received> got = sub->Take(1, kWait);
  ASSERT_EQ(got.size(), 1u);
  ledger.Delivered(got[0].delivery, clock_.Now());
  // The acks of acked-* are written; scheduled-* and unacked remain.
  ASSERT_TRUE(Eventually([&] { return Count(Table::kMessages) == 4; }));

  store_.FailSyncs(SyncError(), in_log);
  const absl::Status failed = Publish("sync-failed");
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("fsync"));
  ledger.Published("sync-failed", failed, Ledger::Fate::kAtMostOnce);
  // Written before the sync failed: visible (as in RocksDB's memtable),
  // of unknown durability, and never delivered before a restart (its
  // delivery could not be written).
  EXPECT_TRUE(Stored("sync-failed"));
  // A retry finds the id stored, yet is not told it was: its write may not
  // survive the restart. Answering it waits for a sync, which fails.
  EXPECT_EQ(Publish("sync-failed").code(), absl::StatusCode::kUnavailable);
  // Every later write fails: publishes, cancels, and the ack, which is
  // lost.
  const absl::Status refused = Publish("refused");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  ledger.Published("refused", refused);
  EXPECT_EQ(Cancel("scheduled-0").code(), absl::StatusCode::kUnavailable);
  // Even a cancel that finds nothing: NOT_FOUND is read from the store, and
  // what it read may not survive the restart.
  EXPECT_EQ(Cancel("never-published").code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(sub->Ack({"unacked"}));
  sub.reset();

  StopBroker();
  store_.Restart();
  StartBroker();
  EXPECT_EQ(Stored("sync-failed"), in_log);
  EXPECT_FALSE(Stored("refused"));
  sub = Subscribe();
  Settle(*sub, ledger, absl::Minutes(1));
  ledger.Check({"unacked"});
  EXPECT_THAT(ledger.Attempts("unacked"), ElementsAre(1u, 2u));
  // What reached the log is a message like any other once it is found.
  EXPECT_EQ(ledger.Attempts("sync-failed").size(), in_log ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(InLog, FailedSyncTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "BatchInLog" : "BatchLost";
                         });

// A stalled fsync holds only what waits for durability: publishes answer
// once it ends, and their messages come only then. The writer goes on
// meanwhile, so deliveries (whose in-flight marks need no sync) and acks
// are written and flow during the stall, none lost, nothing twice.
TEST_F(FaultTest, AStalledSyncHoldsPublishesButNotDeliveriesOrAcks) {
  Ledger ledger;
  auto sub = Subscribe(kTopic, /*max_in_flight=*/2);
  for (const std::string id : {"m0", "m1", "m2"}) {
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  std::vector<Received> got = sub->Take(2, kWait);
  ASSERT_EQ(got.size(), 2u);
  for (const Received& r : got) ledger.Delivered(r.delivery, clock_.Now());
  EXPECT_EQ(got[0].delivery.id(), "m0");
  EXPECT_EQ(got[1].delivery.id(), "m1");

  store_.HoldSyncs();
  absl::Status stalled = absl::UnknownError("not answered");
  absl::Notification answered;
  std::thread producer([&] {
    stalled = Publish("during-stall");
    answered.Notify();
  });
  ASSERT_TRUE(store_.AwaitHeldSyncs(1, kWait));
  // Acks free the credit: m2 is marked in flight and sent during the
  // stall, and the acks of all three are written.
  EXPECT_TRUE(sub->Ack({"m0", "m1"}));
  got = sub->Take(1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery.id(), "m2");
  ledger.Delivered(got[0].delivery, clock_.Now());
  EXPECT_TRUE(sub->Ack({"m2"}));
  // Only the stalled publish's message is left in the store.
  ASSERT_TRUE(Eventually([&] { return Count(Table::kMessages) == 1; }));
  EXPECT_TRUE(Stored("during-stall"));
  EXPECT_FALSE(answered.HasBeenNotified());
  EXPECT_THAT(sub->TakeQueued(), IsEmpty());  // Not durable: not sent.

  store_.ReleaseSyncs();
  producer.join();
  EXPECT_TRUE(stalled.ok()) << stalled;
  ledger.Published("during-stall", stalled);
  got = sub->Take(1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery.id(), "during-stall");
  ledger.Delivered(got[0].delivery, clock_.Now());
  EXPECT_TRUE(sub->Ack({"during-stall"}));
  Settle(*sub, ledger);
  ledger.Check();
}

// A publish of an id already stored (a client's retry) is answered with
// the first receipt only once the store is durable: the first write may be
// visible before its sync, and the answer must not promise what a crash
// could take back.
TEST_F(FaultTest, ADuplicatePublishIsAnsweredOnlyOnceTheStoreIsDurable) {
  ASSERT_TRUE(Publish("m0").ok());
  store_.HoldSyncs();
  absl::StatusOr<hourglass::v1::Receipt> retried =
      absl::UnknownError("not answered");
  absl::Notification answered;
  std::thread producer([&] {
    retried =
        client_->Publish(kTopic, "payload of m0", absl::ZeroDuration(), "m0");
    answered.Notify();
  });
  EXPECT_TRUE(store_.AwaitHeldSyncs(1, kWait))
      << "the duplicate was answered without waiting for a sync";
  EXPECT_FALSE(answered.HasBeenNotified());
  store_.ReleaseSyncs();
  producer.join();
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->id(), "m0");
  EXPECT_TRUE(retried->duplicate());
  EXPECT_EQ(Count(Table::kMessages), 1u);
}

// The publish queue (--max_publish_queue_bytes) filled by many concurrent
// requests while the log sync stalls: as many as fit are admitted and wait
// for the sync; every other one is refused at once with RESOURCE_EXHAUSTED
// and the documented message, and nothing of it is stored. Once the sync
// completes, the admitted ones succeed and are delivered, and only they.
TEST_F(FaultTest, PublishesPastAFullQueueAreRefusedAndStoreNothing) {
  constexpr int kRequests = 12;
  constexpr int kFit = 3;
  // Requests of one size: ids of one length.
  auto request = [](int i) {
    hourglass::v1::PublishRequest r;
    *r.add_messages() = hourglass::testing::NewMessage(
        kTopic, "payload", absl::ZeroDuration(), absl::StrFormat("c%02d", i));
    return r;
  };
  const size_t bytes = request(0).ByteSizeLong();
  StopBroker();
  limits_.max_publish_queue_bytes = kFit * bytes + bytes / 2;
  StartBroker();
  auto sub = Subscribe();
  Ledger ledger;
  // The broker's first publish reserves a block of sequences with a synced
  // write of its own: made before the stall.
  ASSERT_TRUE(Publish("first").ok());
  ledger.Expect("first", Ledger::Fate::kDeliver);

  store_.HoldSyncs();
  absl::Mutex mu;
  std::map<std::string, grpc::Status> answered;  // By id; guarded by mu.
  std::vector<std::thread> producers;
  for (int i = 0; i < kRequests; ++i) {
    producers.emplace_back([&, i] {
      hourglass::v1::PublishResponse response;
      const grpc::Status status = client_->Publish(request(i), &response);
      absl::MutexLock lock(&mu);
      answered.emplace(request(i).messages(0).id(), status);
    });
  }
  // The refusals come while the admitted publishes wait for the sync.
  std::map<std::string, grpc::Status> refused;
  {
    absl::MutexLock lock(&mu);
    auto all_refused = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return answered.size() >= kRequests - kFit;
    };
    mu.AwaitWithTimeout(absl::Condition(&all_refused), kWait);
    refused = answered;
  }
  if (refused.size() < kRequests - kFit) {
    store_.ReleaseSyncs();
    for (std::thread& t : producers) t.join();
    FAIL() << "only " << refused.size() << " publishes answered during the "
           << "stall";
  }
  const std::string message =
      absl::StrCat("publish queue full: ", kFit * bytes,
                   " bytes of publishes are being written and this one has ",
                   bytes, "; the limit is ", limits_.max_publish_queue_bytes,
                   " (--max_publish_queue_bytes); retry later");
  EXPECT_EQ(refused.size(), static_cast<size_t>(kRequests - kFit));
  std::vector<std::string> admitted;
  for (int i = 0; i < kRequests; ++i) {
    const std::string id = request(i).messages(0).id();
    auto it = refused.find(id);
    if (it == refused.end()) {
      admitted.push_back(id);
      continue;
    }
    EXPECT_EQ(it->second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << id;
    EXPECT_EQ(it->second.error_message(), message) << id;
    EXPECT_FALSE(Stored(id)) << id;
    ledger.Expect(id, Ledger::Fate::kNever);
  }
  ASSERT_EQ(admitted.size(), static_cast<size_t>(kFit));

  store_.ReleaseSyncs();
  for (std::thread& t : producers) t.join();
  for (const std::string& id : admitted) {
    EXPECT_TRUE(answered.at(id).ok())
        << id << ": " << answered.at(id).error_message();
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  Settle(*sub, ledger);
  ledger.Check();
}

// Slow syncs under concurrent producers: every publish waits and succeeds,
// each producer's messages come in the order it published them, once each.
TEST_F(FaultTest, SlowSyncsDelayPublishesButLoseAndReorderNothing) {
  store_.SetSyncLatency(absl::Milliseconds(5));
  constexpr int kProducers = 3, kEach = 15;
  auto sub = Subscribe();
  std::vector<absl::Status> statuses(kProducers * kEach);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kEach; ++i) {
        statuses[p * kEach + i] = Publish(absl::StrCat("p", p, "-", i));
      }
    });
  }
  for (std::thread& t : producers) t.join();
  Ledger ledger;
  std::map<std::string, std::pair<int, int>> names;  // Producer, index.
  std::map<int, std::vector<int>> order;  // Per producer, as delivered.
  for (int p = 0; p < kProducers; ++p) {
    for (int i = 0; i < kEach; ++i) {
      const std::string id = absl::StrCat("p", p, "-", i);
      EXPECT_TRUE(statuses[p * kEach + i].ok()) << statuses[p * kEach + i];
      ledger.Expect(id, Ledger::Fate::kDeliver);
      names[id] = {p, i};
    }
  }
  const absl::Time deadline = absl::Now() + kWait;
  while (!ledger.AllDelivered() && absl::Now() < deadline) {
    for (const Received& r : sub->Take(1, deadline - absl::Now())) {
      ledger.Delivered(r.delivery, clock_.Now());
      const auto [p, i] = names.at(r.delivery.id());
      order[p].push_back(i);
      EXPECT_TRUE(sub->Ack({r.delivery.id()}));
    }
  }
  for (int p = 0; p < kProducers; ++p) {
    std::vector<int> expected(kEach);
    for (int i = 0; i < kEach; ++i) expected[i] = i;
    EXPECT_EQ(order[p], expected) << "producer " << p;
  }
  EXPECT_GE(store_.counts().syncs, 1u);
  store_.SetSyncLatency(absl::ZeroDuration());
  Settle(*sub, ledger);
  ledger.Check();
}

// ---- Faults on the writes no client waits on.

// The engine's dispatch (scheduled -> ready) fails: the messages stay
// scheduled, nothing is delivered, and the timer thread retries until the
// write works.
TEST_F(FaultTest, AFailedDispatchWriteKeepsMessagesScheduledUntilItClears) {
  Ledger ledger;
  auto sub = Subscribe();
  const uint64_t failed_before = store_.counts().failed_writes;
  store_.FailWritesIf(
      UnsyncedWriting(Table::kReady, WriteBatch::Operation::Kind::kPut),
      IoError());
  // One publish of all five, so that no later synced write carries the
  // dispatch past the fault.
  hourglass::v1::PublishRequest batch;
  for (int i = 0; i < 5; ++i) {
    const std::string id = absl::StrCat("m", i);
    *batch.add_messages() =
        hourglass::testing::NewMessage(kTopic, "x", absl::ZeroDuration(), id);
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  hourglass::v1::PublishResponse response;
  ASSERT_TRUE(client_->Publish(batch, &response).ok());
  AwaitFailedWrites(failed_before, 3);
  EXPECT_EQ(Count(Table::kSchedule), 5u);
  EXPECT_EQ(Count(Table::kReady), 0u);
  EXPECT_THAT(sub->TakeQueued(), IsEmpty());

  store_.FailWrites(absl::OkStatus());
  std::vector<Received> got = sub->Take(5, kWait);
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].delivery.id(), absl::StrCat("m", i));
    ledger.Delivered(got[i].delivery, clock_.Now());
    EXPECT_TRUE(sub->Ack({got[i].delivery.id()}));
  }
  Settle(*sub, ledger);
  ledger.Check();
}

// The dispatcher's delivery write (the in-flight marks) fails: nothing
// reaches the consumer, the step is undone and retried, kRetryDelay apart
// rather than in a busy loop, and once the write works every message comes
// once, in order, as attempt 1.
TEST_F(FaultTest, AFailedDeliveryWriteDeliversNothingUntilItClears) {
  Ledger ledger;
  ASSERT_TRUE(engine_->RegisterGroup(kTopic, kGroup).ok());
  for (int i = 0; i < 5; ++i) {
    const std::string id = absl::StrCat("m", i);
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  // Ready in the group before anyone consumes; from here on no synced
  // write happens until the fault clears.
  ASSERT_TRUE(Eventually([&] { return Count(Table::kReady) == 5; }));
  const uint64_t failed_before = store_.counts().failed_writes;
  store_.FailWritesIf(
      UnsyncedWriting(Table::kInFlight, WriteBatch::Operation::Kind::kPut),
      IoError());
  const absl::Time start = absl::Now();
  auto sub = Subscribe();
  AwaitFailedWrites(failed_before, 4);
  // Only the dispatcher's steps write in-flight marks: the first failed at
  // once, each retry waited. (A lower bound: slowness only adds to it.)
  EXPECT_GE(absl::Now() - start, 3 * broker::Dispatcher::kRetryDelay);
  EXPECT_THAT(sub->TakeQueued(), IsEmpty());
  EXPECT_EQ(Count(Table::kInFlight), 0u);
  EXPECT_EQ(Count(Table::kReady), 5u);

  store_.FailWrites(absl::OkStatus());
  std::vector<Received> got = sub->Take(5, kWait);
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].delivery.id(), absl::StrCat("m", i));
    ledger.Delivered(got[i].delivery, clock_.Now());
    EXPECT_TRUE(sub->Ack({got[i].delivery.id()}));
  }
  Settle(*sub, ledger);
  ledger.Check();
}

// The ack write fails: the acks are kept and retried, the messages stay
// stored until it works, and an acked delivery does not come again, not
// even after its ack timeout has passed.
TEST_F(FaultTest, AFailedAckWriteIsRetriedAndNothingComesAgain) {
  Ledger ledger;
  auto sub = Subscribe();
  for (int i = 0; i < 5; ++i) {
    const std::string id = absl::StrCat("m", i);
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  std::vector<Received> got = sub->Take(5, kWait);
  ASSERT_EQ(got.size(), 5u);
  const uint64_t failed_before = store_.counts().failed_writes;
  store_.FailWritesIf(
      UnsyncedWriting(Table::kInFlight, WriteBatch::Operation::Kind::kDelete),
      IoError());
  std::vector<std::string> ids;
  for (const Received& r : got) {
    ledger.Delivered(r.delivery, clock_.Now());
    ids.push_back(r.delivery.id());
  }
  EXPECT_TRUE(sub->Ack(ids));
  AwaitFailedWrites(failed_before, 3);
  EXPECT_EQ(Count(Table::kMessages), 5u);
  EXPECT_EQ(Count(Table::kInFlight), 5u);
  // Past every ack timeout: acked deliveries have no timer left.
  clock_.Advance(kAckTimeout + absl::Seconds(1));
  AwaitFailedWrites(failed_before, 6);

  store_.FailWrites(absl::OkStatus());
  Settle(*sub, ledger);
  ledger.Check();
}

// A consumer disconnects while every unsynced write fails: its deliveries
// go back to the group in memory, and once writes work they reach the next
// consumer as attempt 2.
TEST_F(FaultTest, ADisconnectDuringFailingWritesRedeliversWithAHigherAttempt) {
  Ledger ledger;
  auto first = Subscribe();
  for (int i = 0; i < 3; ++i) {
    const std::string id = absl::StrCat("m", i);
    ASSERT_TRUE(Publish(id).ok());
    ledger.Expect(id, Ledger::Fate::kDeliver);
  }
  for (const Received& r : first->Take(3, kWait)) {
    ledger.Delivered(r.delivery, clock_.Now());
  }
  ASSERT_TRUE(ledger.AllDelivered());
  const uint64_t failed_before = store_.counts().failed_writes;
  store_.FailWritesIf(FaultyStore::Unsynced, IoError());
  first->Cancel();
  ASSERT_TRUE(first->WaitEnd(kWait).has_value());
  first.reset();
  auto second = Subscribe();
  AwaitFailedWrites(failed_before, 3);
  EXPECT_THAT(second->TakeQueued(), IsEmpty());

  store_.FailWrites(absl::OkStatus());
  std::vector<Received> got = second->Take(3, kWait);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].delivery.id(), absl::StrCat("m", i));
    EXPECT_EQ(got[i].delivery.attempt(), 2u);
    ledger.Delivered(got[i].delivery, clock_.Now());
    EXPECT_TRUE(second->Ack({got[i].delivery.id()}));
  }
  Settle(*second, ledger);
  ledger.Check({"m0", "m1", "m2"});
}

// Unsynced writes fail and recover again and again while producers publish
// (synced writes keep working) and a consumer acks: the broker recovers
// each time without a restart, and every message comes exactly once.
TEST_F(FaultTest, UnsyncedFaultsThatComeAndGoLoseAndRepeatNothing) {
  Ledger ledger;
  auto sub = Subscribe();
  int next = 0;
  for (int round = 0; round < 4; ++round) {
    const uint64_t failed_before = store_.counts().failed_writes;
    store_.FailWritesIf(FaultyStore::Unsynced, IoError());
    for (int i = 0; i < 5; ++i) {
      const std::string id = absl::StrCat("m", next++);
      ASSERT_TRUE(Publish(id).ok());
      ledger.Expect(id, Ledger::Fate::kDeliver);
    }
    AwaitFailedWrites(failed_before, 2);
    store_.FailWrites(absl::OkStatus());
    Drain(*sub, ledger);
  }
  Settle(*sub, ledger);
  ledger.Check();
}

}  // namespace
}  // namespace hourglass::api
