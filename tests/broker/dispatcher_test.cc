// The dispatcher through the engine, on a fake clock: timer steps (Tick)
// and dispatcher steps (Step) run only when a test calls them, so every
// delivery, attempt and time below is exact.

#include "broker/dispatcher.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/records.pb.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_consumer.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/log_capture.h"

namespace hourglass::broker {
namespace {

using storage::Table;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr int64_t kStartMs = 1'795'305'600'000;  // 2026-11-22T00:00:00Z
const absl::Time kStart = absl::FromUnixMillis(kStartMs);

using testing::FakeConsumer;
using testing::Ids;

class DispatcherTest : public ::testing::Test {
 protected:
  DispatcherTest() {
    options_.dispatcher.max_attempts = 3;
    options_.dispatcher.default_ack_timeout = absl::Seconds(30);
    Reopen();
  }

  void Reopen() {
    engine_.reset();
    auto engine = Engine::Open(store_.get(), &clock_, options_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  Dispatcher& dispatcher() { return engine_->dispatcher(); }

  // Publishes `id` due `delay` after kStart.
  void Publish(const std::string& topic, const std::string& id,
               absl::Duration delay) {
    absl::Notification done;
    absl::StatusOr<std::vector<PublishReceipt>> result;
    engine_->Publish(
        {NewMessage{
            topic, id, "payload of " + id, {{"k", id}}, kStart + delay}},
        [&](absl::StatusOr<std::vector<PublishReceipt>> r) {
          result = std::move(r);
          done.Notify();
        });
    done.WaitForNotification();
    ASSERT_TRUE(result.ok()) << result.status();
  }

  Dispatcher::ConsumerId Subscribe(
      const std::string& topic, const std::string& group,
      std::shared_ptr<FakeConsumer> consumer, uint32_t max_in_flight = 0,
      absl::Duration ack_timeout = absl::ZeroDuration()) {
    absl::Notification done;
    absl::StatusOr<Dispatcher::ConsumerId> id;
    FakeConsumer* fake = consumer.get();
    dispatcher().Subscribe({topic, group, max_in_flight, ack_timeout},
                           std::move(consumer),
                           [&](absl::StatusOr<Dispatcher::ConsumerId> r) {
                             // Before the step that attached it sends it
                             // anything.
                             if (r.ok()) fake->Attach(&dispatcher(), *r);
                             id = std::move(r);
                             done.Notify();
                           });
    // The consumer joins its group in a step, once its group is registered
    // (on the commit queue's thread).
    AwaitWithSteps(done);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  // Runs dispatcher steps until `done` is notified (it waits for work on
  // another thread, such as a registration), at most 30 s.
  void AwaitWithSteps(absl::Notification& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
      ASSERT_TRUE(dispatcher().Step().ok());
      ASSERT_LT(absl::Now(), deadline) << "not done after 30 s";
    }
  }

  // Runs timer steps (only) until they have nothing left at the clock's now.
  void TickUntilIdle() {
    while (true) {
      absl::StatusOr<absl::Time> tick = engine_->Tick();
      ASSERT_TRUE(tick.ok()) << tick.status();
      if (*tick > clock_.Now()) return;
    }
  }

  // Sets the clock to kStart + `at` and runs timer and dispatcher steps
  // until neither has work left at that time.
  void RunAt(absl::Duration at) {
    clock_.Set(kStart + at);
    while (true) {
      absl::StatusOr<absl::Time> tick = engine_->Tick();
      ASSERT_TRUE(tick.ok()) << tick.status();
      absl::StatusOr<absl::Time> step = dispatcher().Step();
      ASSERT_TRUE(step.ok()) << step.status();
      if (*tick > clock_.Now() && *step > clock_.Now()) break;
    }
  }

  // Runs dispatcher steps (only), each of which must succeed, until
  // `answered` or until `steps` ran.
  void StepUntil(const std::function<bool()>& answered, int steps) {
    for (int i = 0; i < steps && !answered(); ++i) {
      absl::StatusOr<absl::Time> step = dispatcher().Step();
      ASSERT_TRUE(step.ok()) << "step " << i << ": " << step.status();
    }
  }

  size_t Count(Table table) {
    size_t n = 0;
    EXPECT_TRUE(store_
                    ->Scan(table, "", "",
                           [&](std::string_view, std::string_view) {
                             ++n;
                             return true;
                           })
                    .ok());
    return n;
  }

  int64_t Counter(const std::string& key) {
    auto value = store_->Get(Table::kCounters, key);
    EXPECT_TRUE(value.ok());
    return value.ok() && value->has_value() ? storage::DecodeCounter(**value)
                                            : 0;
  }

  Engine::Options options_;
  std::unique_ptr<testing::FaultyStore> store_ =
      std::make_unique<testing::FaultyStore>();
  testing::FakeClock clock_{kStart};
  std::unique_ptr<Engine> engine_;
};

TEST_F(DispatcherTest, DeliversDueMessagesInDueOrderWithTheirContents) {
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("orders", "billing", consumer);
  Publish("orders", "late", absl::Milliseconds(300));
  Publish("orders", "early", absl::Milliseconds(100));
  Publish("orders", "tie", absl::Milliseconds(100));
  RunAt(absl::Milliseconds(99));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  RunAt(absl::Milliseconds(100));
  std::vector<Delivery> got = consumer->Take();
  EXPECT_THAT(Ids(got), ElementsAre("early@1", "tie@1"));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].topic, "orders");
  EXPECT_EQ(got[0].payload, "payload of early");
  EXPECT_EQ(got[0].headers.at("k"), "early");
  EXPECT_EQ(got[0].deliver_at, kStart + absl::Milliseconds(100));
  EXPECT_EQ(got[0].published_at, kStart);
  RunAt(absl::Milliseconds(300));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("late@1"));
}

TEST_F(DispatcherTest, AStreamNeverHoldsMoreThanItsCredit) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer, /*max_in_flight=*/2);
  for (const char* m : {"a", "b", "c", "d", "e"})
    Publish("t", m, absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("a@1", "b@1"));
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  dispatcher().Ack(id, {"a"});
  RunAt(absl::Milliseconds(2));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("c@1"));
  dispatcher().Ack(id, {"b", "c"});
  RunAt(absl::Milliseconds(3));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("d@1", "e@1"));
}

TEST_F(DispatcherTest, EveryGroupGetsEveryMessageAndConsumersOfOneCompete) {
  auto audit = std::make_shared<FakeConsumer>();
  auto billing_1 = std::make_shared<FakeConsumer>();
  auto billing_2 = std::make_shared<FakeConsumer>();
  Subscribe("t", "audit", audit);
  Subscribe("t", "billing", billing_1);
  Subscribe("t", "billing", billing_2);
  std::vector<std::string> all;
  for (int i = 0; i < 6; ++i) {
    all.push_back(absl::StrCat("m", i));
    Publish("t", all.back(), absl::Milliseconds(10));
  }
  RunAt(absl::Milliseconds(10));
  std::vector<std::string> expected;
  for (const std::string& id : all) expected.push_back(id + "@1");
  EXPECT_THAT(Ids(audit->Take()),
              ElementsAre("m0@1", "m1@1", "m2@1", "m3@1", "m4@1", "m5@1"));
  // Round robin: each message once across the two, alternating.
  EXPECT_THAT(Ids(billing_1->Take()), ElementsAre("m0@1", "m2@1", "m4@1"));
  EXPECT_THAT(Ids(billing_2->Take()), ElementsAre("m1@1", "m3@1", "m5@1"));
}

