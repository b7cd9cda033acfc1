// client::Publisher: against a FakeBroker for retries and deadlines (what a
// real broker does only by accident), and against a real hourglassd for
// what it answers.

#include "client/publisher.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/fake_broker.h"
#include "tests/testing/daemon.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::client {
namespace {

using ::testing::ElementsAre;
using testing::FakeBroker;

std::shared_ptr<Channel> ChannelTo(const std::string& address,
                                   absl::Duration timeout = absl::Seconds(10),
                                   const std::string& token = "") {
  ChannelOptions options;
  options.address = address;
  options.call_timeout = timeout;
  options.token = token;
  absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return *channel;
}

// Fast retries, so that tests of them take milliseconds.
PublisherOptions FastRetries() {
  PublisherOptions options;
  options.retry.max_attempts = 5;
  options.retry.backoff.initial = absl::Milliseconds(1);
  options.retry.backoff.max = absl::Milliseconds(5);
  return options;
}

Message WithId(const std::string& id) {
  Message m;
  m.topic = "t";
  m.payload = "p";
  m.id = id;
  return m;
}

std::vector<std::string> Ids(const std::vector<Receipt>& receipts) {
  std::vector<std::string> ids;
  for (const Receipt& r : receipts) ids.push_back(r.id);
  return ids;
}

TEST(PublisherFakeTest, RetriesUnavailableWhenEveryMessageHasAnId) {
  FakeBroker fake;
  fake.Script({FakeBroker::Fail(grpc::StatusCode::UNAVAILABLE, "disk"),
               FakeBroker::Fail(grpc::StatusCode::ABORTED, "busy")});
  Publisher publisher(ChannelTo(fake.address()), FastRetries());
  absl::StatusOr<std::vector<Receipt>> receipts =
      publisher.PublishBatch({WithId("a"), WithId("b")});
  ASSERT_TRUE(receipts.ok()) << receipts.status();
  EXPECT_THAT(Ids(*receipts), ElementsAre("a", "b"));
  // Three Publish calls with the same ids.
  const auto publishes = fake.publishes();
  ASSERT_EQ(publishes.size(), 3u);
  for (const auto& p : publishes) EXPECT_EQ(p.messages(1).id(), "b");
}

// A shard count no cluster has, from a faulty or hostile server, sizes
// nothing: the refusal comes back as it is, and nothing is split.
TEST(PublisherFakeTest, AShardCountNoClusterHasIsIgnored) {
  FakeBroker fake;
  for (const char* count : {"4097", "2147483647"}) {
    FakeBroker::Answer refused = FakeBroker::Fail(
        grpc::StatusCode::FAILED_PRECONDITION, "spans shards");
    refused.trailers = {{"hourglass-shards", count}};
    fake.Script({refused});
  }
  Publisher publisher(ChannelTo(fake.address()), FastRetries());
  for (int i = 0; i < 2; ++i) {
    Message other = WithId("b");
    other.topic = "u";
    EXPECT_EQ(publisher.PublishBatch({WithId("a"), other}).status(),
              absl::FailedPreconditionError("spans shards"));
  }
  EXPECT_EQ(fake.publishes().size(), 2u);
}

TEST(PublisherFakeTest, DoesNotRetryUnavailableWithoutIds) {
  FakeBroker fake;
  fake.Script({FakeBroker::Fail(grpc::StatusCode::UNAVAILABLE, "disk")});
  Publisher publisher(ChannelTo(fake.address()), FastRetries());
  absl::StatusOr<std::vector<Receipt>> receipts =
      publisher.PublishBatch({WithId("a"), WithId("")});
  EXPECT_EQ(receipts.status(), absl::UnavailableError("disk"));
  EXPECT_EQ(fake.publishes().size(), 1u);
}

TEST(PublisherFakeTest, RetriesAbortedButNeverBadRequests) {
  FakeBroker fake;
  fake.Script(
      {FakeBroker::Fail(grpc::StatusCode::INVALID_ARGUMENT, "message 0: bad")});
  Publisher publisher(ChannelTo(fake.address()), FastRetries());
  EXPECT_EQ(publisher.PublishBatch({WithId("a")}).status(),
            absl::InvalidArgumentError("message 0: bad"));
  EXPECT_EQ(fake.publishes().size(), 1u);
}

TEST(PublisherFakeTest, GivesUpAfterMaxAttempts) {
  FakeBroker fake;
  fake.Script({FakeBroker::Fail(grpc::StatusCode::ABORTED, "1"),
               FakeBroker::Fail(grpc::StatusCode::ABORTED, "2"),
               FakeBroker::Fail(grpc::StatusCode::ABORTED, "3")});
  PublisherOptions options = FastRetries();
  options.retry.max_attempts = 2;
  Publisher publisher(ChannelTo(fake.address()), options);
  EXPECT_EQ(publisher.PublishBatch({WithId("a")}).status(),
            absl::AbortedError("2"));
  EXPECT_EQ(fake.publishes().size(), 2u);
}

TEST(PublisherFakeTest, ACallWithoutAnswerEndsAtTheDeadline) {
  FakeBroker fake;
  fake.Script({FakeBroker::Hang()});
  Publisher publisher(ChannelTo(fake.address(), absl::Milliseconds(300)),
                      FastRetries());
  const absl::StatusOr<std::vector<Receipt>> receipts =
      publisher.PublishBatch({WithId("a")});
  EXPECT_EQ(receipts.status(),
            absl::DeadlineExceededError(absl::StrCat(
                "no answer from ", fake.address(), " within 300ms")));
  fake.Release();
}

TEST(PublisherFakeTest, SinglePublishesShareOneStream) {
  FakeBroker fake;
  Publisher publisher(ChannelTo(fake.address()));
  for (const char* id : {"a", "b", "c"}) {
    absl::StatusOr<Receipt> receipt = publisher.Publish(WithId(id));
    ASSERT_TRUE(receipt.ok()) << receipt.status();
    EXPECT_EQ(receipt->id, id);
  }
  EXPECT_EQ(fake.streams(), 1);
  EXPECT_EQ(fake.publishes().size(), 3u);
}

TEST(PublisherFakeTest, ARefusedRequestLeavesTheStreamOpen) {
  FakeBroker fake;
  fake.Script({FakeBroker::Fail(grpc::StatusCode::INVALID_ARGUMENT,
                                "message 0: topic \"a b\" has a space")});
  Publisher publisher(ChannelTo(fake.address()));
  EXPECT_EQ(publisher.Publish(WithId("a")).status(),
            absl::InvalidArgumentError("message 0: topic \"a b\" has a space"));
  EXPECT_TRUE(publisher.Publish(WithId("b")).ok());
  EXPECT_EQ(fake.streams(), 1);
}

TEST(PublisherFakeTest, ABrokenStreamIsReplacedAndTheRequestRetried) {
  FakeBroker fake;
  fake.Script({FakeBroker::Break()});
  Publisher publisher(ChannelTo(fake.address()), FastRetries());
  absl::StatusOr<Receipt> receipt = publisher.Publish(WithId("a"));
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(fake.streams(), 2);
  EXPECT_EQ(fake.publishes().size(), 2u);

  // Without an id the outcome of a broken stream stays unknown: no retry.
  fake.Script({FakeBroker::Break()});
  EXPECT_EQ(publisher.Publish(WithId("")).status(),
            absl::UnavailableError("going away"));
  EXPECT_EQ(fake.publishes().size(), 3u);
}

TEST(PublisherFakeTest, AStreamRequestWithoutAnswerEndsAtTheDeadline) {
  FakeBroker fake;
  fake.Script({FakeBroker::Hang()});
  PublisherOptions options;
  options.timeout = absl::Milliseconds(300);
  Publisher publisher(ChannelTo(fake.address()), options);
  const absl::Time start = absl::Now();
  EXPECT_EQ(publisher.Publish(WithId("a")).status(),
            absl::DeadlineExceededError(absl::StrCat(
                "no answer from ", fake.address(), " within 300ms")));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  fake.Release();
}

TEST(PublisherFakeTest, ManyAsyncPublishesInFlightAllComplete) {
  FakeBroker fake;
  PublisherOptions options;
  options.batch_rpc = PublisherOptions::BatchRpc::kPublishStream;
  Publisher publisher(ChannelTo(fake.address()), options);
  absl::Mutex mu;
  std::vector<std::string> ids;
  int left = 200;
  for (int i = 0; i < 200; ++i) {
    auto done = [&](absl::StatusOr<std::vector<Receipt>> receipts) {
      absl::MutexLock lock(&mu);
      EXPECT_TRUE(receipts.ok()) << receipts.status();
      if (receipts.ok()) ids.push_back(receipts->front().id);
      --left;
    };
    if (i % 2 == 0) {
      publisher.PublishBatchAsync({WithId(absl::StrCat(i))}, done);
    } else {
      publisher.PublishAsync(WithId(absl::StrCat(i)),
                             [done](absl::StatusOr<Receipt> r) mutable {
                               if (!r.ok()) return done(r.status());
                               done(std::vector<Receipt>{*r});
                             });
    }
  }
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &left));
  EXPECT_EQ(ids.size(), 200u);
  // Both forms went on the one stream, in order.
  EXPECT_EQ(fake.streams(), 1);
}

