// Message deadlines (NewMessage::expire_at) through the engine, on a fake
// clock: timer steps (Tick) and dispatcher steps (Step) run only when a
// test calls them, so every delivery, count and time below is exact.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "broker/dispatcher.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/message_store.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/fake_consumer.h"
#include "tests/testing/faulty_store.h"

namespace hourglass::broker {
namespace {

using storage::Table;
using ::testing::ElementsAre;
using testing::FakeConsumer;
using ::testing::HasSubstr;
using testing::Ids;
using ::testing::IsEmpty;

constexpr int64_t kStartMs = 1'795'305'600'000;  // 2026-11-22T00:00:00Z
const absl::Time kStart = absl::FromUnixMillis(kStartMs);

enum class OnExpire { kDrop, kDeadLetter };

class ExpiryTest : public ::testing::Test {
 protected:
  ExpiryTest() {
    options_.dispatcher.max_attempts = 3;
    options_.dispatcher.default_ack_timeout = absl::Seconds(30);
    options_.metrics = &registry_;
    auto engine = Engine::Open(store_.get(), &clock_, options_);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (engine.ok()) engine_ = *std::move(engine);
  }
  ~ExpiryTest() override { engine_.reset(); }  // Before the registry.

  Dispatcher& dispatcher() { return engine_->dispatcher(); }

  // Publishes `id`, due `delay` after kStart, expiring `expire` after
  // kStart (none if infinite).
  void Publish(const std::string& topic, const std::string& id,
               absl::Duration delay,
               absl::Duration expire = absl::InfiniteDuration(),
               OnExpire on_expire = OnExpire::kDrop) {
    NewMessage m{topic, id, "payload of " + id, {{"k", id}}, kStart + delay};
    if (expire != absl::InfiniteDuration()) m.expire_at = kStart + expire;
    m.dead_letter_on_expire = on_expire == OnExpire::kDeadLetter;
    absl::Notification done;
    absl::StatusOr<std::vector<PublishReceipt>> result;
    engine_->Publish({std::move(m)},
                     [&](absl::StatusOr<std::vector<PublishReceipt>> r) {
                       result = std::move(r);
                       done.Notify();
                     });
    done.WaitForNotification();
    ASSERT_TRUE(result.ok()) << result.status();
  }

  Dispatcher::ConsumerId Subscribe(const std::string& topic,
                                   const std::string& group,
                                   std::shared_ptr<FakeConsumer> consumer,
                                   uint32_t max_in_flight = 0) {
    absl::Notification done;
    absl::StatusOr<Dispatcher::ConsumerId> id;
    FakeConsumer* fake = consumer.get();
    dispatcher().Subscribe({topic, group, max_in_flight, absl::ZeroDuration()},
                           std::move(consumer),
                           [&](absl::StatusOr<Dispatcher::ConsumerId> r) {
                             if (r.ok()) fake->Attach(&dispatcher(), *r);
                             id = std::move(r);
                             done.Notify();
                           });
    // The consumer joins in a step, once its group is registered (on the
    // commit queue's thread): steps until then, at most 30 s.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
      EXPECT_TRUE(dispatcher().Step().ok());
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "not subscribed after 30 s";
        done.WaitForNotification();
      }
    }
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
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

  // The scrape's line for `family` of `topic`.
  std::string Total(const std::string& family, const std::string& topic) {
    const std::string text = registry_.Render();
    const std::string prefix = absl::StrCat(family, "{topic=\"", topic, "\"} ");
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return "";
    return text.substr(at, text.find('\n', at) - at);
  }

  metrics::Registry registry_;
  Engine::Options options_;
  std::unique_ptr<testing::FaultyStore> store_ =
      std::make_unique<testing::FaultyStore>();
  testing::FakeClock clock_{kStart};
  std::unique_ptr<Engine> engine_;
};

TEST_F(ExpiryTest, AMessageIsDeliveredUpToAMillisecondBeforeItsDeadline) {
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer);
  Publish("t", "a", absl::Milliseconds(10), absl::Milliseconds(100));
  RunAt(absl::Milliseconds(99));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("a@1"));
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 0");
}

