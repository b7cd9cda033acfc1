// Failed store operations: counted per op, logged at most once per interval
// per op; and the commit queue's failed writes reach the count through the
// engine.

#include "broker/store_errors.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/log_capture.h"
#include "tests/testing/text_lines.h"

namespace hourglass::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'900'000'000);

// The ERROR lines a LogCapture holds, without their level.
std::vector<std::string> Errors(const testing::LogCapture& log) {
  std::vector<std::string> errors;
  for (const std::string& line : log.Lines()) {
    if (line.rfind("error ", 0) == 0) errors.push_back(line.substr(6));
  }
  return errors;
}

TEST(StoreErrorsTest, KnownOpsAreExportedAtZero) {
  metrics::Registry registry;
  StoreErrors errors(&registry);
  EXPECT_THAT(testing::LinesStartingWith(registry.Render(),
                                         "hourglass_store_errors_total"),
              ElementsAre("hourglass_store_errors_total{op=\"deliver\"} 0",
                          "hourglass_store_errors_total{op=\"dispatch\"} 0",
                          "hourglass_store_errors_total{op=\"load\"} 0",
                          "hourglass_store_errors_total{op=\"sync\"} 0",
                          "hourglass_store_errors_total{op=\"write\"} 0"));
}

TEST(StoreErrorsTest, CountsEveryErrorAndLogsEachOpAtMostOncePerInterval) {
  testing::FakeClock clock(kStart);
  metrics::Registry registry;
  testing::LogCapture log;
  StoreErrors errors(&registry, {.log_every = absl::Seconds(10),
                                 .known_ops = {"write"},
                                 .clock = &clock});
  const absl::Status disk = absl::UnavailableError("disk gone");
  for (int i = 0; i < 3; ++i) errors.Count("write", disk);
  errors.Count("load", absl::InternalError("bad key"));
  clock.Set(kStart + absl::Seconds(9));
  errors.Count("write", disk);  // Within the interval: counted, not logged.
  clock.Set(kStart + absl::Seconds(10));
  errors.Count("write", disk);
  errors.Count("load", absl::InternalError("bad key"));

  EXPECT_THAT(testing::LinesStartingWith(registry.Render(),
                                         "hourglass_store_errors_total"),
              ElementsAre("hourglass_store_errors_total{op=\"load\"} 2",
                          "hourglass_store_errors_total{op=\"write\"} 5"));
  EXPECT_THAT(
      Errors(log),
      ElementsAre("store write failed: UNAVAILABLE: disk gone",
                  "store load failed: INTERNAL: bad key",
                  "store write failed: UNAVAILABLE: disk gone (and 3 more "
                  "since the last report)",
                  "store load failed: INTERNAL: bad key"));
}

TEST(StoreErrorsTest, WithoutARegistryItOnlyLogs) {
  testing::LogCapture log;
  StoreErrors errors(nullptr);
  errors.Count("sync", absl::UnavailableError("fsync: EIO"));
  EXPECT_THAT(Errors(log),
              ElementsAre("store sync failed: UNAVAILABLE: fsync: EIO"));
}

TEST(RateLimitedLogTest, AllowsTheFirstThenOncePerIntervalPerKey) {
  testing::FakeClock clock(kStart);
  RateLimitedLog limiter(absl::Seconds(5), &clock);
  EXPECT_EQ(limiter.Allow("a"), 0u);
  EXPECT_EQ(limiter.Allow("a"), std::nullopt);
  EXPECT_EQ(limiter.Allow("b"), 0u);
  clock.Set(kStart + absl::Seconds(5));
  EXPECT_EQ(limiter.Allow("a"), 1u);
  EXPECT_EQ(limiter.Allow("a"), std::nullopt);
  EXPECT_EQ(limiter.Allow("a"), std::nullopt);
  clock.Set(kStart + absl::Seconds(20));
  EXPECT_EQ(limiter.Allow("a"), 2u);
  EXPECT_EQ(limiter.Allow("b"), 0u);
}