TEST(PublisherFakeTest, CancelRetriesOnlyAborted) {
  FakeBroker fake;
  fake.Script({FakeBroker::Fail(grpc::StatusCode::ABORTED, "writing")});
  Publisher publisher(ChannelTo(fake.address()), FastRetries());
  EXPECT_TRUE(publisher.Cancel("t", "a").ok());
  EXPECT_EQ(fake.cancels(), 2);

  fake.Script({FakeBroker::Fail(grpc::StatusCode::UNAVAILABLE, "gone")});
  EXPECT_EQ(publisher.Cancel("t", "a"), absl::UnavailableError("gone"));
  EXPECT_EQ(fake.cancels(), 3);
}

TEST(PublisherFakeTest, SendsTheTokenAsCallCredentialsOverPlaintext) {
  FakeBroker fake;
  Publisher publisher(
      ChannelTo(fake.address(), absl::Seconds(10), "secret-token-0123456789"));
  EXPECT_TRUE(publisher.Publish(WithId("a")).ok());
  EXPECT_TRUE(publisher.PublishBatch({WithId("b")}).ok());
  EXPECT_TRUE(publisher.Cancel("t", "b").ok());
  EXPECT_THAT(fake.authorizations(),
              ElementsAre("Bearer secret-token-0123456789",
                          "Bearer secret-token-0123456789",
                          "Bearer secret-token-0123456789"));
}

