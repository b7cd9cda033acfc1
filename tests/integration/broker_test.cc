// End to end: a real hourglassd child process and real gRPC clients over
// loopback. Time is real here, so tests wait for conditions with deadlines
// and check times against the broker's own deliver_at. Where a test shows
// that something does not come, it waits for a condition that proves it
// (a later message came first, or the broker's counts say what it holds),
// not for a short stretch of time.

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/daemon.h"
#include "tests/testing/eventually.h"
#include "tests/testing/seed.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using testing::BrokerClient;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::Received;
using testing::Subscription;
using ::testing::UnorderedElementsAreArray;

constexpr absl::Duration kWait = absl::Seconds(30);

// "id@attempt" of each delivery.
std::vector<std::string> Ids(const std::vector<Received>& received) {
  std::vector<std::string> ids;
  for (const Received& r : received) {
    ids.push_back(absl::StrCat(r.delivery.id(), "@", r.delivery.attempt()));
  }
  return ids;
}

absl::Time DeliverAt(const Received& r) {
  return testing::ToTime(r.delivery.deliver_at());
}

class BrokerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon(); }

  void StartDaemon() {
    auto daemon =
        testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/data",
                               {"--max_attempts=3", "--shutdown_grace=500ms"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    std::shared_ptr<grpc::Channel> channel = daemon_->Channel();
    client_ = std::make_unique<BrokerClient>(channel);
    admin_ = hourglass::v1::Admin::NewStub(channel);
  }

  // Publishes one message; returns its id.
  std::string Publish(const std::string& topic, absl::Duration delay,
                      const std::string& id = "") {
    absl::StatusOr<hourglass::v1::Receipt> receipt =
        client_->Publish(topic, "payload", delay, id);
    EXPECT_TRUE(receipt.ok()) << receipt.status();
    return receipt.ok() ? receipt->id() : "";
  }

  // Whether the broker's statistics come to show `ready` messages waiting
  // in `group` of `topic` and `in_flight` delivered and unacknowledged,
  // within kWait: the broker has then done all it would with them.
  bool EventuallyHolds(const std::string& topic, const std::string& group,
                       uint64_t ready, uint64_t in_flight) {
    return testing::Eventually(
        [&] {
          grpc::ClientContext context;
          context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
          hourglass::v1::GetStatsRequest request;
          request.set_topic(topic);
          hourglass::v1::GetStatsResponse stats;
          if (!admin_->GetStats(&context, request, &stats).ok()) return false;
          for (const hourglass::v1::TopicStats& t : stats.topics()) {
            for (const hourglass::v1::GroupStats& g : t.groups()) {
              if (g.group() == group) {
                return g.ready() == ready && g.in_flight() == in_flight;
              }
            }
          }
          return false;
        },
        kWait);
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
  std::unique_ptr<BrokerClient> client_;
  std::unique_ptr<hourglass::v1::Admin::Stub> admin_;
};

// 10,000 messages with random delays in [0, 3 s], one consumer acking as
// it goes: each arrives exactly once and none before its deliver_at. The
// lateness percentiles are printed; BENCHMARKS.md records them.
TEST_F(BrokerTest, TenThousandRandomDelaysArriveOnceAndNeverEarly) {
  const uint64_t seed = testing::SeedFromEnvironment();
  std::cout << "seed " << seed << " (HOURGLASS_SEED to replay)\n";
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> delay_ms(0, 3000);

  auto consumer = client_->Subscribe("lateness", "g", /*max_in_flight=*/1000);
  constexpr int kMessages = 10'000;
  constexpr int kBatch = 100;
  for (int start = 0; start < kMessages; start += kBatch) {
    hourglass::v1::PublishRequest request;
    for (int i = start; i < start + kBatch; ++i) {
      *request.add_messages() = testing::NewMessage(
          "lateness", "p", absl::Milliseconds(delay_ms(random)),
          absl::StrCat("m", i));
    }
    hourglass::v1::PublishResponse response;
    ASSERT_TRUE(client_->Publish(request, &response).ok());
  }

  std::set<std::string> seen;
  std::vector<absl::Duration> lateness;
  int early = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (seen.size() < kMessages && absl::Now() < deadline) {
    std::vector<Received> got = consumer->Take(1, absl::Seconds(5));
    for (const Received& r : consumer->TakeQueued()) got.push_back(r);
    std::vector<std::string> ids;
    for (const Received& r : got) {
      EXPECT_TRUE(seen.insert(r.delivery.id()).second)
          << r.delivery.id() << " arrived twice";
      EXPECT_EQ(r.delivery.attempt(), 1u);
      if (r.at < DeliverAt(r)) ++early;
      lateness.push_back(r.at - DeliverAt(r));
      ids.push_back(r.delivery.id());
    }
    if (!ids.empty()) consumer->Ack(ids);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kMessages));
  EXPECT_EQ(early, 0);
  ASSERT_FALSE(lateness.empty());
  std::sort(lateness.begin(), lateness.end());
  auto at = [&](double q) {
    return lateness[std::min(lateness.size() - 1,
                             static_cast<size_t>(q * lateness.size()))];
  };
  std::cout << absl::StrFormat(
      "lateness over %d deliveries: p50 %s, p99 %s, max %s\n", lateness.size(),
      absl::FormatDuration(at(0.50)), absl::FormatDuration(at(0.99)),
      absl::FormatDuration(lateness.back()));
}