TEST_F(DispatcherTest, GroupsTakeTurnsWhenAStepCannotServeAll) {
  options_.dispatcher.step_limit = 4;
  Reopen();
  auto a = std::make_shared<FakeConsumer>();
  auto b = std::make_shared<FakeConsumer>();
  Subscribe("ta", "g", a, /*max_in_flight=*/100);
  Subscribe("tb", "g", b, /*max_in_flight=*/100);
  for (int i = 0; i < 10; ++i) {
    Publish("ta", absl::StrCat("a", i), absl::ZeroDuration());
    Publish("tb", absl::StrCat("b", i), absl::ZeroDuration());
  }
  clock_.Set(kStart);
  TickUntilIdle();
  // Each step serves one group first; the next step the other.
  ASSERT_TRUE(dispatcher().Step().ok());
  const size_t a1 = a->Take().size(), b1 = b->Take().size();
  ASSERT_TRUE(dispatcher().Step().ok());
  const size_t a2 = a->Take().size(), b2 = b->Take().size();
  EXPECT_EQ(a1 + b1, 4u);
  EXPECT_EQ(a2 + b2, 4u);
  EXPECT_EQ(a1 + a2, 4u);
  EXPECT_EQ(b1 + b2, 4u);
}

TEST_F(DispatcherTest, AMessageIsDeletedOnceEveryGroupAckedIt) {
  auto a = std::make_shared<FakeConsumer>();
  auto b = std::make_shared<FakeConsumer>();
  const auto a_id = Subscribe("t", "a", a);
  const auto b_id = Subscribe("t", "b", b);
  Publish("t", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  ASSERT_THAT(Ids(a->Take()), ElementsAre("x@1"));
  ASSERT_THAT(Ids(b->Take()), ElementsAre("x@1"));
  EXPECT_EQ(Count(Table::kInFlight), 2u);
  dispatcher().Ack(a_id, {"x"});
  RunAt(absl::Milliseconds(1));
  EXPECT_EQ(Count(Table::kInFlight), 1u);
  EXPECT_EQ(Count(Table::kMessages), 1u);  // b still holds it.
  EXPECT_EQ(Count(Table::kIds), 1u);
  dispatcher().Ack(b_id, {"x"});
  RunAt(absl::Milliseconds(2));
  EXPECT_EQ(Count(Table::kInFlight), 0u);
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kIds), 0u);
  EXPECT_EQ(Count(Table::kReady), 0u);
}

TEST_F(DispatcherTest, AcksOfTwoGroupsInOneStepDeleteTheMessage) {
  auto a = std::make_shared<FakeConsumer>();
  auto b = std::make_shared<FakeConsumer>();
  const auto a_id = Subscribe("t", "a", a);
  const auto b_id = Subscribe("t", "b", b);
  Publish("t", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  dispatcher().Ack(a_id, {"x"});
  dispatcher().Ack(b_id, {"x"});
  RunAt(absl::Milliseconds(1));
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kInFlight), 0u);
}

// The counters Admin and metrics report follow every state change exactly.
TEST_F(DispatcherTest, CountsFollowEveryStateChange) {
  using storage::MessagesCounter;
  using storage::ReadyCounter;
  using storage::ScheduledCounter;
  auto a = std::make_shared<FakeConsumer>();
  const auto a_id = Subscribe("t", "a", a, /*max_in_flight=*/1);
  ASSERT_TRUE(engine_->RegisterGroup("t", "b").ok());  // No consumer.
  Publish("t", "x", absl::Milliseconds(10));
  Publish("t", "y", absl::Milliseconds(10));
  Publish("t", "z", absl::Seconds(5));
  EXPECT_EQ(Counter(ScheduledCounter("t")), 3);
  EXPECT_EQ(Counter(MessagesCounter("t")), 3);
  absl::Notification cancelled;
  engine_->Cancel("t", "z", [&](absl::Status s) {
    EXPECT_TRUE(s.ok());
    cancelled.Notify();
  });
  cancelled.WaitForNotification();
  EXPECT_EQ(Counter(ScheduledCounter("t")), 2);
  EXPECT_EQ(Counter(MessagesCounter("t")), 2);

  RunAt(absl::Milliseconds(10));
  EXPECT_EQ(Counter(ScheduledCounter("t")), 0);
  EXPECT_EQ(Counter(ReadyCounter("t", "a")), 1);  // x in flight, y ready.
  EXPECT_EQ(Counter(ReadyCounter("t", "b")), 2);
  ASSERT_THAT(Ids(a->Take()), ElementsAre("x@1"));
  dispatcher().Ack(a_id, {"x"});
  RunAt(absl::Milliseconds(11));
  ASSERT_THAT(Ids(a->Take()), ElementsAre("y@1"));
  EXPECT_EQ(Counter(ReadyCounter("t", "a")), 0);
  EXPECT_EQ(Counter(MessagesCounter("t")), 2);  // b holds both.

  auto b = std::make_shared<FakeConsumer>();
  const auto b_id = Subscribe("t", "b", b);
  dispatcher().Ack(a_id, {"y"});
  RunAt(absl::Milliseconds(12));
  ASSERT_THAT(Ids(b->Take()), ElementsAre("x@1", "y@1"));
  dispatcher().Ack(b_id, {"x", "y"});
  RunAt(absl::Milliseconds(13));
  EXPECT_EQ(Counter(ReadyCounter("t", "b")), 0);
  EXPECT_EQ(Counter(MessagesCounter("t")), 0);
  EXPECT_EQ(Count(Table::kTopicDue), 0u);
}

// A new store's loader starts at the epoch; before its first pass the
// gauge must not read that as decades of lag (a scrape right after start
// did), nor after it.
TEST_F(DispatcherTest, ANewBrokersLoaderLagIsZeroBeforeAndAfterItsFirstPass) {
  metrics::Registry registry;
  options_.metrics = &registry;
  Reopen();
  EXPECT_THAT(registry.Render(),
              ::testing::HasSubstr("\nhourglass_loader_lag_seconds 0\n"));
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(registry.Render(),
              ::testing::HasSubstr("\nhourglass_loader_lag_seconds 0\n"));
  engine_.reset();  // Stops collecting before the registry goes.
}

// Prometheus metrics: event totals per topic, and gauges read at scrape
// time from the exact counters and the dispatcher.
TEST_F(DispatcherTest, MetricsCountEventsAndShowWhatIsHeld) {
  metrics::Registry registry;
  options_.metrics = &registry;
  Reopen();
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer, /*max_in_flight=*/1);
  Publish("t", "a", absl::ZeroDuration());
  Publish("t", "b", absl::ZeroDuration());
  Publish("t", "later", absl::Hours(1));
  RunAt(absl::Milliseconds(3));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("a@1"));
  dispatcher().Nack(id, "a", absl::ZeroDuration());
  RunAt(absl::Milliseconds(4));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("a@2"));
  dispatcher().Ack(id, {"a"});
  RunAt(absl::Milliseconds(5));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("b@1"));

  const std::string text = registry.Render();
  for (const char* line : {
           "hourglass_published_total{topic=\"t\"} 3\n",
           "hourglass_delivered_total{topic=\"t\"} 2\n",
           "hourglass_redelivered_total{topic=\"t\"} 1\n",
           "hourglass_nacked_total{topic=\"t\"} 1\n",
           "hourglass_acked_total{topic=\"t\"} 1\n",
           "hourglass_dead_lettered_total{topic=\"t\"} 0\n",
           "hourglass_scheduled{topic=\"t\"} 1\n",
           "hourglass_ready{topic=\"t\",group=\"g\"} 0\n",
           "hourglass_in_flight{topic=\"t\",group=\"g\"} 1\n",
           "hourglass_consumers{topic=\"t\",group=\"g\"} 1\n",
           "hourglass_due_backlog 0\n",
           // Both first deliveries were 3 ms and 5 ms late.
           "hourglass_delivery_lateness_seconds_count 2\n",
       }) {
    EXPECT_THAT(text, ::testing::HasSubstr(line));
  }
  EXPECT_THAT(text,
              ::testing::HasSubstr("hourglass_store_write_seconds_count"));
  engine_.reset();  // Stops collecting before the registry goes.
}

