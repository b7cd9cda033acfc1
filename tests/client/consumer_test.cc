// client::Consumer against a real hourglassd: credit, acks, nacks, the
// clean end, reconnecting after a restart, and the handler form.

#include "client/consumer.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "client/publisher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::client {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr absl::Duration kWait = absl::Seconds(30);

std::vector<std::string> Ids(const std::vector<Delivery>& deliveries) {
  std::vector<std::string> ids;
  for (const Delivery& d : deliveries) {
    ids.push_back(absl::StrCat(d.id, "@", d.attempt));
  }
  return ids;
}

class ConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon(0); }

  void StartDaemon(int port) {
    auto daemon = testing::Daemon::Start(
        HOURGLASSD_PATH, dir_.path() + "/data",
        {absl::StrCat("--listen=127.0.0.1:", port), "--shutdown_grace=500ms"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    if (channel_ != nullptr) return;  // A restart: same address.
    ChannelOptions options;
    options.address = daemon_->address();
    absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = *channel;
    publisher_ = std::make_unique<Publisher>(channel_);
  }

  void Publish(const std::string& topic, const std::string& id,
               absl::Duration delay = absl::ZeroDuration()) {
    Message m;
    m.topic = topic;
    m.id = id;
    m.payload = "payload of " + id;
    m.delay = delay;
    absl::StatusOr<Receipt> receipt = publisher_->Publish(m);
    ASSERT_TRUE(receipt.ok()) << receipt.status();
  }

  std::unique_ptr<Consumer> Subscribe(ConsumerOptions options,
                                      Consumer::Handler handler = nullptr) {
    absl::StatusOr<std::unique_ptr<Consumer>> consumer =
        Consumer::Subscribe(channel_, std::move(options), std::move(handler));
    EXPECT_TRUE(consumer.ok()) << consumer.status();
    return consumer.ok() ? *std::move(consumer) : nullptr;
  }

  // In-flight count of the group, from the broker's stats.
  int64_t InFlight(const std::string& topic, const std::string& group) {
    Admin admin(channel_);
    hourglass::v1::GetStatsRequest request;
    request.set_topic(topic);
    absl::StatusOr<hourglass::v1::GetStatsResponse> stats =
        admin.GetStats(request);
    if (!stats.ok()) return -1;
    for (const auto& t : stats->topics()) {
      for (const auto& g : t.groups()) {
        if (g.group() == group) return static_cast<int64_t>(g.in_flight());
      }
    }
    return -1;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
  std::shared_ptr<Channel> channel_;
  std::unique_ptr<Publisher> publisher_;
};

ConsumerOptions Options(const std::string& topic, const std::string& group) {
  ConsumerOptions options;
  options.topic = topic;
  options.group = group;
  options.rpc = ConsumerOptions::Rpc::kSubscribe;
  return options;
}

TEST_F(ConsumerTest, ReceivesAcksAndNacks) {
  std::unique_ptr<Consumer> consumer = Subscribe(Options("t", "g"));
  ASSERT_NE(consumer, nullptr);
  Publish("t", "a");
  Publish("t", "b");
  std::vector<Delivery> got = consumer->Receive(2, absl::Now() + kWait);
  if (got.size() < 2) {
    for (Delivery& d : consumer->Receive(1, absl::Now() + kWait)) {
      got.push_back(std::move(d));
    }
  }
  ASSERT_THAT(Ids(got), ElementsAre("a@1", "b@1"));
  EXPECT_EQ(got[0].payload, "payload of a");
  EXPECT_EQ(got[0].topic, "t");
  EXPECT_LE(got[0].deliver_at, absl::Now());
  EXPECT_LE(got[0].published_at, got[0].deliver_at);
  EXPECT_FALSE(consumer->AwaitAcked(absl::Now()));

  ASSERT_TRUE(consumer->Ack("a").ok());
  ASSERT_TRUE(consumer->Nack("b").ok());
  EXPECT_TRUE(consumer->AwaitAcked(absl::Now()));
  EXPECT_THAT(Ids(consumer->Receive(1, absl::Now() + kWait)),
              ElementsAre("b@2"));
  ASSERT_TRUE(consumer->Ack("b").ok());
  EXPECT_TRUE(testing::Eventually([&] { return InFlight("t", "g") == 0; }));
  EXPECT_TRUE(consumer->Close(absl::Now() + kWait).ok());
  // Closed: nothing more goes out.
  EXPECT_EQ(consumer->Ack("b").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ConsumerTest, CreditBoundsTheDeliveriesHeld) {
  ConsumerOptions options = Options("credit", "g");
  options.max_in_flight = 2;
  std::unique_ptr<Consumer> consumer = Subscribe(options);
  ASSERT_NE(consumer, nullptr);
  for (const char* id : {"m1", "m2", "m3"}) Publish("credit", id);
  std::vector<Delivery> got;
  while (got.size() < 2) {
    std::vector<Delivery> more = consumer->Receive(3, absl::Now() + kWait);
    ASSERT_FALSE(more.empty());
    for (Delivery& d : more) got.push_back(std::move(d));
  }
  EXPECT_THAT(Ids(got), ElementsAre("m1@1", "m2@1"));
  // The broker holds the third back: two in flight, and nothing more came.
  EXPECT_EQ(InFlight("credit", "g"), 2);
  EXPECT_TRUE(consumer->Receive(1, absl::Now()).empty());

  ASSERT_TRUE(consumer->Ack("m1").ok());
  EXPECT_THAT(Ids(consumer->Receive(1, absl::Now() + kWait)),
              ElementsAre("m3@1"));
}

TEST_F(ConsumerTest, CloseHandsWhatIsNotAckedBackAtOnce) {
  ConsumerOptions options = Options("back", "g");
  options.ack_timeout = absl::Hours(1);
  std::unique_ptr<Consumer> first = Subscribe(options);
  ASSERT_NE(first, nullptr);
  Publish("back", "x");
  ASSERT_EQ(first->Receive(1, absl::Now() + kWait).size(), 1u);
  EXPECT_TRUE(first->Close(absl::Now() + kWait).ok());

  // Not after the hour's ack timeout: at once.
  std::unique_ptr<Consumer> second = Subscribe(options);
  ASSERT_NE(second, nullptr);
  const std::vector<Delivery> got = second->Receive(1, absl::Now() + kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, "x");
}

TEST_F(ConsumerTest, ReconnectsAfterTheBrokerRestarts) {
  ConsumerOptions options = Options("restart", "g");
  options.backoff.initial = absl::Milliseconds(10);
  options.backoff.max = absl::Milliseconds(100);
  std::unique_ptr<Consumer> consumer = Subscribe(options);
  ASSERT_NE(consumer, nullptr);
  const int port = daemon_->port();
  EXPECT_EQ(daemon_->Stop(), 0);
  ASSERT_NO_FATAL_FAILURE(StartDaemon(port));
  Publish("restart", "after");
  const std::vector<Delivery> got = consumer->Receive(1, absl::Now() + kWait);
  EXPECT_THAT(Ids(got), ElementsAre("after@1"));
  EXPECT_GE(consumer->reconnects(), 1u);
  EXPECT_FALSE(consumer->ended().has_value());
  ASSERT_TRUE(consumer->Ack("after").ok());
  EXPECT_TRUE(consumer->Close(absl::Now() + kWait).ok());
}

TEST_F(ConsumerTest, WithoutReconnectingTheFirstEndIsFinal) {
  ConsumerOptions options = Options("final", "g");
  options.reconnect = false;
  std::unique_ptr<Consumer> consumer = Subscribe(options);
  ASSERT_NE(consumer, nullptr);
  EXPECT_EQ(daemon_->Stop(), 0);
  const std::optional<absl::Status> ended =
      consumer->ended(absl::Now() + kWait);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->code(), absl::StatusCode::kUnavailable) << *ended;
  EXPECT_TRUE(consumer->Receive(1).empty());
  EXPECT_EQ(consumer->Close(absl::Now()), *ended);
}

TEST_F(ConsumerTest, CancelEndsAtOnce) {
  std::unique_ptr<Consumer> consumer = Subscribe(Options("cancel", "g"));
  ASSERT_NE(consumer, nullptr);
  consumer->Cancel();
  const std::optional<absl::Status> ended =
      consumer->ended(absl::Now() + kWait);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->code(), absl::StatusCode::kCancelled) << *ended;
}

TEST_F(ConsumerTest, AHandlerGetsBatchesAndAcksFromThem) {
  absl::Mutex mu;
  std::vector<std::string> ids;
  size_t responses = 0;
  ConsumerOptions options = Options("batches", "g");
  options.rpc = ConsumerOptions::Rpc::kSubscribeBatches;
  options.max_in_flight = 1000;
  // Published before the subscription, so that they wait for it together.
  std::vector<Message> messages;
  for (int i = 0; i < 50; ++i) {
    Message m;
    m.topic = "batches";
    m.id = absl::StrCat("m", i);
    messages.push_back(std::move(m));
  }
  ASSERT_TRUE(publisher_->PublishBatch(std::move(messages)).ok());
  hourglass::v1::CreateGroupRequest group;
  group.set_topic("batches");
  group.set_group("g");
  ASSERT_TRUE(Admin(channel_).CreateGroup(group).ok());
  std::unique_ptr<Consumer> consumer =
      Subscribe(options, [&](Consumer& self, std::vector<Delivery> deliveries) {
        std::vector<std::string> acks;
        for (const Delivery& d : deliveries) {
          EXPECT_LE(d.received_at, absl::Now());
          EXPECT_GE(d.received_at, d.deliver_at);
          acks.push_back(d.id);
        }
        const absl::Status acked = self.Ack(acks);
        EXPECT_TRUE(acked.ok()) << acked;
        absl::MutexLock lock(&mu);
        for (std::string& id : acks) ids.push_back(std::move(id));
        ++responses;
      });
  ASSERT_NE(consumer, nullptr);
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(
            +[](std::vector<std::string>* v) { return v->size() >= 50; }, &ids),
        kWait));
    EXPECT_EQ(ids.size(), 50u);
    // SubscribeBatches: fewer responses than deliveries.
    EXPECT_LT(responses, 50u);
  }
  EXPECT_TRUE(
      testing::Eventually([&] { return InFlight("batches", "g") == 0; }));
  EXPECT_TRUE(consumer->Close(absl::Now() + kWait).ok());
}

TEST_F(ConsumerTest, ARefusedSubscriptionSaysWhy) {
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Subscribe(channel_, Options("a b", "g"));
  EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(consumer.status().message()),
              ::testing::HasSubstr("\"a b\" has a space"));
}

}  // namespace
}  // namespace hourglass::client