TEST_F(BrokerTest, EveryGroupGetsEveryMessage) {
  auto audit = client_->Subscribe("orders", "audit");
  auto billing = client_->Subscribe("orders", "billing");
  // One Publish: both delays count from the same instant, so o-1 is due
  // first however long the call takes.
  hourglass::v1::PublishRequest request;
  *request.add_messages() =
      testing::NewMessage("orders", "p", absl::Milliseconds(200), "o-2");
  *request.add_messages() =
      testing::NewMessage("orders", "p", absl::Milliseconds(100), "o-1");
  hourglass::v1::PublishResponse response;
  ASSERT_TRUE(client_->Publish(request, &response).ok());
  EXPECT_THAT(Ids(audit->Take(2, kWait)), ElementsAre("o-1@1", "o-2@1"));
  EXPECT_THAT(Ids(billing->Take(2, kWait)), ElementsAre("o-1@1", "o-2@1"));
}

TEST_F(BrokerTest, ConsumersOfOneGroupEachGetADifferentShare) {
  auto first = client_->Subscribe("jobs", "workers", /*max_in_flight=*/1000);
  auto second = client_->Subscribe("jobs", "workers", /*max_in_flight=*/1000);

  hourglass::v1::PublishRequest request;
  std::vector<std::string> all;
  for (int i = 0; i < 200; ++i) {
    all.push_back(absl::StrCat("job-", i));
    *request.add_messages() =
        testing::NewMessage("jobs", "p", absl::Milliseconds(100), all.back());
  }
  hourglass::v1::PublishResponse response;
  ASSERT_TRUE(client_->Publish(request, &response).ok());
  std::vector<std::string> got;
  size_t from_first = 0, from_second = 0;
  const absl::Time deadline = absl::Now() + kWait;
  while (got.size() < all.size() && absl::Now() < deadline) {
    for (const Received& r : first->Take(1, absl::Milliseconds(100))) {
      got.push_back(r.delivery.id());
      ++from_first;
    }
    for (const Received& r : second->TakeQueued()) {
      got.push_back(r.delivery.id());
      ++from_second;
    }
  }
  for (const Received& r : first->TakeQueued()) got.push_back(r.delivery.id());
  EXPECT_THAT(got, UnorderedElementsAreArray(all));  // Each exactly once.
  EXPECT_GT(from_first, 0u);
  EXPECT_GT(from_second, 0u);
}

TEST_F(BrokerTest, AStreamNeverHoldsMoreThanItsCredit) {
  auto consumer = client_->Subscribe("credit", "g", /*max_in_flight=*/5);
  std::vector<std::string> ids;
  hourglass::v1::PublishRequest request;
  for (int i = 0; i < 12; ++i) {
    ids.push_back(absl::StrCat("c", i < 10 ? "0" : "", i));
    *request.add_messages() =
        testing::NewMessage("credit", "p", absl::ZeroDuration(), ids.back());
  }
  hourglass::v1::PublishResponse response;
  ASSERT_TRUE(client_->Publish(request, &response).ok());
  EXPECT_THAT(Ids(consumer->Take(5, kWait)),
              ElementsAre("c00@1", "c01@1", "c02@1", "c03@1", "c04@1"));
  // A sixth would need credit: once all twelve have come due, the other
  // seven wait in the group while nothing is acked.
  ASSERT_TRUE(EventuallyHolds("credit", "g", /*ready=*/7, /*in_flight=*/5));
  EXPECT_THAT(consumer->TakeQueued(), IsEmpty());
  consumer->Ack({"c00", "c01"});
  EXPECT_THAT(Ids(consumer->Take(2, kWait)), ElementsAre("c05@1", "c06@1"));
  ASSERT_TRUE(EventuallyHolds("credit", "g", /*ready=*/5, /*in_flight=*/5));
  EXPECT_THAT(consumer->TakeQueued(), IsEmpty());
}