TEST_F(ExpiryTest, AMessagePastItsDeadlineWhileItsConsumerIsStalledIsDropped) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer, /*max_in_flight=*/1);
  Publish("t", "first", absl::ZeroDuration());
  Publish("t", "second", absl::ZeroDuration(), absl::Milliseconds(100));
  Publish("t", "third", absl::ZeroDuration());
  RunAt(absl::Milliseconds(1));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("first@1"));
  RunAt(absl::Milliseconds(100));  // The deadline: too late from now on.
  EXPECT_THAT(consumer->Take(), IsEmpty());
  dispatcher().Ack(id, {"first"});
  RunAt(absl::Milliseconds(101));
  // Its turn came: dropped, and the credit went to the next message.
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("third@1"));
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 1");
  EXPECT_EQ(Total("hourglass_delivered_total", "t"),
            "hourglass_delivered_total{topic=\"t\"} 2");
  dispatcher().Ack(id, {"third"});
  RunAt(absl::Milliseconds(102));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kReady), 0u);
  EXPECT_EQ(Count(Table::kInFlight), 0u);
  EXPECT_EQ(Count(Table::kTopicDue), 0u);
  EXPECT_EQ(Count(Table::kIds), 0u);
  EXPECT_EQ(storage::DecodeCounter(
                **store_->Get(Table::kCounters, storage::MessagesCounter("t"))),
            0);
}

TEST_F(ExpiryTest, AMessageWaitingForADisconnectedGroupExpiresWhenItConnects) {
  ASSERT_TRUE(dispatcher().RegisterGroup("t", "g").ok());
  Publish("t", "a", absl::Milliseconds(10), absl::Milliseconds(50));
  RunAt(absl::Milliseconds(500));
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer);
  RunAt(absl::Milliseconds(501));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 1");
  EXPECT_EQ(Count(Table::kMessages), 0u);
}

TEST_F(ExpiryTest, NoRedeliveryAfterTheDeadline) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer);
  Publish("t", "nacked", absl::ZeroDuration(), absl::Milliseconds(100));
  Publish("t", "timed-out", absl::ZeroDuration(), absl::Seconds(40));
  RunAt(absl::Milliseconds(1));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("nacked@1", "timed-out@1"));
  // Due again at 150 ms, after its deadline; the other's ack timeout ends
  // at 30 s, before its own, so it comes again once.
  dispatcher().Nack(id, "nacked", absl::Milliseconds(149));
  RunAt(absl::Milliseconds(200));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  RunAt(absl::Seconds(30) + absl::Milliseconds(1));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("timed-out@2"));
  RunAt(absl::Seconds(60) + absl::Milliseconds(2));  // Past 40 s.
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 2");
  EXPECT_EQ(Total("hourglass_redelivered_total", "t"),
            "hourglass_redelivered_total{topic=\"t\"} 1");
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kInFlight), 0u);
}

TEST_F(ExpiryTest, WithDeadLetterOnExpireTheMessageGoesToTheDeadLetterTopic) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer, /*max_in_flight=*/1);
  Publish("t", "first", absl::ZeroDuration());
  Publish("t", "second", absl::ZeroDuration(), absl::Milliseconds(100),
          OnExpire::kDeadLetter);
  RunAt(absl::Milliseconds(1));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("first@1"));
  RunAt(absl::Milliseconds(200));
  dispatcher().Ack(id, {"first"});
  RunAt(absl::Milliseconds(201));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 1");
  EXPECT_EQ(Total("hourglass_dead_lettered_total", "t"),
            "hourglass_dead_lettered_total{topic=\"t\"} 0");

  // In t.dlq, due now, without the deadline, never delivered in t.
  auto letters = std::make_shared<FakeConsumer>();
  Subscribe("t.dlq", "d", letters);
  RunAt(absl::Seconds(10));
  std::vector<Delivery> got = letters->Take();
  EXPECT_THAT(Ids(got), ElementsAre("second@1"));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "payload of second");
  EXPECT_EQ(got[0].headers.at("k"), "second");
  EXPECT_EQ(got[0].deliver_at, kStart + absl::Milliseconds(201));
  EXPECT_EQ(Count(Table::kMessages), 1u);  // The letter, in flight.
}

