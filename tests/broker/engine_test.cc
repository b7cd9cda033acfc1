#include "broker/engine.h"

#include <pthread.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "broker/lifecycle_reads.h"
#include "broker/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/memory_store.h"
#include "storage/records.pb.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/faulty_store.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;
using storage::Table;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kStartMs = 1'795'305'600'000;
const absl::Time kStart = absl::FromUnixMillis(kStartMs);

NewMessage Message(std::string topic, absl::Duration delay, std::string id = "",
                   std::string payload = "p") {
  return NewMessage{std::move(topic),
                    std::move(id),
                    std::move(payload),
                    {{"h", "v"}},
                    kStart + delay};
}

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() { Reopen(); }

  void Reopen() {
    engine_.reset();
    auto engine = Engine::Open(store_.get(), &clock_, Engine::Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // Drops the engine and its store, and opens one with `options` on an
  // empty store: its sequences start at 1, as the first engine's did (every
  // engine reserves a block of them when it opens).
  absl::StatusOr<std::unique_ptr<Engine>> OpenFresh(
      const Engine::Options& options, Clock* clock) {
    engine_.reset();
    store_ = std::make_unique<testing::FaultyStore>();
    return Engine::Open(store_.get(), clock, options);
  }

  absl::StatusOr<std::vector<PublishReceipt>> Publish(
      std::vector<NewMessage> messages) {
    absl::Notification done;
    absl::StatusOr<std::vector<PublishReceipt>> result;
    engine_->Publish(std::move(messages),
                     [&](absl::StatusOr<std::vector<PublishReceipt>> r) {
                       result = std::move(r);
                       done.Notify();
                     });
    done.WaitForNotification();
    return result;
  }

  absl::Status Cancel(std::string topic, std::string id) {
    absl::Notification done;
    absl::Status result;
    engine_->Cancel(std::move(topic), std::move(id), [&](absl::Status s) {
      result = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }

  // Runs timer steps at `ms` until the engine wants to run later.
  void TickAt(int64_t ms) {
    clock_.Set(absl::FromUnixMillis(ms));
    while (true) {
      absl::StatusOr<absl::Time> next = engine_->Tick();
      ASSERT_TRUE(next.ok()) << next.status();
      if (*next > clock_.Now()) break;
    }
  }

  // Ready keys of (topic, group), decoded.
  std::vector<DueKey> Ready(const std::string& topic,
                            const std::string& group) {
    const std::string prefix = storage::ReadyPrefix(topic, group);
    std::vector<DueKey> keys;
    EXPECT_TRUE(store_
                    ->Scan(Table::kReady, prefix, storage::PrefixEnd(prefix),
                           [&](std::string_view k, std::string_view) {
                             keys.push_back(
                                 *storage::DecodeReadySuffix(k, prefix));
                             return true;
                           })
                    .ok());
    return keys;
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

  std::unique_ptr<testing::FaultyStore> store_ =
      std::make_unique<testing::FaultyStore>();
  testing::FakeClock clock_{kStart};
  SystemClock system_clock_;  // Outlives the engine, which reads it.
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, PublishStoresTheMessageAndReturnsReceiptsInOrder) {
  auto receipts = Publish({Message("orders", absl::Milliseconds(100), "o-1"),
                           Message("orders", absl::Milliseconds(50))});
  ASSERT_TRUE(receipts.ok()) << receipts.status();
  EXPECT_THAT(
      *receipts,
      ElementsAre(
          PublishReceipt{"o-1", kStart + absl::Milliseconds(100), false},
          PublishReceipt{"hg-0000000000000002", kStart + absl::Milliseconds(50),
                         false}));
  auto value = store_->Get(Table::kMessages, storage::MessageKey(1));
  ASSERT_TRUE(value.ok() && value->has_value());
  storage::MessageRecord record;
  ASSERT_TRUE(record.ParseFromString(**value));
  EXPECT_EQ(record.topic(), "orders");
  EXPECT_EQ(record.id(), "o-1");
  EXPECT_EQ(record.payload(), "p");
  EXPECT_EQ(record.headers().at("h"), "v");
  EXPECT_EQ(record.deliver_at_ms(), kStartMs + 100);
  EXPECT_EQ(record.published_at_ms(), kStartMs);
  EXPECT_EQ(Count(Table::kSchedule), 2u);
}

TEST_F(EngineTest, DueMessagesMoveToReadyAtTheirMillisecondInDueOrder) {
  ASSERT_TRUE(engine_->RegisterGroup("orders", "billing").ok());
  ASSERT_TRUE(engine_->RegisterGroup("orders", "audit").ok());
  ASSERT_TRUE(Publish({Message("orders", absl::Milliseconds(100)),
                       Message("orders", absl::Milliseconds(50)),
                       Message("other", absl::Milliseconds(50))})
                  .ok());
  TickAt(kStartMs + 49);
  EXPECT_THAT(Ready("orders", "billing"), IsEmpty());
  TickAt(kStartMs + 50);
  EXPECT_THAT(Ready("orders", "billing"),
              ElementsAre(DueKey{kStartMs + 50, 2}));
  EXPECT_THAT(Ready("orders", "audit"), ElementsAre(DueKey{kStartMs + 50, 2}));
  // A topic without groups keeps its due messages for its first group.
  EXPECT_THAT(Ready("other", ""), ElementsAre(DueKey{kStartMs + 50, 3}));
  TickAt(kStartMs + 100);
  EXPECT_THAT(Ready("orders", "billing"),
              ElementsAre(DueKey{kStartMs + 50, 2}, DueKey{kStartMs + 100, 1}));
  EXPECT_EQ(Count(Table::kSchedule), 0u);
}

TEST_F(EngineTest, ARepeatedIdReturnsTheFirstReceiptAndStoresNothing) {
  auto first = Publish({Message("orders", absl::Seconds(30), "order-7")});
  ASSERT_TRUE(first.ok());
  clock_.Set(kStart + absl::Seconds(1));
  auto again = Publish({Message("orders", absl::Seconds(99), "order-7"),
                        Message("orders", absl::Seconds(5), "order-8"),
                        Message("orders", absl::Seconds(6), "order-8"),
                        Message("returns", absl::Seconds(5), "order-7")});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(
      *again,
      ElementsAre(PublishReceipt{"order-7", kStart + absl::Seconds(30), true},
                  PublishReceipt{"order-8", kStart + absl::Seconds(5), false},
                  PublishReceipt{"order-8", kStart + absl::Seconds(5), true},
                  PublishReceipt{"order-7", kStart + absl::Seconds(5), false}));
  EXPECT_EQ(Count(Table::kMessages), 3u);
}

TEST_F(EngineTest, CancelBeforeDueRemovesEverythingAfterDueIsNotFound) {
  ASSERT_TRUE(Publish({Message("t", absl::Seconds(1), "a"),
                       Message("t", absl::Seconds(2), "b")})
                  .ok());
  EXPECT_TRUE(Cancel("t", "a").ok());
  EXPECT_EQ(Cancel("t", "a").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Cancel("t", "nope").code(), absl::StatusCode::kNotFound);
  TickAt(kStartMs + 2000);
  EXPECT_THAT(Ready("t", ""), ElementsAre(DueKey{kStartMs + 2000, 2}));
  const absl::Status late = Cancel("t", "b");
  EXPECT_EQ(late.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(late.message()),
            "no scheduled message with id \"b\" in topic \"t\" (unknown, "
            "already due, or cancelled)");
  EXPECT_EQ(Count(Table::kMessages), 1u);  // b, now ready.
}

TEST(AssignedIdTest, OnlyTheIdAssignedFromItsOwnSequenceHasNoIdsEntry) {
  EXPECT_EQ(storage::AssignedId(0xf4a2c), "hg-00000000000f4a2c");
  EXPECT_EQ(storage::AssignedId(~uint64_t{0}), "hg-ffffffffffffffff");
  EXPECT_FALSE(storage::HasIdEntry("hg-00000000000f4a2c", 0xf4a2c));
  EXPECT_FALSE(storage::HasIdEntry("hg-ffffffffffffffff", ~uint64_t{0}));
  // A dead letter's copy, under a new sequence.
  EXPECT_TRUE(storage::HasIdEntry("hg-00000000000f4a2c", 0xf4a2d));
  EXPECT_TRUE(storage::HasIdEntry("order-7", 7));
  EXPECT_TRUE(
      storage::HasIdEntry("hg-00000000000F4A2C", 0xf4a2c));  // Not the form.
}

// A message keeps the id the broker assigned it in its messages record
// alone: the id names the sequence, so no ids entry is written or deleted.
TEST_F(EngineTest, AssignedIdsNeedNoIdsEntryYetCancelAndRescheduleFindThem) {
  auto receipts = Publish({Message("t", absl::Seconds(1)),
                           Message("t", absl::Seconds(2), "mine"),
                           Message("u", absl::Seconds(3))});
  ASSERT_TRUE(receipts.ok()) << receipts.status();
  ASSERT_EQ((*receipts)[0].id, "hg-0000000000000001");
  ASSERT_EQ((*receipts)[2].id, "hg-0000000000000003");
  EXPECT_EQ(Count(Table::kIds), 1u);  // Only the producer's id.
  EXPECT_EQ(Count(Table::kTopicDue), 3u);

  // An assigned id names its message in its own topic only.
  EXPECT_EQ(Cancel("u", "hg-0000000000000001").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Cancel("t", "hg-0000000000000003").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Cancel("t", "hg-0000000000000002").code(),  // That is "mine".
            absl::StatusCode::kNotFound);

  absl::Notification rescheduled;
  absl::StatusOr<PublishReceipt> moved;
  engine_->Reschedule("u", "hg-0000000000000003", kStart + absl::Seconds(9),
                      [&](absl::StatusOr<PublishReceipt> r) {
                        moved = std::move(r);
                        rescheduled.Notify();
                      });
  rescheduled.WaitForNotification();
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, (PublishReceipt{"hg-0000000000000003",
                                    kStart + absl::Seconds(9), false}));
  EXPECT_EQ(Count(Table::kIds), 1u);

  EXPECT_TRUE(Cancel("t", "hg-0000000000000001").ok());
  EXPECT_EQ(Cancel("t", "hg-0000000000000001").code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(Cancel("t", "mine").ok());
  EXPECT_EQ(Count(Table::kIds), 0u);
  EXPECT_EQ(Count(Table::kMessages), 1u);
  EXPECT_EQ(Count(Table::kTopicDue), 1u);
  TickAt(kStartMs + 8999);
  EXPECT_THAT(Ready("u", ""), IsEmpty());
  TickAt(kStartMs + 9000);
  EXPECT_THAT(Ready("u", ""), ElementsAre(DueKey{kStartMs + 9000, 3}));
}

TEST_F(EngineTest, CancelOfAMessageNotYetLoadedWins) {
  ASSERT_TRUE(Publish({Message("t", absl::Hours(2), "far")}).ok());
  TickAt(kStartMs);
  EXPECT_TRUE(Cancel("t", "far").ok());
  TickAt(kStartMs + 2 * 3600 * 1000);
  EXPECT_THAT(Ready("t", ""), IsEmpty());
  EXPECT_EQ(Count(Table::kMessages), 0u);
}

TEST_F(EngineTest, RestartLosesNothingAndRepeatsNothing) {
  ASSERT_TRUE(engine_->RegisterGroup("t", "g").ok());
  ASSERT_TRUE(
      Publish({Message("t", absl::Milliseconds(10)),
               Message("t", absl::Seconds(30)), Message("t", absl::Hours(1))})
          .ok());
  TickAt(kStartMs + 10);
  Reopen();  // As after kill -9: only the store survives.
  ASSERT_TRUE(Publish({Message("t", absl::Seconds(20))}).ok());
  TickAt(kStartMs + 3600 * 1000);
  // The new run's sequences start after the block the first run reserved.
  EXPECT_THAT(Ready("t", "g"), ElementsAre(DueKey{kStartMs + 10, 1},
                                           DueKey{kStartMs + 20'000, 1'000'001},
                                           DueKey{kStartMs + 30'000, 2},
                                           DueKey{kStartMs + 3600 * 1000, 3}));
}

// The persisted cursor must not pass keys that later publishes can still
// write: here one published after a dispatch, due before the loaded
// horizon, must survive a crash.
TEST_F(EngineTest, APublishAfterADispatchSurvivesARestart) {
  ASSERT_TRUE(engine_->RegisterGroup("t", "g").ok());
  ASSERT_TRUE(Publish({Message("t", absl::Milliseconds(10))}).ok());
  TickAt(kStartMs + 10);  // Dispatches it and persists the cursor.
  ASSERT_TRUE(Publish({Message("t", absl::Seconds(5))}).ok());
  Reopen();
  TickAt(kStartMs + 5000);
  EXPECT_THAT(Ready("t", "g"), ElementsAre(DueKey{kStartMs + 10, 1},
                                           DueKey{kStartMs + 5000, 2}));
}

TEST_F(EngineTest, TheCursorFollowsTimeOncePublishesEnd) {
  ASSERT_TRUE(Publish({Message("t", absl::Milliseconds(10))}).ok());
  TickAt(kStartMs + 10);
  TickAt(kStartMs + 3600 * 1000);
  EXPECT_EQ(engine_->scheduler().SafeCursor(),
            (DueKey{kStartMs + 3600 * 1000, 0}));
}

TEST_F(EngineTest, CancelOfAMessageDispatchedBeforeARestartIsNotFound) {
  ASSERT_TRUE(Publish({Message("t", absl::Milliseconds(10), "x")}).ok());
  TickAt(kStartMs + 10);
  Reopen();  // The loader has not reached its key again.
  EXPECT_EQ(Cancel("t", "x").code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Ready("t", ""), ElementsAre(DueKey{kStartMs + 10, 1}));
  EXPECT_EQ(Count(Table::kMessages), 1u);
}

TEST_F(EngineTest, AssignedIdsAreNeverReusedAcrossRestarts) {
  auto first = Publish({Message("t", absl::Seconds(5))});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Cancel("t", (*first)[0].id).ok());  // Nothing left stored.
  Reopen();
  auto second = Publish({Message("t", absl::Seconds(5))});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*first)[0].id, "hg-0000000000000001");
  EXPECT_EQ((*second)[0].id, "hg-00000000000f4241");  // After the block.
  EXPECT_EQ(Cancel("t", (*first)[0].id).code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, DueMessagesWhileDownDrainAtOnceInDueOrder) {
  ASSERT_TRUE(engine_->RegisterGroup("t", "g").ok());
  ASSERT_TRUE(
      Publish({Message("t", absl::Seconds(3)), Message("t", absl::Seconds(1)),
               Message("t", absl::Seconds(2))})
          .ok());
  Reopen();
  TickAt(kStartMs + 3600 * 1000);
  EXPECT_THAT(Ready("t", "g"), ElementsAre(DueKey{kStartMs + 1000, 2},
                                           DueKey{kStartMs + 2000, 3},
                                           DueKey{kStartMs + 3000, 1}));
}

TEST_F(EngineTest, AFailedPublishStoresNothingAndTheEngineRecovers) {
  // The publish batch is not written (the engine reserved its sequences
  // when it opened).
  store_->FailWrites(absl::ResourceExhaustedError("disk full"));
  auto failed = Publish({Message("t", absl::Milliseconds(10), "a"),
                         Message("t", absl::Milliseconds(20))});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Count(Table::kMessages), 0u);
  EXPECT_EQ(Count(Table::kIds), 0u);
  EXPECT_EQ(engine_->scheduler().InWheel(), 0u);

  store_->FailWrites(absl::OkStatus());
  auto retried = Publish({Message("t", absl::Milliseconds(10), "a")});
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_FALSE((*retried)[0].duplicate);  // The failed attempt left no id.
  TickAt(kStartMs + 10);
  EXPECT_THAT(Ready("t", ""), ElementsAre(DueKey{kStartMs + 10, 3}));
}

TEST_F(EngineTest, AFailedDispatchKeepsTheMessagesForTheNextStep) {
  ASSERT_TRUE(Publish({Message("t", absl::Milliseconds(10))}).ok());
  TickAt(kStartMs);
  clock_.Set(kStart + absl::Milliseconds(10));
  store_->FailWrites(absl::UnavailableError("I/O error"));
  EXPECT_EQ(engine_->Tick().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Ready("t", ""), IsEmpty());
  store_->FailWrites(absl::OkStatus());
  TickAt(kStartMs + 11);
  EXPECT_THAT(Ready("t", ""), ElementsAre(DueKey{kStartMs + 10, 1}));
  EXPECT_EQ(Count(Table::kSchedule), 0u);
}

TEST_F(EngineTest, AFailedDispatchBatchRetriesOnlyWhatWasNotWritten) {
  Engine::Options options;
  options.dispatch_batch = 2;
  std::vector<DueKey> handed_on;
  options.on_dispatched = [&](const std::vector<ScheduledEntry>& due) {
    for (const ScheduledEntry& e : due) handed_on.push_back(e.key);
  };
  auto small = OpenFresh(options, &clock_);
  ASSERT_TRUE(small.ok()) << small.status();
  engine_.reset();
  engine_ = *std::move(small);
  ASSERT_TRUE(engine_->RegisterGroup("t", "g").ok());
  ASSERT_TRUE(Publish({Message("t", absl::Milliseconds(1)),
                       Message("t", absl::Milliseconds(2)),
                       Message("t", absl::Milliseconds(3))})
                  .ok());
  TickAt(kStartMs);
  clock_.Set(kStart + absl::Milliseconds(3));
  // One chunk (two messages) per step: the first is written, the second
  // fails.
  ASSERT_TRUE(engine_->Tick().ok());
  store_->FailWrites(absl::UnavailableError("I/O error"));
  EXPECT_EQ(engine_->Tick().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Ready("t", "g"),
              ElementsAre(DueKey{kStartMs + 1, 1}, DueKey{kStartMs + 2, 2}));
  EXPECT_THAT(handed_on,
              ElementsAre(DueKey{kStartMs + 1, 1}, DueKey{kStartMs + 2, 2}));
  EXPECT_EQ(engine_->due_backlog(), 1u);  // Only the third waits again.
  // The cursor stays before the message that waits.
  EXPECT_EQ(lifecycle::ReadLoaderCursor(*store_)->deliver_at_ms, kStartMs + 3);
  store_->FailWrites(absl::OkStatus());
  TickAt(kStartMs + 3);
  EXPECT_THAT(Ready("t", "g"),
              ElementsAre(DueKey{kStartMs + 1, 1}, DueKey{kStartMs + 2, 2},
                          DueKey{kStartMs + 3, 3}));
}

// A burst in one topic does not hold back another topic's messages: each
// chunk shares itself among the topics with messages waiting.
TEST_F(EngineTest, ABurstInOneTopicDoesNotHoldBackAnother) {
  Engine::Options options;
  options.dispatch_batch = 100;
  auto small = OpenFresh(options, &clock_);
  ASSERT_TRUE(small.ok()) << small.status();
  engine_.reset();
  engine_ = *std::move(small);
  std::vector<NewMessage> burst;
  for (int i = 0; i < 5000; ++i) {
    burst.push_back(Message("burst", absl::Milliseconds(10)));
  }
  ASSERT_TRUE(Publish(std::move(burst)).ok());
  ASSERT_TRUE(Publish({Message("quiet", absl::Milliseconds(11), "q")}).ok());
  TickAt(kStartMs);
  clock_.Set(kStart + absl::Milliseconds(11));
  ASSERT_TRUE(engine_->Tick().ok());  // One chunk.
  EXPECT_THAT(Ready("quiet", ""), ElementsAre(DueKey{kStartMs + 11, 5001}));
  EXPECT_EQ(Ready("burst", "").size(), 99u);
  EXPECT_EQ(engine_->due_backlog(), 4901u);
  TickAt(kStartMs + 11);
  EXPECT_EQ(Ready("burst", "").size(), 5000u);
  EXPECT_EQ(engine_->due_backlog(), 0u);
}

TEST_F(EngineTest, AFailedCancelLeavesTheMessageScheduled) {
  ASSERT_TRUE(Publish({Message("t", absl::Milliseconds(10), "a")}).ok());
  TickAt(kStartMs);
  store_->FailWrites(absl::UnavailableError("I/O error"));
  EXPECT_EQ(Cancel("t", "a").code(), absl::StatusCode::kUnavailable);
  store_->FailWrites(absl::OkStatus());
  TickAt(kStartMs + 10);
  EXPECT_THAT(Ready("t", ""), ElementsAre(DueKey{kStartMs + 10, 1}));
}

TEST_F(EngineTest, TheTimerThreadDispatchesOnItsOwn) {
  // Real time: the thread sleeps until the next due time and is woken by
  // publishes; the test waits for the dispatch notification.
  absl::Notification dispatched;
  std::vector<ScheduledEntry> seen;
  Engine::Options options;
  options.on_dispatched = [&](const std::vector<ScheduledEntry>& due) {
    seen = due;
    dispatched.Notify();
  };
  auto real = OpenFresh(options, &system_clock_);
  ASSERT_TRUE(real.ok()) << real.status();
  engine_.reset();
  engine_ = *std::move(real);
  engine_->Start();
  const absl::Time deliver_at =
      absl::FromUnixMillis(absl::ToUnixMillis(system_clock_.Now()) + 50);
  ASSERT_TRUE(Publish({NewMessage{"t", "", "p", {}, deliver_at}}).ok());
  ASSERT_TRUE(dispatched.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(system_clock_.Now(), deliver_at);  // Never early.
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].key, (DueKey{absl::ToUnixMillis(deliver_at), 1}));
  EXPECT_EQ(Ready("t", "").size(), 1u);
}

// The name of the calling thread.
std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// Admin queries answer through the Broker interface on the engine's own
// thread, never on the caller's (a gRPC thread must not wait on store
// reads), with what the views hold.
TEST_F(EngineTest, AdminQueriesAnswerOnTheEnginesReadsThread) {
  ASSERT_TRUE(Publish({Message("t", absl::Hours(1), "a")}).ok());
  Broker& broker = *engine_;

  absl::Notification listed;
  std::string list_thread;
  broker.ListMessages({.topic = "t"}, [&](absl::StatusOr<ListPage> page) {
    list_thread = ThreadName();
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_EQ(page->messages.size(), 1u);
    EXPECT_EQ(page->messages[0].id, "a");
    EXPECT_EQ(page->messages[0].deliver_at, kStart + absl::Hours(1));
    listed.Notify();
  });
  listed.WaitForNotification();
  EXPECT_EQ(list_thread, "hg-admin-reads");

  absl::Notification shown;
  std::string show_thread;
  broker.GetMessage("t", "nope", 16, [&](absl::StatusOr<MessageView> view) {
    show_thread = ThreadName();
    EXPECT_EQ(view.status().code(), absl::StatusCode::kNotFound);
    shown.Notify();
  });
  shown.WaitForNotification();
  EXPECT_EQ(show_thread, "hg-admin-reads");

  absl::Notification counted;
  broker.Stats("t", [&](absl::StatusOr<std::vector<TopicStats>> stats) {
    ASSERT_TRUE(stats.ok()) << stats.status();
    ASSERT_EQ(stats->size(), 1u);
    EXPECT_EQ((*stats)[0].scheduled, 1u);
    counted.Notify();
  });
  counted.WaitForNotification();
}

// A purge of scheduled messages runs on the tasks thread (not the reads
// thread, so that queries do not wait behind it) and answers how many it
// cancelled.
TEST_F(EngineTest, APurgeOfScheduledMessagesCountsWhatItCancelled) {
  ASSERT_TRUE(Publish({Message("t", absl::Hours(1), "a"),
                       Message("t", absl::Hours(2), "b")})
                  .ok());
  absl::Notification purged;
  std::string purge_thread;
  engine_->Purge("t", /*scheduled=*/true, /*ready=*/false,
                 [&](absl::StatusOr<uint64_t> n) {
                   purge_thread = ThreadName();
                   ASSERT_TRUE(n.ok()) << n.status();
                   EXPECT_EQ(*n, 2u);
                   purged.Notify();
                 });
  purged.WaitForNotification();
  EXPECT_EQ(purge_thread, "hg-admin-tasks");
  EXPECT_EQ(Cancel("t", "a").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hourglass::broker