TEST(PublisherFakeTest, RefusesDelayAndDeliverAtTogether) {
  FakeBroker fake;
  Publisher publisher(ChannelTo(fake.address()));
  Message m = WithId("a");
  m.delay = absl::Seconds(1);
  m.deliver_at = absl::Now();
  EXPECT_EQ(publisher.PublishBatch({WithId("ok"), m}).status(),
            absl::InvalidArgumentError(
                "message 1: set delay or deliver_at, not both"));
  EXPECT_TRUE(fake.publishes().empty());
}

TEST(PublisherFakeTest, SendsTheDeadlineAndWhatToDoAtIt) {
  FakeBroker fake;
  Publisher publisher(ChannelTo(fake.address()));
  Message ttl = WithId("ttl");
  ttl.ttl = absl::Seconds(90);
  ttl.on_expire = Message::OnExpire::kDeadLetter;
  Message at = WithId("at");
  at.expire_at = absl::FromUnixSeconds(1'800'000'000);
  ASSERT_TRUE(publisher.PublishBatch({ttl, at, WithId("none")}).ok());
  const auto publishes = fake.publishes();
  ASSERT_EQ(publishes.size(), 1u);
  ASSERT_EQ(publishes[0].messages_size(), 3);
  const hourglass::v1::Message& m0 = publishes[0].messages(0);
  EXPECT_EQ(m0.ttl().seconds(), 90);
  EXPECT_FALSE(m0.has_expire_at());
  EXPECT_EQ(m0.on_expire(), hourglass::v1::ON_EXPIRE_DEAD_LETTER);
  const hourglass::v1::Message& m1 = publishes[0].messages(1);
  EXPECT_EQ(m1.expire_at().seconds(), 1'800'000'000);
  EXPECT_FALSE(m1.has_ttl());
  EXPECT_EQ(m1.on_expire(), hourglass::v1::ON_EXPIRE_DROP);
  EXPECT_FALSE(publishes[0].messages(2).has_ttl());
  EXPECT_FALSE(publishes[0].messages(2).has_expire_at());
}

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/data",
                                         {"--shutdown_grace=500ms"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    channel_ = ChannelTo(daemon_->address());
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
  std::shared_ptr<Channel> channel_;
};

TEST_F(PublisherTest, ReceiptsSayWhenAndWhetherDuplicate) {
  Publisher publisher(channel_);
  Message m = WithId("order-1");
  m.delay = absl::Hours(1);
  const absl::Time before = absl::Now();
  absl::StatusOr<Receipt> first = publisher.Publish(m);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->id, "order-1");
  EXPECT_FALSE(first->duplicate);
  EXPECT_GE(first->deliver_at,
            absl::FromUnixMillis(absl::ToUnixMillis(before + absl::Hours(1))));
  EXPECT_LE(first->deliver_at, absl::Now() + absl::Hours(1));

  m.delay = absl::Hours(2);
  absl::StatusOr<std::vector<Receipt>> again = publisher.PublishBatch({m});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->front().duplicate);
  EXPECT_EQ(again->front().deliver_at, first->deliver_at);

  Message at = WithId("");
  at.deliver_at = absl::FromUnixSeconds(1893456000);  // 2030-01-01
  absl::StatusOr<Receipt> assigned = publisher.Publish(at);
  ASSERT_TRUE(assigned.ok()) << assigned.status();
  EXPECT_TRUE(absl::StartsWith(assigned->id, "hg-")) << assigned->id;
  EXPECT_EQ(assigned->deliver_at, absl::FromUnixSeconds(1893456000));
}

TEST_F(PublisherTest, ABadMessageRefusesTheWholeBatchNamingIt) {
  Publisher publisher(channel_);
  Message bad = WithId("x");
  bad.topic = "a b";
  EXPECT_EQ(publisher.PublishBatch({WithId("ok"), bad}).status(),
            absl::InvalidArgumentError("message 1: topic \"a b\" has a space"));
  EXPECT_EQ(publisher.Cancel("t", "ok").code(), absl::StatusCode::kNotFound);
}

TEST_F(PublisherTest, CancelsAScheduledMessage) {
  Publisher publisher(channel_);
  Message m = WithId("c1");
  m.delay = absl::Hours(1);
  ASSERT_TRUE(publisher.Publish(m).ok());
  EXPECT_TRUE(publisher.Cancel("t", "c1").ok());
  EXPECT_EQ(publisher.Cancel("t", "c1").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hourglass::client