// An engine on a store whose writes can be made to fail, with metrics and
// a log capture, for the background loops' errors.
class EngineStoreErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Engine::Options options;
    options.metrics = &registry_;
    auto engine = Engine::Open(&store_, &clock_, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }
  // Stops collecting before the registry goes.
  void TearDown() override {
    store_.FailWrites(absl::OkStatus());
    engine_.reset();
  }

  // Publishes one message due at once; its status.
  absl::Status PublishDueNow(const std::string& id) {
    absl::Notification published;
    absl::Status status;
    engine_->Publish({NewMessage{"orders", id, "payload", {}, kStart}},
                     [&](auto result) {
                       status = result.status();
                       published.Notify();
                     });
    published.WaitForNotification();
    return status;
  }

  // The count of `op`'s failures, as a scrape shows it.
  std::vector<std::string> Count(const std::string& op) {
    return testing::LinesStartingWith(
        registry_.Render(),
        absl::StrCat("hourglass_store_errors_total{op=\"", op, "\"}"));
  }

  testing::FakeClock clock_{kStart};
  testing::FaultyStore store_;
  metrics::Registry registry_;
  testing::LogCapture log_;
  std::unique_ptr<Engine> engine_;
};

// A group commit whose write fails counts as op "write" and is logged, and
// the publish that waited on it fails.
TEST_F(EngineStoreErrorsTest, AFailedGroupCommitWriteCountsAsWrite) {
  engine_->Start();
  store_.FailWrites(absl::UnavailableError("disk gone"));
  const absl::Status status = PublishDueNow("m");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(Count("write"),
              ElementsAre("hourglass_store_errors_total{op=\"write\"} 1"));
  EXPECT_THAT(Errors(log_), ::testing::Contains(
                                "store write failed: UNAVAILABLE: disk gone"));
}

// The timer thread's move of due messages to ready fails: counted as op
// "dispatch", and the messages wait for the next tick.
TEST_F(EngineStoreErrorsTest, AFailedMoveToReadyCountsAsDispatch) {
  ASSERT_TRUE(PublishDueNow("m").ok());
  store_.FailWrites(absl::UnavailableError("disk gone"));
  EXPECT_EQ(engine_->Tick().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Count("dispatch"),
              ElementsAre("hourglass_store_errors_total{op=\"dispatch\"} 1"));
  EXPECT_THAT(
      Errors(log_),
      ::testing::Contains("store dispatch failed: UNAVAILABLE: disk gone"));
}

// A consumer that takes what it is sent and ignores it.
class IdleConsumer final : public Consumer {
 public:
  void Send(std::vector<Delivery>) override {}
  void End(absl::Status) override {}
};

// A dispatcher step's write fails (the in-flight marks of a delivery):
// counted as op "deliver" by the dispatcher's thread, which retries.
TEST_F(EngineStoreErrorsTest, AFailedDeliveryStepCountsAsDeliver) {
  ASSERT_TRUE(engine_->RegisterGroup("orders", "g").ok());
  ASSERT_TRUE(PublishDueNow("m").ok());
  ASSERT_TRUE(engine_->Tick().ok());  // Ready in group g.

  store_.FailWrites(absl::UnavailableError("disk gone"));
  engine_->Start();
  absl::Notification subscribed;
  engine_->Subscribe({.topic = "orders", .group = "g"},
                     std::make_shared<IdleConsumer>(),
                     [&](absl::StatusOr<ConsumerId> id) {
                       EXPECT_TRUE(id.ok()) << id.status();
                       subscribed.Notify();
                     });
  subscribed.WaitForNotification();
  ASSERT_TRUE(testing::Eventually([&] {
    const std::vector<std::string> lines = Count("deliver");
    return lines.size() == 1 &&
           lines[0] != "hourglass_store_errors_total{op=\"deliver\"} 0";
  }));
  // The dispatcher's thread counts the error, then logs it: the line may
  // come a moment after the count.
  EXPECT_TRUE(testing::Eventually([&] {
    return ::testing::Value(
        Errors(log_),
        ::testing::Contains("store deliver failed: UNAVAILABLE: disk gone"));
  })) << ::testing::PrintToString(Errors(log_));
}

}  // namespace
}  // namespace hourglass::broker