// Each group expires the message when its own turn comes; the message is
// deleted by the last group to be done with it, expired or acked.
TEST_F(ExpiryTest, ExpiringInOneGroupLeavesItsOtherGroupsAlone) {
  auto fast = std::make_shared<FakeConsumer>();
  auto slow = std::make_shared<FakeConsumer>();
  const auto fast_id = Subscribe("t", "fast", fast);
  const auto slow_id = Subscribe("t", "slow", slow, /*max_in_flight=*/1);
  Publish("t", "blocker", absl::ZeroDuration());
  Publish("t", "m", absl::ZeroDuration(), absl::Milliseconds(100));
  RunAt(absl::Milliseconds(1));
  EXPECT_THAT(Ids(fast->Take()), ElementsAre("blocker@1", "m@1"));
  EXPECT_THAT(Ids(slow->Take()), ElementsAre("blocker@1"));
  RunAt(absl::Milliseconds(150));
  dispatcher().Ack(slow_id, {"blocker"});
  RunAt(absl::Milliseconds(151));
  EXPECT_THAT(slow->Take(), IsEmpty());
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 1");
  // "fast" still holds both: nothing is deleted until it acks.
  EXPECT_EQ(Count(Table::kMessages), 2u);
  dispatcher().Ack(fast_id, {"blocker", "m"});
  RunAt(absl::Milliseconds(152));
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kInFlight), 0u);
  EXPECT_EQ(Count(Table::kReady), 0u);
}

// Two groups expiring one message in the same step: one letter, and the
// message deleted once (neither group counts the other as holding it).
TEST_F(ExpiryTest, TwoGroupsExpiringAMessageInOneStepLetterItOnce) {
  auto one = std::make_shared<FakeConsumer>();
  auto two = std::make_shared<FakeConsumer>();
  const auto one_id = Subscribe("t", "one", one, /*max_in_flight=*/1);
  const auto two_id = Subscribe("t", "two", two, /*max_in_flight=*/1);
  Publish("t", "blocker", absl::ZeroDuration());
  Publish("t", "m", absl::ZeroDuration(), absl::Milliseconds(100),
          OnExpire::kDeadLetter);
  RunAt(absl::Milliseconds(1));
  ASSERT_THAT(Ids(one->Take()), ElementsAre("blocker@1"));
  ASSERT_THAT(Ids(two->Take()), ElementsAre("blocker@1"));
  dispatcher().Ack(one_id, {"blocker"});
  dispatcher().Ack(two_id, {"blocker"});
  RunAt(absl::Milliseconds(100));
  EXPECT_THAT(one->Take(), IsEmpty());
  EXPECT_THAT(two->Take(), IsEmpty());
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 2");
  // Only the letter is left: due now in t.dlq, waiting for a group.
  EXPECT_EQ(Count(Table::kMessages), 1u);
  EXPECT_EQ(Count(Table::kInFlight), 0u);
  EXPECT_EQ(storage::DecodeCounter(**store_->Get(
                Table::kCounters, storage::MessagesCounter("t.dlq"))),
            1);
  auto letters = std::make_shared<FakeConsumer>();
  Subscribe("t.dlq", "d", letters);
  RunAt(absl::Milliseconds(101));
  EXPECT_THAT(Ids(letters->Take()), ElementsAre("m@1"));
}