TEST_F(BrokerTest, AnUnackedDeliveryComesAgainAfterTheAckTimeout) {
  constexpr absl::Duration kAckTimeout = absl::Seconds(1);
  auto consumer = client_->Subscribe("retry", "g", 0, kAckTimeout);
  Publish("retry", absl::ZeroDuration(), "x");
  std::vector<Received> first = consumer->Take(1, kWait);
  ASSERT_THAT(Ids(first), ElementsAre("x@1"));
  std::vector<Received> second = consumer->Take(1, kWait);
  ASSERT_THAT(Ids(second), ElementsAre("x@2"));
  // The first was sent at or after its deliver_at, the second at least the
  // ack timeout after that.
  EXPECT_GE(second[0].at, DeliverAt(first[0]) + kAckTimeout);
  consumer->Ack({"x"});
  // Due well after a third attempt would have been: it comes next.
  Publish("retry", kAckTimeout + absl::Milliseconds(500), "after");
  EXPECT_THAT(Ids(consumer->Take(1, kWait)), ElementsAre("after@1"));
}

TEST_F(BrokerTest, ANackComesBackAfterItsDelay) {
  auto consumer = client_->Subscribe("nack", "g");
  Publish("nack", absl::ZeroDuration(), "x");
  ASSERT_THAT(Ids(consumer->Take(1, kWait)), ElementsAre("x@1"));
  const absl::Time nacked = absl::Now();
  consumer->Nack("x", absl::Seconds(1));
  std::vector<Received> again = consumer->Take(1, kWait);
  ASSERT_THAT(Ids(again), ElementsAre("x@2"));
  EXPECT_GE(again[0].at - nacked, absl::Seconds(1));
}

TEST_F(BrokerTest, AfterMaxAttemptsAMessageGoesToItsDeadLetterTopic) {
  auto consumer = client_->Subscribe("pay", "g", 0, absl::Seconds(1));
  Publish("pay", absl::ZeroDuration(), "p-1");
  EXPECT_THAT(Ids(consumer->Take(3, kWait)),
              ElementsAre("p-1@1", "p-1@2", "p-1@3"));  // --max_attempts=3
  auto dead = client_->Subscribe("pay.dlq", "ops");
  std::vector<Received> letters = dead->Take(1, kWait);
  ASSERT_THAT(Ids(letters), ElementsAre("p-1@4"));
  EXPECT_EQ(letters[0].delivery.topic(), "pay.dlq");
  EXPECT_EQ(letters[0].delivery.payload(), "payload");
  // Due after a fourth attempt would have been: it comes next.
  Publish("pay", absl::Seconds(1), "after");
  EXPECT_THAT(Ids(consumer->Take(1, kWait)), ElementsAre("after@1"));
}