// One step's deliveries of a topic are counted together: each one counts,
// and each one's lateness goes into the histogram.
TEST_F(DispatcherTest, MetricsCountEveryDeliveryOfAStep) {
  metrics::Registry registry;
  options_.metrics = &registry;
  Reopen();
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer, /*max_in_flight=*/10);
  Publish("t", "a", absl::ZeroDuration());
  Publish("t", "b", absl::Milliseconds(1));
  Publish("t", "c", absl::Milliseconds(2));
  RunAt(absl::Milliseconds(5));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("a@1", "b@1", "c@1"));

  const std::string text = registry.Render();
  for (const char* line : {
           "hourglass_delivered_total{topic=\"t\"} 3\n",
           "hourglass_redelivered_total{topic=\"t\"} 0\n",
           // 5, 4 and 3 ms late: all three in the 5 ms bucket.
           "hourglass_delivery_lateness_seconds_bucket{le=\"0.0025\"} 0\n",
           "hourglass_delivery_lateness_seconds_bucket{le=\"0.005\"} 3\n",
           "hourglass_delivery_lateness_seconds_count 3\n",
       }) {
    EXPECT_THAT(text, ::testing::HasSubstr(line));
  }
  engine_.reset();  // Stops collecting before the registry goes.
}

// The lines of a scrape that hold `labels` (such as `topic="t"`), in order.
std::vector<std::string> SeriesWith(const std::string& text,
                                    std::string_view labels) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line,
                          absl::string_view(labels.data(), labels.size()))) {
      lines.emplace_back(line);
    }
  }
  return lines;
}

// A deleted group's series leave the scrape; its topic's and the other
// group's stay.
TEST_F(DispatcherTest, MetricsDropTheSeriesOfADeletedGroup) {
  metrics::Registry registry;
  options_.metrics = &registry;
  Reopen();
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "kept", consumer, /*max_in_flight=*/1);
  ASSERT_TRUE(dispatcher().RegisterGroup("t", "doomed").ok());
  Publish("t", "a", absl::ZeroDuration());
  RunAt(absl::Milliseconds(1));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("a@1"));
  EXPECT_THAT(SeriesWith(registry.Render(), "topic=\"t\""),
              ElementsAre("hourglass_acked_total{topic=\"t\"} 0",
                          "hourglass_cancelled_total{topic=\"t\"} 0",
                          "hourglass_consumers{topic=\"t\",group=\"doomed\"} 0",
                          "hourglass_consumers{topic=\"t\",group=\"kept\"} 1",
                          "hourglass_dead_lettered_total{topic=\"t\"} 0",
                          "hourglass_delivered_total{topic=\"t\"} 1",
                          "hourglass_expired_total{topic=\"t\"} 0",
                          "hourglass_in_flight{topic=\"t\",group=\"doomed\"} 0",
                          "hourglass_in_flight{topic=\"t\",group=\"kept\"} 1",
                          "hourglass_nacked_total{topic=\"t\"} 0",
                          "hourglass_published_total{topic=\"t\"} 1",
                          "hourglass_ready{topic=\"t\",group=\"doomed\"} 1",
                          "hourglass_ready{topic=\"t\",group=\"kept\"} 0",
                          "hourglass_redelivered_total{topic=\"t\"} 0",
                          "hourglass_scheduled{topic=\"t\"} 0"));

  std::optional<absl::StatusOr<uint64_t>> removed;
  dispatcher().DeleteGroup("t", "doomed",
                           [&](absl::StatusOr<uint64_t> n) { removed = n; });
  RunAt(absl::Milliseconds(2));
  ASSERT_TRUE(removed.has_value());
  ASSERT_TRUE(removed->ok()) << removed->status();
  EXPECT_EQ(**removed, 1u);
  EXPECT_THAT(SeriesWith(registry.Render(), "topic=\"t\""),
              ElementsAre("hourglass_acked_total{topic=\"t\"} 0",
                          "hourglass_cancelled_total{topic=\"t\"} 0",
                          "hourglass_consumers{topic=\"t\",group=\"kept\"} 1",
                          "hourglass_dead_lettered_total{topic=\"t\"} 0",
                          "hourglass_delivered_total{topic=\"t\"} 1",
                          "hourglass_expired_total{topic=\"t\"} 0",
                          "hourglass_in_flight{topic=\"t\",group=\"kept\"} 1",
                          "hourglass_nacked_total{topic=\"t\"} 0",
                          "hourglass_published_total{topic=\"t\"} 1",
                          "hourglass_ready{topic=\"t\",group=\"kept\"} 0",
                          "hourglass_redelivered_total{topic=\"t\"} 0",
                          "hourglass_scheduled{topic=\"t\"} 0"));
  engine_.reset();  // Stops collecting before the registry goes.
}