// After --max_attempts a message past its deadline expires rather than
// being dead-lettered: dropped unless it asks for a letter.
TEST_F(ExpiryTest, AMessagePastItsDeadlineAtMaxAttemptsExpires) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer);
  Publish("t", "m", absl::ZeroDuration(), absl::Milliseconds(100));
  RunAt(absl::Milliseconds(1));
  for (int attempt = 1; attempt <= 3; ++attempt) {
    if (attempt > 1) RunAt(absl::Milliseconds(1 + attempt));
    ASSERT_THAT(Ids(consumer->Take()),
                ElementsAre(absl::StrCat("m@", attempt)));
    dispatcher().Nack(id, "m", absl::ZeroDuration());
  }
  RunAt(absl::Milliseconds(200));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 1");
  EXPECT_EQ(Total("hourglass_dead_lettered_total", "t"),
            "hourglass_dead_lettered_total{topic=\"t\"} 0");
  EXPECT_EQ(Count(Table::kMessages), 0u);
}

// A step whose write fails is undone, expiries and letters with the rest;
// the next step expires the same entries again, from the ready queue and
// from a nack's wait alike.
TEST_F(ExpiryTest, AFailedWriteUndoesExpiriesForTheNextStep) {
  auto consumer = std::make_shared<FakeConsumer>();
  const auto id = Subscribe("t", "g", consumer);
  Publish("t", "nacked", absl::ZeroDuration(), absl::Milliseconds(100),
          OnExpire::kDeadLetter);
  Publish("t", "late", absl::Milliseconds(50), absl::Milliseconds(100),
          OnExpire::kDeadLetter);
  RunAt(absl::Milliseconds(1));
  ASSERT_THAT(Ids(consumer->Take()), ElementsAre("nacked@1"));
  dispatcher().Nack(id, "nacked", absl::Milliseconds(149));
  RunAt(absl::Milliseconds(2));
  clock_.Set(kStart + absl::Milliseconds(200));
  while (true) {  // Moves "late" to ready, without a dispatcher step.
    absl::StatusOr<absl::Time> tick = engine_->Tick();
    ASSERT_TRUE(tick.ok()) << tick.status();
    if (*tick > clock_.Now()) break;
  }
  store_->FailWrites(absl::UnavailableError("I/O error"));
  EXPECT_EQ(dispatcher().Step().status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Count(Table::kMessages), 2u);
  EXPECT_EQ(Count(Table::kInFlight), 1u);
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 0");
  store_->FailWrites(absl::OkStatus());
  RunAt(absl::Milliseconds(201));
  EXPECT_THAT(consumer->Take(), IsEmpty());
  EXPECT_EQ(Total("hourglass_expired_total", "t"),
            "hourglass_expired_total{topic=\"t\"} 2");
  // Only the two letters are left, in t.dlq's waiting area.
  EXPECT_EQ(Count(Table::kMessages), 2u);
  EXPECT_EQ(Count(Table::kInFlight), 0u);
  EXPECT_EQ(Count(Table::kReady), 2u);
  EXPECT_EQ(storage::DecodeCounter(**store_->Get(
                Table::kCounters, storage::MessagesCounter("t.dlq"))),
            2);
}

TEST_F(ExpiryTest, RescheduleRefusesATimeAtOrAfterTheDeadline) {
  Publish("t", "m", absl::Seconds(10), absl::Seconds(60));
  auto reschedule = [&](absl::Duration to) {
    absl::Notification done;
    absl::StatusOr<PublishReceipt> result;
    engine_->Reschedule("t", "m", kStart + to,
                        [&](absl::StatusOr<PublishReceipt> r) {
                          result = std::move(r);
                          done.Notify();
                        });
    done.WaitForNotification();
    return result;
  };
  absl::StatusOr<PublishReceipt> refused = reschedule(absl::Seconds(60));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "message \"m\" expires at 2026-11-22T00:01:00+00:00: it cannot be "
            "due at or after that");
  absl::StatusOr<PublishReceipt> moved = reschedule(absl::Seconds(59));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->deliver_at, kStart + absl::Seconds(59));
  auto consumer = std::make_shared<FakeConsumer>();
  Subscribe("t", "g", consumer);
  RunAt(absl::Seconds(59));
  EXPECT_THAT(Ids(consumer->Take()), ElementsAre("m@1"));
}

}  // namespace
}  // namespace hourglass::broker