// The only consumer holds its whole credit (one unacked delivery) while
// the next message's deadline passes: once it acks, that message is never
// delivered (the one behind it comes instead) and counts as expired; with
// on_expire=dead_letter it is found in <topic>.dlq.
TEST_F(BrokerTest, AMessagePastItsDeadlineIsNeverDeliveredToAStalledGroup) {
  for (const bool letter : {false, true}) {
    SCOPED_TRACE(letter ? "dead_letter" : "drop");
    const std::string topic = letter ? "offers" : "quotes";
    auto consumer = client_->Subscribe(topic, "g", /*max_in_flight=*/1);
    // One to two seconds ahead, in whole seconds.
    const absl::Time expire_at =
        absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) + 2);
    hourglass::v1::PublishRequest request;
    *request.add_messages() =
        testing::NewMessage(topic, "p", absl::ZeroDuration(), "first");
    hourglass::v1::Message* expiring = request.add_messages();
    *expiring = testing::NewMessage(topic, "p", absl::ZeroDuration(), "second");
    expiring->mutable_expire_at()->set_seconds(absl::ToUnixSeconds(expire_at));
    if (letter) expiring->set_on_expire(hourglass::v1::ON_EXPIRE_DEAD_LETTER);
    *request.add_messages() =
        testing::NewMessage(topic, "p", absl::ZeroDuration(), "third");
    hourglass::v1::PublishResponse response;
    ASSERT_TRUE(client_->Publish(request, &response).ok());
    ASSERT_THAT(Ids(consumer->Take(1, kWait)), ElementsAre("first@1"));
    ASSERT_TRUE(EventuallyHolds(topic, "g", /*ready=*/2, /*in_flight=*/1));
    // Until the broker's clock has passed the deadline: a message due just
    // after it, on a topic of its own, is delivered (never early) only then.
    auto clock = client_->Subscribe(topic + "-clock", "g");
    hourglass::v1::PublishRequest tick;
    *tick.add_messages() = testing::NewMessage(
        topic + "-clock", "p", absl::ZeroDuration(), "past-the-deadline");
    // expire_at is a whole second: due a millisecond after it.
    tick.mutable_messages(0)->mutable_deliver_at()->set_seconds(
        absl::ToUnixSeconds(expire_at));
    tick.mutable_messages(0)->mutable_deliver_at()->set_nanos(1'000'000);
    ASSERT_TRUE(client_->Publish(tick, &response).ok());
    ASSERT_THAT(Ids(clock->Take(1, kWait)), ElementsAre("past-the-deadline@1"));
    consumer->Ack({"first"});
    EXPECT_THAT(Ids(consumer->Take(1, kWait)), ElementsAre("third@1"));
    ASSERT_TRUE(EventuallyHolds(topic, "g", /*ready=*/0, /*in_flight=*/1));
    EXPECT_THAT(consumer->TakeQueued(), IsEmpty());
    const std::string expired =
        absl::StrCat("\nhourglass_expired_total{topic=\"", topic, "\"} 1\n");
    EXPECT_TRUE(testing::Eventually(
        [&] {
          return daemon_->ScrapeMetrics().find(expired) != std::string::npos;
        },
        kWait))
        << daemon_->ScrapeMetrics();
    if (letter) {
      auto dead = client_->Subscribe(topic + ".dlq", "ops");
      std::vector<Received> letters = dead->Take(1, kWait);
      ASSERT_THAT(Ids(letters), ElementsAre("second@1"));
      EXPECT_EQ(letters[0].delivery.topic(), topic + ".dlq");
      EXPECT_EQ(letters[0].delivery.payload(), "p");
    }
  }
}

TEST_F(BrokerTest, ADisconnectHandsDeliveriesBackAtOnce) {
  auto first = client_->Subscribe("handback", "g", /*max_in_flight=*/2);
  Publish("handback", absl::ZeroDuration(), "a");
  Publish("handback", absl::ZeroDuration(), "b");
  ASSERT_THAT(Ids(first->Take(2, kWait)), ElementsAre("a@1", "b@1"));
  auto second = client_->Subscribe("handback", "g");
  const absl::Time dropped = absl::Now();
  first->Cancel();
  std::vector<Received> back = second->Take(2, kWait);
  EXPECT_THAT(Ids(back), ElementsAre("a@2", "b@2"));
  // At once: long before the 30 s ack timeout.
  ASSERT_EQ(back.size(), 2u);
  EXPECT_LT(back[1].at - dropped, absl::Seconds(5));
}