// A topic left without messages and groups is gone: its series leave the
// scrape, whether its messages were cancelled or purged; topics that hold
// messages or have a group keep theirs. A gone topic that comes back
// starts its totals at 0.
TEST_F(DispatcherTest, MetricsDropTheSeriesOfTopicsThatAreGone) {
  metrics::Registry registry;
  options_.metrics = &registry;
  Reopen();
  Publish("cancelled", "x", absl::Hours(1));
  Publish("cancelled", "y", absl::Hours(1));
  Publish("purged", "p", absl::ZeroDuration());
  Publish("live", "l", absl::Hours(1));
  ASSERT_TRUE(dispatcher().RegisterGroup("grouped", "g").ok());
  RunAt(absl::Milliseconds(1));  // p waits in its topic's waiting area.
  const std::string before = registry.Render();
  EXPECT_THAT(
      SeriesWith(before, "topic=\"cancelled\""),
      ::testing::Contains("hourglass_scheduled{topic=\"cancelled\"} 2"));
  EXPECT_THAT(
      SeriesWith(before, "topic=\"purged\""),
      ::testing::Contains("hourglass_ready{topic=\"purged\",group=\"\"} 1"));

  for (const char* id : {"x", "y"}) {
    absl::Notification cancelled;
    engine_->Cancel("cancelled", id, [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      cancelled.Notify();
    });
    cancelled.WaitForNotification();
  }
  std::optional<absl::StatusOr<uint64_t>> purged;
  dispatcher().PurgeReady("purged",
                          [&](absl::StatusOr<uint64_t> n) { purged = n; });
  RunAt(absl::Milliseconds(2));
  ASSERT_TRUE(purged.has_value());
  ASSERT_TRUE(purged->ok()) << purged->status();
  EXPECT_EQ(**purged, 1u);

  const std::string after = registry.Render();
  EXPECT_THAT(SeriesWith(after, "topic=\"cancelled\""), IsEmpty());
  EXPECT_THAT(SeriesWith(after, "topic=\"purged\""), IsEmpty());
  EXPECT_THAT(SeriesWith(after, "topic=\"live\""),
              ElementsAre("hourglass_acked_total{topic=\"live\"} 0",
                          "hourglass_cancelled_total{topic=\"live\"} 0",
                          "hourglass_dead_lettered_total{topic=\"live\"} 0",
                          "hourglass_delivered_total{topic=\"live\"} 0",
                          "hourglass_expired_total{topic=\"live\"} 0",
                          "hourglass_nacked_total{topic=\"live\"} 0",
                          "hourglass_published_total{topic=\"live\"} 1",
                          "hourglass_redelivered_total{topic=\"live\"} 0",
                          "hourglass_scheduled{topic=\"live\"} 1"));
  EXPECT_THAT(
      SeriesWith(after, "topic=\"grouped\""),
      ElementsAre("hourglass_consumers{topic=\"grouped\",group=\"g\"} 0",
                  "hourglass_in_flight{topic=\"grouped\",group=\"g\"} 0",
                  "hourglass_ready{topic=\"grouped\",group=\"g\"} 0",
                  "hourglass_scheduled{topic=\"grouped\"} 0"));

  Publish("cancelled", "z", absl::Hours(1));
  EXPECT_THAT(
      SeriesWith(registry.Render(), "topic=\"cancelled\""),
      ElementsAre("hourglass_acked_total{topic=\"cancelled\"} 0",
                  "hourglass_cancelled_total{topic=\"cancelled\"} 0",
                  "hourglass_dead_lettered_total{topic=\"cancelled\"} 0",
                  "hourglass_delivered_total{topic=\"cancelled\"} 0",
                  "hourglass_expired_total{topic=\"cancelled\"} 0",
                  "hourglass_nacked_total{topic=\"cancelled\"} 0",
                  "hourglass_published_total{topic=\"cancelled\"} 1",
                  "hourglass_redelivered_total{topic=\"cancelled\"} 0",
                  "hourglass_scheduled{topic=\"cancelled\"} 1"));
  engine_.reset();  // Stops collecting before the registry goes.
}

TEST_F(DispatcherTest, UnknownAcksAreCountedAndIgnored) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer);
  Publish("t", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  dispatcher().Ack(id, {"nope", "x", "x"});
  dispatcher().Nack(id, "never", absl::ZeroDuration());
  RunAt(absl::Milliseconds(1));
  EXPECT_EQ(dispatcher().unknown_acks(), 3u);
  EXPECT_EQ(Count(Table::kMessages), 0u);
}

TEST_F(DispatcherTest, AnAckTimeoutRedeliversWithTheNextAttempt) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id =
      Subscribe("t", "g", consumer, 0, /*ack_timeout=*/absl::Seconds(1));
  Publish("t", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("x@1"));
  RunAt(absl::Milliseconds(999));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  RunAt(absl::Milliseconds(1000));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("x@2"));
  // An ack of the timed-out delivery's id acks the new one.
  dispatcher().Ack(id, {"x"});
  RunAt(absl::Milliseconds(1001));
  EXPECT_EQ(Count(Table::kMessages), 0u);
}

TEST_F(DispatcherTest, ANackRedeliversAfterItsDelay) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer);
  Publish("t", "x", absl::ZeroDuration());
  Publish("t", "y", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("x@1", "y@1"));
  dispatcher().Nack(id, "x", absl::Milliseconds(500));
  dispatcher().Nack(id, "y", absl::ZeroDuration());
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("y@2"));
  RunAt(absl::Milliseconds(499));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  RunAt(absl::Milliseconds(500));  // The nack came at 0 ms.
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("x@2"));
}

TEST_F(DispatcherTest, AfterMaxAttemptsTheMessageGoesToTheDeadLetterTopic) {
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer, 0, absl::Seconds(1));
  Publish("t", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  RunAt(absl::Seconds(1));
  RunAt(absl::Seconds(2));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("x@1", "x@2", "x@3"));
  RunAt(absl::Seconds(3));  // max_attempts is 3: no fourth delivery.
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Count(Table::kInFlight), 0u);

  auto dead = std::make_shared<FakeConsumer>();
  const auto dead_id = Subscribe("t.dlq", "ops", dead);
  RunAt(absl::Seconds(3));
  std::vector<Delivery> got = dead->Take();
  ASSERT_THAT(Ids(got), ElementsAre("x@4"));  // Attempts preserved.
  EXPECT_EQ(got[0].topic, "t.dlq");
  EXPECT_EQ(got[0].payload, "payload of x");
  EXPECT_EQ(got[0].deliver_at, kStart + absl::Seconds(3));
  dispatcher().Ack(dead_id, {"x"});
  RunAt(absl::Seconds(4));
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kIds), 0u);
}

// A dead letter keeps its id under a new sequence, so an id the broker
// assigned gets an ids entry in the dead-letter topic; the ack deletes it.
TEST_F(DispatcherTest, ADeadLetterKeepsTheIdTheBrokerAssigned) {
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer, 0, absl::Seconds(1));
  Publish("t", "", absl::ZeroDuration());
  EXPECT_EQ(Count(Table::kIds), 0u);
  RunAt(absl::ZeroDuration());
  RunAt(absl::Seconds(1));
  RunAt(absl::Seconds(2));
  EXPECT_THAT(Ids(consumer->Take()),
              ElementsAre("hg-0000000000000001@1", "hg-0000000000000001@2",
                          "hg-0000000000000001@3"));
  RunAt(absl::Seconds(3));
  EXPECT_EQ(Count(Table::kMessages), 1u);
  EXPECT_EQ(Count(Table::kIds), 1u);
  absl::StatusOr<Inspector::MessageView> letter =
      engine_->inspector().GetMessage("t.dlq", "hg-0000000000000001", 0);
  ASSERT_TRUE(letter.ok()) << letter.status();
  EXPECT_EQ(letter->state, MessageState::kDead);
  EXPECT_EQ(engine_->inspector()
                .GetMessage("t", "hg-0000000000000001", 0)
                .status()
                .code(),
            absl::StatusCode::kNotFound);

  auto dead = std::make_shared<FakeConsumer>();
  const auto dead_id = Subscribe("t.dlq", "ops", dead);
  RunAt(absl::Seconds(3));
  EXPECT_THAT(Ids(dead->Take()), ElementsAre("hg-0000000000000001@4"));
  dispatcher().Ack(dead_id, {"hg-0000000000000001"});
  RunAt(absl::Seconds(4));
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kIds), 0u);
  EXPECT_EQ(Count(Table::kTopicDue), 0u);
}

// Found by tests/fuzz/subscribe_fuzz: when two groups used up a message's
// attempts in the same step, the second dead letter's publish was refused
// as "still in progress" (the first's), which failed the step, and every
// retry of it: no group was served any more.
TEST_F(DispatcherTest, TwoGroupsDeadLetteringOneMessageInOneStep) {
  auto a = std::make_shared<FakeConsumer>();
  auto b = std::make_shared<FakeConsumer>();
  Subscribe("t", "a", a, 0, absl::Seconds(1));
  Subscribe("t", "b", b, 0, absl::Seconds(1));
  Publish("t", "x", absl::ZeroDuration());
  Publish("t", "y", absl::Seconds(3));
  RunAt(absl::ZeroDuration());
  RunAt(absl::Seconds(1));
  RunAt(absl::Seconds(2));
  EXPECT_THAT(Ids(a->Take()), ElementsAre("x@1", "x@2", "x@3"));
  EXPECT_THAT(Ids(b->Take()), ElementsAre("x@1", "x@2", "x@3"));
  // Both groups' third ack timeouts run out in the step at 3 s, which
  // dead-letters x for both and still delivers y.
  RunAt(absl::Seconds(3));
  EXPECT_THAT(Ids(a->Take()), ElementsAre("y@1"));
  EXPECT_THAT(Ids(b->Take()), ElementsAre("y@1"));
  EXPECT_EQ(Count(Table::kInFlight), 2u);  // y in a and in b.

  // One dead letter, with the attempts of the group that wrote it.
  auto dead = std::make_shared<FakeConsumer>();
  const auto dead_id = Subscribe("t.dlq", "ops", dead);
  RunAt(absl::Seconds(3));
  EXPECT_THAT(Ids(dead->Take()), ElementsAre("x@4"));
  dispatcher().Ack(dead_id, {"x"});
  RunAt(absl::Seconds(3));
  EXPECT_EQ(Count(Table::kMessages), 1u);  // Only y is left.
}