// Cancel races with the message coming due, 10,000 times: a cancelled
// message is never delivered, and one that was not cancelled is.
TEST_F(BrokerTest, ACancelRacingExpiryEitherWinsOrLosesNeverBoth) {
  // Nothing is acknowledged until the rounds are over, so the ack timeout
  // must outlast them however slow the machine is: each delivery comes
  // exactly once.
  auto consumer = client_->Subscribe("race", "g", /*max_in_flight=*/10'000,
                                     /*ack_timeout=*/absl::Hours(1));
  constexpr int kRounds = 200;
  constexpr int kPerRound = 50;
  std::set<std::string> cancelled, not_found;
  int trial = 0;
  for (int round = 0; round < kRounds; ++round) {
    // Due 1 to 10 ms from now; cancels start at once and overlap.
    hourglass::v1::PublishRequest request;
    std::vector<std::string> ids;
    for (int i = 0; i < kPerRound; ++i, ++trial) {
      ids.push_back(absl::StrCat("r", trial));
      *request.add_messages() = testing::NewMessage(
          "race", "p", absl::Milliseconds(1 + i % 10), ids.back());
    }
    hourglass::v1::PublishResponse response;
    ASSERT_TRUE(client_->Publish(request, &response).ok());
    for (const std::string& id : ids) {
      const grpc::Status status = client_->Cancel("race", id);
      if (status.ok()) {
        cancelled.insert(id);
      } else {
        ASSERT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND)
            << status.error_message();
        not_found.insert(id);
      }
    }
  }
  // A last message due after every other: once it arrives, everything due
  // before it has been delivered (one consumer, due order).
  Publish("race", absl::Milliseconds(50), "sentinel");
  std::set<std::string> delivered;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!delivered.contains("sentinel") && absl::Now() < deadline) {
    for (const Received& r : consumer->Take(1, absl::Seconds(1))) {
      EXPECT_TRUE(delivered.insert(r.delivery.id()).second);
      // Frees the credit the sentinel needs if every cancel lost.
      EXPECT_TRUE(consumer->Ack({r.delivery.id()}));
    }
  }
  delivered.erase("sentinel");
  std::cout << cancelled.size() << " cancels won, " << not_found.size()
            << " lost to expiry\n";
  EXPECT_EQ(cancelled.size() + not_found.size(),
            static_cast<size_t>(kRounds * kPerRound));
  EXPECT_EQ(delivered, not_found);  // Never both, never neither.
}

TEST_F(BrokerTest, GroupsAndScheduledMessagesSurviveARestart) {
  // Two groups, registered by their first streams.
  client_->Subscribe("durable", "a")->Close();
  client_->Subscribe("durable", "b")->Close();
  Publish("durable", absl::Milliseconds(1500), "d-1");
  ASSERT_EQ(daemon_->Stop(), 0) << daemon_->process().output();
  StartDaemon();
  // Both groups still exist: each gets the message (in the waiting area
  // only the first would).
  auto b = client_->Subscribe("durable", "b");
  auto a = client_->Subscribe("durable", "a");
  EXPECT_THAT(Ids(a->Take(1, kWait)), ElementsAre("d-1@1"));
  EXPECT_THAT(Ids(b->Take(1, kWait)), ElementsAre("d-1@1"));
}

TEST_F(BrokerTest, APublishRepeatingAnIdGetsTheFirstReceiptAndOneDelivery) {
  auto consumer = client_->Subscribe("orders", "g");
  absl::StatusOr<hourglass::v1::Receipt> first =
      client_->Publish("orders", "first", absl::Milliseconds(300), "order-1");
  absl::StatusOr<hourglass::v1::Receipt> again =
      client_->Publish("orders", "second", absl::Milliseconds(100), "order-1");
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_FALSE(first->duplicate());
  EXPECT_TRUE(again->duplicate());
  EXPECT_EQ(again->id(), "order-1");
  EXPECT_EQ(testing::ToTime(again->deliver_at()),
            testing::ToTime(first->deliver_at()));
  std::vector<Received> got = consumer->Take(1, kWait);
  ASSERT_THAT(Ids(got), ElementsAre("order-1@1"));
  EXPECT_EQ(got[0].delivery.payload(), "first");
  consumer->Ack({"order-1"});
  // Due after a second message of the repeated publish would have been:
  // it comes next.
  Publish("orders", absl::Seconds(1), "after");
  EXPECT_THAT(Ids(consumer->Take(1, kWait)), ElementsAre("after@1"));
}

TEST_F(BrokerTest, SigtermEndsStreamsWithUnavailable) {
  auto consumer = client_->Subscribe("bye", "g");
  Publish("bye", absl::ZeroDuration(), "x");
  ASSERT_THAT(Ids(consumer->Take(1, kWait)), ElementsAre("x@1"));
  EXPECT_EQ(daemon_->Stop(), 0) << daemon_->process().output();
  std::optional<grpc::Status> status = consumer->WaitEnd(kWait);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status->error_message(),
            "hourglassd is shutting down; reconnect later");
}

}  // namespace
}  // namespace hourglass