// A message that comes due while a group is being deleted goes only to the
// topic's other groups: the deletion's last chunk could otherwise be written
// while a dispatch naming the group is still in progress.
TEST_F(DispatcherTest, AGroupBeingDeletedTakesNoNewMessages) {
  auto kept = std::make_shared<FakeConsumer>();
  Subscribe("t", "kept", kept);
  ASSERT_TRUE(dispatcher().RegisterGroup("t", "doomed").ok());
  Publish("t", "x", absl::Milliseconds(5));
  std::optional<absl::StatusOr<uint64_t>> removed;
  dispatcher().DeleteGroup("t", "doomed",
                           [&](absl::StatusOr<uint64_t> n) { removed = n; });
  clock_.Set(kStart + absl::Milliseconds(5));
  TickUntilIdle();  // x comes due; no dispatcher step has run yet.
  EXPECT_EQ(Count(Table::kReady), 1u);
  const std::string kept_prefix = storage::ReadyPrefix("t", "kept");
  size_t kept_ready = 0;
  ASSERT_TRUE(store_
                  ->Scan(Table::kReady, kept_prefix,
                         storage::PrefixEnd(kept_prefix),
                         [&](std::string_view, std::string_view) {
                           ++kept_ready;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(kept_ready, 1u);
  RunAt(absl::Milliseconds(5));
  ASSERT_TRUE(removed.has_value());
  ASSERT_TRUE(removed->ok()) << removed->status();
  EXPECT_EQ(**removed, 0u);
  EXPECT_THAT(Ids(kept->Take()), ElementsAre("x@1"));
  EXPECT_EQ(Count(Table::kMessages), 1u);  // Held by "kept" alone.
}

// A letter whose move to ready is being written is redriven only once the
// move is done; before, a redrive could delete its ready key and message
// under the move, which then put it back into a window.
TEST_F(DispatcherTest, ARedriveWaitsForALetterComingDue) {
  ASSERT_TRUE(dispatcher().RegisterGroup("t.dlq", "ops").ok());
  Publish("t.dlq", "x", absl::Hours(1));
  // The letter comes due; the write of its move to ready is held.
  store_->HoldWritesIf([](const storage::WriteBatch& batch) {
    for (const storage::WriteBatch::Operation& op : batch.operations()) {
      if (op.table == Table::kReady &&
          op.kind == storage::WriteBatch::Operation::Kind::kPut) {
        return true;
      }
    }
    return false;
  });
  clock_.Set(kStart + absl::Hours(1));
  std::thread timer([&] { (void)engine_->Tick(); });
  ASSERT_TRUE(store_->AwaitHeldWrites(1, absl::Seconds(30)));

  std::optional<absl::StatusOr<uint64_t>> redriven;
  dispatcher().Redrive("t", {"x"},
                       [&](absl::StatusOr<uint64_t> n) { redriven = n; });
  ASSERT_TRUE(dispatcher().Step().ok());
  ASSERT_TRUE(dispatcher().Step().ok());
  EXPECT_FALSE(redriven.has_value());

  store_->ReleaseWrites();
  timer.join();
  EXPECT_EQ(Count(Table::kReady), 1u);
  ASSERT_TRUE(dispatcher().Step().ok());
  ASSERT_TRUE(redriven.has_value());
  ASSERT_TRUE(redriven->ok()) << redriven->status();
  EXPECT_EQ(**redriven, 1u);
  EXPECT_EQ(Count(Table::kReady), 0u);
  auto back = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", back);
  auto ops = std::make_shared<FakeConsumer>();
  Subscribe("t.dlq", "ops", ops);
  RunAt(absl::Hours(1));
  EXPECT_THAT(Ids(back->Take()), ElementsAre("x@1"));
  EXPECT_THAT(ops->Take(), IsEmpty());
}

// Found by tests/fuzz/admin_fuzz: a redrive that gave up on a letter that
// stayed busy failed its chunk instead of answering, so the task was tried
// again at every step, failing each step (which then waits before the
// next), never answering the call, and holding up every later admin task.
TEST_F(DispatcherTest, ARedriveThatGivesUpOnABusyLetterAnswersUnavailable) {
  // Due now but not yet moved to ready (no timer step runs): busy.
  Publish("t.dlq", "x", absl::ZeroDuration());
  std::optional<absl::StatusOr<uint64_t>> redriven;
  dispatcher().Redrive("t", {"x"},
                       [&](absl::StatusOr<uint64_t> n) { redriven = n; });
  StepUntil([&] { return redriven.has_value(); }, 2000);
  ASSERT_TRUE(redriven.has_value());
  EXPECT_EQ(redriven->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(redriven->status().message(),
            "dead letters stayed busy; retry the redrive");

  // The letter comes due; the next redrive moves it.
  RunAt(absl::ZeroDuration());
  std::optional<absl::StatusOr<uint64_t>> again;
  dispatcher().Redrive("t", {"x"},
                       [&](absl::StatusOr<uint64_t> n) { again = n; });
  StepUntil([&] { return again.has_value(); }, 10);
  ASSERT_TRUE(again.has_value());
  ASSERT_TRUE(again->ok()) << again->status();
  EXPECT_EQ(**again, 1u);
}

// Found by tests/fuzz/admin_fuzz: a message a producer published to
// `<topic>.dlq` for later counted as a busy dead letter, so redriving it
// (by id, or all) spun until the redrive gave up. It is no dead letter
// until it is due.
TEST_F(DispatcherTest, AMessageOfTheDeadLetterTopicDueLaterIsNotRedriven) {
  Publish("t.dlq", "later", absl::Hours(1));
  Publish("t.dlq", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  std::optional<absl::StatusOr<uint64_t>> named;
  dispatcher().Redrive("t", {"x", "later"},
                       [&](absl::StatusOr<uint64_t> n) { named = n; });
  ASSERT_TRUE(named.has_value());  // At once: nothing to wait for.
  EXPECT_EQ(named->status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(named->status().message(),
            "no dead letter with id \"later\" of topic \"t\" (in \"t.dlq\"): "
            "it is scheduled there, not yet due");

  std::optional<absl::StatusOr<uint64_t>> all;
  dispatcher().Redrive("t", {}, [&](absl::StatusOr<uint64_t> n) { all = n; });
  StepUntil([&] { return all.has_value(); }, 10);
  ASSERT_TRUE(all.has_value());
  ASSERT_TRUE(all->ok()) << all->status();
  EXPECT_EQ(**all, 1u);  // x; "later" stays, scheduled.
  EXPECT_EQ(engine_->inspector().GetMessage("t.dlq", "later", 0)->state,
            MessageState::kScheduled);

  RunAt(absl::Hours(1));  // Due: now it is one.
  std::optional<absl::StatusOr<uint64_t>> due;
  dispatcher().Redrive("t", {"later"},
                       [&](absl::StatusOr<uint64_t> n) { due = n; });
  StepUntil([&] { return due.has_value(); }, 10);
  ASSERT_TRUE(due.has_value());
  ASSERT_TRUE(due->ok()) << due->status();
  EXPECT_EQ(**due, 1u);
}

// Found by tests/fuzz/admin_fuzz: naming a letter twice prepared two
// publishes of its id in one chunk; the second was refused as still in
// progress, which failed the chunk at every retry.
TEST_F(DispatcherTest, ARedriveNamingALetterTwiceMovesItOnce) {
  Publish("t.dlq", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  std::optional<absl::StatusOr<uint64_t>> redriven;
  dispatcher().Redrive("t", {"x", "x"},
                       [&](absl::StatusOr<uint64_t> n) { redriven = n; });
  StepUntil([&] { return redriven.has_value(); }, 10);
  ASSERT_TRUE(redriven.has_value());
  ASSERT_TRUE(redriven->ok()) << redriven->status();
  EXPECT_EQ(**redriven, 1u);
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer);
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("x@1"));
}

// Found by tests/fuzz/admin_fuzz: a redrive chunk that failed after
// preparing publishes (here: another letter's id is being published to the
// topic) left them prepared, holding their ids "in progress" for ever, so
// every retry of the chunk failed, and so did every publish of those ids.
TEST_F(DispatcherTest, AFailedRedriveChunkReleasesThePublishesItPrepared) {
  Publish("t.dlq", "x", absl::ZeroDuration());
  Publish("t.dlq", "y", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  // A producer's publish of y to t, stalled in its sync.
  store_->HoldSyncs();
  absl::Notification published;
  engine_->Publish({NewMessage{"t", "y", "again", {}, kStart}},
                   [&](absl::StatusOr<std::vector<PublishReceipt>> r) {
                     EXPECT_TRUE(r.ok()) << r.status();
                     published.Notify();
                   });
  ASSERT_TRUE(store_->AwaitHeldSyncs(1, absl::Seconds(30)));

  std::optional<absl::StatusOr<uint64_t>> redriven;
  dispatcher().Redrive("t", {"x", "y"},
                       [&](absl::StatusOr<uint64_t> n) { redriven = n; });
  // x is prepared, then y is refused: the chunk fails, to be retried.
  EXPECT_EQ(dispatcher().Step().status().code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(redriven.has_value());
  store_->ReleaseSyncs();
  published.WaitForNotification();
  StepUntil([&] { return redriven.has_value(); }, 10);
  ASSERT_TRUE(redriven.has_value());
  ASSERT_TRUE(redriven->ok()) << redriven->status();
  EXPECT_EQ(**redriven, 1u);  // x; y is pending in t again, and stays.
  EXPECT_EQ(engine_->inspector().GetMessage("t.dlq", "y", 0)->state,
            MessageState::kDead);
  EXPECT_EQ(engine_->inspector().GetMessage("t", "x", 0).status().code(),
            absl::StatusCode::kOk);
}

// If no registered group of a topic owns its waiting area (the owner's
// registration failed while a later one's was written, or the owner was
// deleted), a restart hands the area to the oldest group.
TEST_F(DispatcherTest, ARestartGivesAnUnownedWaitingAreaToTheOldestGroup) {
  Publish("t", "early", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());  // No group yet: "early" waits in the area.
  for (const auto& [name, created_ms] :
       {std::pair{"young", kStartMs + 2}, std::pair{"old", kStartMs + 1}}) {
    storage::GroupRecord record;
    record.set_created_at_ms(created_ms);
    record.set_owns_waiting_area(false);
    storage::WriteBatch batch;
    batch.Put(Table::kMeta, storage::GroupKey("t", name),
              record.SerializeAsString());
    ASSERT_TRUE(store_->Write(batch).ok());
  }
  Reopen();
  auto young = std::make_shared<FakeConsumer>();
  auto old = std::make_shared<FakeConsumer>();
  Subscribe("t", "young", young);
  Subscribe("t", "old", old);
  RunAt(absl::Milliseconds(3));
  EXPECT_THAT(Ids(old->Take()), ElementsAre("early@1"));
  EXPECT_THAT(young->Take(), IsEmpty());
}

TEST_F(DispatcherTest, UnsubscribingHandsDeliveriesBackAtOnce) {
  auto first = std::make_shared<FakeConsumer>();
  auto second = std::make_shared<FakeConsumer>();
  const auto first_id = Subscribe("t", "g", first, /*max_in_flight=*/2);
  Publish("t", "a", absl::ZeroDuration());
  Publish("t", "b", absl::ZeroDuration());
  Publish("t", "c", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(first->Take()), ElementsAre("a@1", "b@1"));
  Subscribe("t", "g", second, /*max_in_flight=*/5);
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(Ids(second->Take()), ElementsAre("c@1"));
  dispatcher().Unsubscribe(first_id);
  RunAt(absl::Milliseconds(2));
  EXPECT_THAT(Ids(second->Take()), ElementsAre("a@2", "b@2"));
  dispatcher().Ack(first_id, {"a"});  // Gone with its stream: unknown.
  RunAt(absl::Milliseconds(3));
  EXPECT_EQ(dispatcher().unknown_acks(), 1u);
}

// ---- Groups.

TEST_F(DispatcherTest, GroupsPerTopicAreCapped) {
  options_.dispatcher.max_groups_per_topic = 2;
  Reopen();
  EXPECT_TRUE(engine_->RegisterGroup("t", "g1").ok());
  EXPECT_TRUE(engine_->RegisterGroup("t", "g2").ok());
  EXPECT_TRUE(engine_->RegisterGroup("t", "g2").ok());  // It exists.
  const absl::Status full = absl::ResourceExhaustedError(
      "topic \"t\" has 2 groups; the limit is 2 (--max_groups_per_topic)");
  EXPECT_EQ(engine_->RegisterGroup("t", "g3"), full);
  absl::Notification created;
  absl::Status create;
  dispatcher().CreateGroup("t", "g3", [&](absl::Status s) {
    create = std::move(s);
    created.Notify();
  });
  created.WaitForNotification();
  EXPECT_EQ(create, full);
  absl::Notification subscribed;
  absl::StatusOr<Dispatcher::ConsumerId> id;
  dispatcher().Subscribe({"t", "g3"}, std::make_shared<FakeConsumer>(),
                         [&](absl::StatusOr<Dispatcher::ConsumerId> r) {
                           id = std::move(r);
                           subscribed.Notify();
                         });
  subscribed.WaitForNotification();
  EXPECT_EQ(id.status(), full);
  EXPECT_TRUE(engine_->RegisterGroup("other", "g3").ok());  // Per topic.
  std::vector<std::string> groups;
  for (const Dispatcher::GroupInfo& g : dispatcher().Groups()) {
    groups.push_back(absl::StrCat(g.topic, "/", g.group));
  }
  EXPECT_THAT(groups, ElementsAre("other/g3", "t/g1", "t/g2"));
}

TEST_F(DispatcherTest, ASubscriberThatMayNotCreateGroupsFindsOnlyExistingOnes) {
  auto subscribe = [&](const std::string& group) {
    absl::Notification done;
    absl::StatusOr<Dispatcher::ConsumerId> id;
    Dispatcher::SubscribeOptions options{"t", group};
    options.may_create_group = false;
    dispatcher().Subscribe(options, std::make_shared<FakeConsumer>(),
                           [&](absl::StatusOr<Dispatcher::ConsumerId> r) {
                             id = std::move(r);
                             done.Notify();
                           });
    AwaitWithSteps(done);
    return id;
  };
  EXPECT_EQ(subscribe("new").status(),
            absl::NotFoundError(
                "group \"new\" of topic \"t\" does not exist, and this token "
                "may not create it: an admin creates it (hourglass groups "
                "create --topic=t --group=new)"));
  EXPECT_TRUE(engine_->RegisterGroup("t", "made").ok());
  EXPECT_TRUE(subscribe("made").ok());
  EXPECT_THAT(dispatcher().Groups(), ::testing::SizeIs(1));
}

// ---- Streams whose client stops reading.

// Each message Publish makes in these tests costs a stream's outbox 19
// bytes: id "mN" (2), topic "t" (1), payload "payload of mN" (13), header
// k=mN (3).
constexpr size_t kMessageBytes = 19;

TEST_F(DispatcherTest, AnAckTimeoutRunsFromTheHandOverThoughNothingIsWritten) {
  auto silent = std::make_shared<FakeConsumer>();
  silent->HoldWrites();
  Subscribe("t", "g", silent, /*max_in_flight=*/2,
            /*ack_timeout=*/absl::Seconds(2));
  Publish("t", "m1", absl::ZeroDuration());
  Publish("t", "m2", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(silent->Take()), ElementsAre("m1@1", "m2@1"));
  auto reader = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", reader);
  RunAt(absl::Milliseconds(1999));
  EXPECT_THAT(reader->Take(), IsEmpty());
  RunAt(absl::Seconds(2));
  EXPECT_THAT(Ids(reader->Take()), ElementsAre("m1@2", "m2@2"));
  // Its credit is free again, but its outbox still holds its credit's
  // worth of deliveries: it gets nothing more.
  EXPECT_THAT(silent->Take(), IsEmpty());
}

TEST_F(DispatcherTest, AStreamsUnsentDeliveriesAreBoundedInBytes) {
  options_.dispatcher.max_unsent_bytes = 3 * kMessageBytes;
  Reopen();
  auto slow = std::make_shared<FakeConsumer>();
  slow->HoldWrites();
  Subscribe("t", "g", slow, /*max_in_flight=*/100);
  for (int i = 1; i <= 7; ++i) {
    Publish("t", absl::StrCat("m", i), absl::ZeroDuration());
  }
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(slow->Take()), ElementsAre("m1@1", "m2@1", "m3@1"));
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(slow->Take(), IsEmpty());
  slow->WriteHeld();  // And writes at once from now on.
  RunAt(absl::Milliseconds(2));
  EXPECT_THAT(Ids(slow->Take()), ElementsAre("m4@1", "m5@1", "m6@1", "m7@1"));
}

TEST_F(DispatcherTest, ADeliveryLargerThanTheOutboxLimitGoesAlone) {
  options_.dispatcher.max_unsent_bytes = 10;
  Reopen();
  auto slow = std::make_shared<FakeConsumer>();
  slow->HoldWrites();
  Subscribe("t", "g", slow, /*max_in_flight=*/100);
  Publish("t", "m1", absl::ZeroDuration());
  Publish("t", "m2", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(slow->Take()), ElementsAre("m1@1"));
  slow->WriteHeld();
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(Ids(slow->Take()), ElementsAre("m2@1"));
}

TEST_F(DispatcherTest, AStreamThatWritesNothingForTheStallTimeoutIsEnded) {
  options_.dispatcher.stall_timeout = absl::Seconds(60);
  Reopen();
  auto silent = std::make_shared<FakeConsumer>();
  silent->HoldWrites();
  Subscribe("t", "g", silent, 0, /*ack_timeout=*/absl::Hours(1));
  Publish("t", "m1", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(silent->Take()), ElementsAre("m1@1"));
  auto reader = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", reader);
  clock_.Set(kStart + absl::Seconds(1));
  // The dispatcher's thread sleeps until the stall, and no longer.
  absl::StatusOr<absl::Time> next = dispatcher().Step();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, kStart + absl::Seconds(60));
  RunAt(absl::Milliseconds(59'999));
  EXPECT_EQ(silent->aborted(), std::nullopt);
  EXPECT_THAT(reader->Take(), IsEmpty());
  RunAt(absl::Seconds(60));
  EXPECT_EQ(silent->aborted(),
            absl::DeadlineExceededError(
                "the stream wrote nothing to the client for 1m "
                "(--stream_stall_timeout) while 1 deliveries (19 bytes) "
                "waited to be sent; its 1 unacknowledged deliveries went back "
                "to group \"g\""));
  EXPECT_EQ(silent->ended(), std::nullopt);
  // At once, long before its ack timeout.
  EXPECT_THAT(Ids(reader->Take()), ElementsAre("m1@2"));
}

TEST_F(DispatcherTest, AWriteRestartsTheStallTimeout) {
  options_.dispatcher.stall_timeout = absl::Seconds(60);
  Reopen();
  auto slow = std::make_shared<FakeConsumer>();
  slow->HoldWrites();
  Subscribe("t", "g", slow, 0, /*ack_timeout=*/absl::Hours(1));
  Publish("t", "m1", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  clock_.Set(kStart + absl::Seconds(30));
  slow->WriteHeld();
  slow->HoldWrites();
  Publish("t", "m2", absl::ZeroDuration());
  RunAt(absl::Seconds(30));
  EXPECT_THAT(Ids(slow->Take()), ElementsAre("m1@1", "m2@1"));
  RunAt(absl::Milliseconds(89'999));
  EXPECT_EQ(slow->aborted(), std::nullopt);
  RunAt(absl::Seconds(90));
  ASSERT_TRUE(slow->aborted().has_value());
  EXPECT_EQ(slow->aborted()->code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(DispatcherTest, TheStuckConsumerLineSaysWhatHappensToItsDeliveries) {
  options_.dispatcher.stall_timeout = absl::Seconds(90);
  Reopen();
  testing::LogCapture log;
  auto stuck = std::make_shared<FakeConsumer>();
  stuck->HoldWrites();
  const auto id = Subscribe("t", "g", stuck, /*max_in_flight=*/1,
                            /*ack_timeout=*/absl::Minutes(2));
  Publish("t", "m1", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(stuck->Take()), ElementsAre("m1@1"));
  RunAt(absl::Seconds(60));
  EXPECT_THAT(
      log.Lines(),
      ::testing::Contains(absl::StrCat(
          "warning consumer ", id,
          " of group \"g\" on topic \"t\" is stuck: it has acked nothing for "
          "1m and holds its whole credit (1 deliveries); each goes back to "
          "the group 2m after it was handed to the stream (its ack timeout) "
          "and is delivered again, to any consumer of the group; 1 "
          "deliveries (19 bytes) wait to be written to it, and it is ended "
          "if it writes nothing for 1m30s (--stream_stall_timeout)")));
  // And so it is: ended at 90 s, its delivery goes to another consumer.
  auto reader = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", reader);
  RunAt(absl::Milliseconds(89'999));
  EXPECT_THAT(reader->Take(), IsEmpty());
  RunAt(absl::Seconds(90));
  EXPECT_TRUE(stuck->aborted().has_value());
  EXPECT_THAT(Ids(reader->Take()), ElementsAre("m1@2"));
}

TEST_F(DispatcherTest, AStuckConsumersDeliveriesGoElsewhereAfterTheAckTimeout) {
  testing::LogCapture log;
  auto stuck = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", stuck, /*max_in_flight=*/1,
                            /*ack_timeout=*/absl::Minutes(2));
  Publish("t", "m1", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(stuck->Take()), ElementsAre("m1@1"));
  RunAt(absl::Seconds(60));
  EXPECT_THAT(
      log.Lines(),
      ::testing::Contains(absl::StrCat(
          "warning consumer ", id,
          " of group \"g\" on topic \"t\" is stuck: it has acked nothing for "
          "1m and holds its whole credit (1 deliveries); each goes back to "
          "the group 2m after it was handed to the stream (its ack timeout) "
          "and is delivered again, to any consumer of the group")));
  auto reader = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", reader, /*max_in_flight=*/1);
  RunAt(absl::Milliseconds(119'999));
  EXPECT_THAT(reader->Take(), IsEmpty());
  RunAt(absl::Minutes(2));
  // Once, to either consumer (it is delivered again, and the stuck one
  // has room for it again).
  std::vector<std::string> again = Ids(stuck->Take());
  for (std::string& d : Ids(reader->Take())) again.push_back(std::move(d));
  EXPECT_THAT(again, ElementsAre("m1@2"));
}

TEST_F(DispatcherTest, MessagesDueBeforeAnyGroupWaitForTheFirstGroupOnly) {
  Publish("t", "early", absl::Milliseconds(5));
  RunAt(absl::Milliseconds(5));
  EXPECT_EQ(Count(Table::kReady), 1u);  // In the topic's waiting area.
  auto first = std::make_shared<FakeConsumer>();
  auto second = std::make_shared<FakeConsumer>();
  Subscribe("t", "first", first);
  Subscribe("t", "second", second);
  Publish("t", "later", absl::Milliseconds(10));
  RunAt(absl::Milliseconds(10));
  EXPECT_THAT(Ids(first->Take()), ElementsAre("early@1", "later@1"));
  EXPECT_THAT(Ids(second->Take()), ElementsAre("later@1"));
}

TEST_F(DispatcherTest, ABacklogBeyondTheWindowIsDeliveredInDueOrder) {
  options_.dispatcher.ready_window = 4;
  Reopen();
  std::vector<std::string> expected;
  for (int i = 0; i < 25; ++i) {
    const std::string id = absl::StrCat("m", i < 10 ? "0" : "", i);
    // Published in reverse due order: due order is not publish order.
    Publish("t", id, absl::Milliseconds(100 - i));
    expected.insert(expected.begin(), id + "@1");
  }
  auto consumer = std::make_shared<FakeConsumer>();
  // Registered before the messages come due, consuming after.
  ASSERT_TRUE(engine_->RegisterGroup("t", "g").ok());
  RunAt(absl::Milliseconds(100));
  const auto id = Subscribe("t", "g", consumer, /*max_in_flight=*/3);
  std::vector<std::string> got;
  for (int step = 0; step < 20 && got.size() < 25; ++step) {
    RunAt(absl::Milliseconds(101 + step));
    for (const Delivery& d : consumer->Take()) {
      got.push_back(absl::StrCat(d.id, "@", d.attempt));
      dispatcher().Ack(id, {d.id});
    }
  }
  EXPECT_EQ(got, expected);
  RunAt(absl::Milliseconds(200));
  EXPECT_EQ(Count(Table::kReady), 0u);
  EXPECT_EQ(Count(Table::kMessages), 0u);
}

TEST_F(DispatcherTest, ARestartKeepsGroupsAndRedeliversWhatWasInFlight) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer, 0, absl::Seconds(30));
  Publish("t", "held", absl::ZeroDuration());
  Publish("t", "nacked", absl::ZeroDuration());
  Publish("t", "acked", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  EXPECT_THAT(Ids(consumer->Take()),
              ElementsAre("held@1", "nacked@1", "acked@1"));
  dispatcher().Ack(id, {"acked"});
  dispatcher().Nack(id, "nacked", absl::Seconds(10));
  RunAt(absl::Milliseconds(1));
  Reopen();  // As after kill -9: only the store survives.
  EXPECT_THAT(dispatcher().Groups(), ::testing::SizeIs(1));

  auto after = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", after);
  RunAt(absl::Milliseconds(2));
  // The held delivery is due again at once; the nack's delay still runs.
  EXPECT_THAT(Ids(after->Take()), ElementsAre("held@2"));
  RunAt(absl::Seconds(10) + absl::Milliseconds(1));
  EXPECT_THAT(Ids(after->Take()), ElementsAre("nacked@2"));
}

TEST_F(DispatcherTest, AFailedStepDeliversNothingAndIsRetried) {
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer);
  Publish("t", "x", absl::ZeroDuration());
  clock_.Set(kStart);
  ASSERT_TRUE(engine_->Tick().ok());
  store_->FailWrites(absl::UnavailableError("I/O error"));
  EXPECT_EQ(dispatcher().Step().status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Count(Table::kInFlight), 0u);
  store_->FailWrites(absl::OkStatus());
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("x@1"));
}

TEST_F(DispatcherTest, AFailedAckWriteIsRetriedByTheNextStep) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer);
  Publish("t", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("x@1"));
  dispatcher().Ack(id, {"x"});
  store_->FailWrites(absl::UnavailableError("I/O error"));
  EXPECT_FALSE(dispatcher().Step().ok());
  EXPECT_EQ(Count(Table::kMessages), 1u);
  store_->FailWrites(absl::OkStatus());
  RunAt(absl::Milliseconds(1));
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_THAT(consumer->Take(), IsEmpty());  // Not redelivered.
}

TEST_F(DispatcherTest, ShutdownEndsStreamsAndRefusesNewOnes) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer);
  Publish("t", "x", absl::ZeroDuration());
  RunAt(absl::ZeroDuration());
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("x@1"));
  dispatcher().Ack(id, {"x"});
  dispatcher().Shutdown(absl::UnavailableError("stopping"));
  EXPECT_EQ(consumer->ended(), absl::UnavailableError("stopping"));
  // The ack that arrived before the shutdown was written.
  EXPECT_EQ(Count(Table::kMessages), 0u);

  absl::Notification done;
  absl::StatusOr<Dispatcher::ConsumerId> refused;
  dispatcher().Subscribe({"t", "g"}, std::make_shared<FakeConsumer>(),
                         [&](absl::StatusOr<Dispatcher::ConsumerId> r) {
                           refused = std::move(r);
                           done.Notify();
                         });
  done.WaitForNotification();
  EXPECT_EQ(refused.status(), absl::UnavailableError("stopping"));
}

}  // namespace
}  // namespace hourglass::broker
