#include "broker/scheduler.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/memory_store.h"
#include "tests/testing/fake_clock.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// 2026-11-22T00:00:00Z, in milliseconds.
constexpr int64_t kStartMs = 1'795'305'600'000;

ScheduledEntry E(int64_t due, uint64_t seq, std::string topic) {
  return {DueKey{due, seq}, std::move(topic)};
}

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() { NewScheduler(); }

  void NewScheduler() {
    scheduler_ = std::make_unique<Scheduler>(
        store_.get(), &clock_,
        Scheduler::Options{.horizon = absl::Seconds(60),
                           .load_ahead = absl::Seconds(1),
                           .load_chunk = 2});
    ASSERT_TRUE(scheduler_->Recover().ok());
  }

  // Writes schedule entries as a durable publish would.
  void Write(const std::vector<ScheduledEntry>& entries) {
    storage::WriteBatch batch;
    for (const ScheduledEntry& e : entries) {
      batch.Put(storage::Table::kSchedule, storage::ScheduleKey(e.key),
                e.topic);
    }
    ASSERT_TRUE(store_->Write(batch).ok());
  }

  // A publish through the scheduler's protocol.
  void Publish(const ScheduledEntry& entry) {
    Scheduler::PendingPublish publish = scheduler_->BeginPublish(entry.key);
    Write({entry});
    std::move(publish).Durable(entry.topic);
  }

  void LoadAll() {
    while (true) {
      absl::StatusOr<bool> more = scheduler_->Load();
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
    }
  }

  // What the broker does with Poll's result: delete the schedule keys and
  // persist the safe cursor, in one batch.
  void Dispatch(const std::vector<ScheduledEntry>& due) {
    storage::WriteBatch batch;
    for (const ScheduledEntry& e : due) {
      batch.Delete(storage::Table::kSchedule, storage::ScheduleKey(e.key));
    }
    {
      Changes cursor;
      lifecycle::MoveLoaderCursor(cursor, scheduler_->SafeCursor());
      batch.Append(cursor.Take());
    }
    ASSERT_TRUE(store_->Write(batch).ok());
  }

  void AdvanceTo(int64_t ms) { clock_.Set(absl::FromUnixMillis(ms)); }

  std::unique_ptr<storage::MessageStore> store_ = storage::MemoryStore::Open();
  testing::FakeClock clock_{absl::FromUnixMillis(kStartMs)};
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, LoadsOnlyWhatEntersTheHorizon) {
  Write({E(kStartMs + 10, 1, "a"), E(kStartMs + 60'999, 2, "b"),
         E(kStartMs + 61'000, 3, "c"), E(kStartMs + 3'600'000, 4, "d")});
  LoadAll();
  EXPECT_EQ(scheduler_->InWheel(), 2u);
  EXPECT_EQ(scheduler_->LoadedUntil(), kStartMs + 61'000);
  // The next load is due once the loaded range ahead shrinks to the horizon.
  EXPECT_EQ(scheduler_->NextWake(), absl::FromUnixMillis(kStartMs + 10));
}

TEST_F(SchedulerTest, HandsOutAtTheDueMillisecondNeverEarlier) {
  Write({E(kStartMs + 10, 1, "a"), E(kStartMs + 10, 2, "b"),
         E(kStartMs + 5, 3, "c")});
  LoadAll();
  AdvanceTo(kStartMs + 4);
  EXPECT_THAT(scheduler_->Poll(), IsEmpty());
  AdvanceTo(kStartMs + 9);
  EXPECT_THAT(scheduler_->Poll(), ElementsAre(E(kStartMs + 5, 3, "c")));
  AdvanceTo(kStartMs + 10);
  EXPECT_THAT(scheduler_->Poll(),
              ElementsAre(E(kStartMs + 10, 1, "a"), E(kStartMs + 10, 2, "b")));
}

TEST_F(SchedulerTest, PublishBehindTheHorizonEntersTheWheelAtOnce) {
  LoadAll();
  Publish(E(kStartMs + 500, 7, "t"));
  EXPECT_EQ(scheduler_->InWheel(), 1u);
  EXPECT_EQ(scheduler_->NextWake(), absl::FromUnixMillis(kStartMs + 500));
  // One beyond the horizon waits on disk for the loader.
  Publish(E(kStartMs + 120'000, 8, "t"));
  EXPECT_EQ(scheduler_->InWheel(), 1u);
  AdvanceTo(kStartMs + 60'000);
  LoadAll();  // Up to now + 61 s: the loader brings the 120 s one in.
  EXPECT_EQ(scheduler_->InWheel(), 2u);
  AdvanceTo(kStartMs + 120'000);
  LoadAll();
  EXPECT_THAT(scheduler_->Poll(), ElementsAre(E(kStartMs + 500, 7, "t"),
                                              E(kStartMs + 120'000, 8, "t")));
}

TEST_F(SchedulerTest, APublishInProgressDuringALoadEntersTheWheelOnce) {
  const ScheduledEntry entry = E(kStartMs + 30'000, 9, "t");
  Scheduler::PendingPublish publish = scheduler_->BeginPublish(entry.key);
  Write({entry});  // Durable, but the publisher has not been told yet...
  LoadAll();       // ...when the loader passes over it.
  EXPECT_EQ(scheduler_->InWheel(), 0u);
  EXPECT_TRUE(std::move(publish).Durable(entry.topic));
  EXPECT_EQ(scheduler_->InWheel(), 1u);
  AdvanceTo(kStartMs + 30'000);
  EXPECT_THAT(scheduler_->Poll(), ElementsAre(entry));
  EXPECT_THAT(scheduler_->Poll(), IsEmpty());
}

// The publisher wakes the timer thread only for messages that entered the
// wheel; the loader brings the others when its horizon reaches them.
TEST_F(SchedulerTest, PublishDurableSaysWhetherTheMessageEnteredTheWheel) {
  LoadAll();  // Loaded up to now + 61 s.
  const ScheduledEntry near = E(kStartMs + 30'000, 1, "t");
  const ScheduledEntry far = E(kStartMs + 120'000, 2, "t");
  Scheduler::PendingPublish near_publish = scheduler_->BeginPublish(near.key);
  Scheduler::PendingPublish far_publish = scheduler_->BeginPublish(far.key);
  Write({near, far});
  EXPECT_TRUE(std::move(near_publish).Durable(near.topic));
  EXPECT_FALSE(std::move(far_publish).Durable(far.topic));
  EXPECT_EQ(scheduler_->InWheel(), 1u);
  AdvanceTo(kStartMs + 60'000);
  LoadAll();  // Up to now + 61 s.
  EXPECT_EQ(scheduler_->InWheel(), 2u);
  AdvanceTo(kStartMs + 120'000);
  EXPECT_THAT(scheduler_->Poll(), ElementsAre(near, far));
}

TEST_F(SchedulerTest, AFailedPublishLeavesNothing) {
  LoadAll();
  const DueKey key{kStartMs + 100, 3};
  Scheduler::PendingPublish publish = scheduler_->BeginPublish(key);
  std::move(publish).Failed();
  EXPECT_EQ(scheduler_->InWheel(), 0u);
  AdvanceTo(kStartMs + 100);
  EXPECT_THAT(scheduler_->Poll(), IsEmpty());
}

// A publish token dropped without an end is a failed publish: the key is
// not left in progress for ever (which would refuse every later cancel
// with ABORTED and hold the cursor back).
TEST_F(SchedulerTest, APublishTokenDroppedUnendedEndsAsFailed) {
  LoadAll();
  const DueKey key{kStartMs + 3'600'000, 3};  // Beyond the loaded horizon.
  {
    Scheduler::PendingPublish dropped = scheduler_->BeginPublish(key);
    EXPECT_EQ(scheduler_->BeginCancel(key, "t").start(),
              Scheduler::CancelStart::kInProgress);
  }
  EXPECT_EQ(scheduler_->BeginCancel(key, "t").start(),
            Scheduler::CancelStart::kAccepted);
}

TEST_F(SchedulerTest, CancelBeforeDueWinsAfterDueLoses) {
  Write({E(kStartMs + 100, 1, "a"), E(kStartMs + 200, 2, "b"),
         E(kStartMs + 3'600'000, 3, "far")});
  LoadAll();
  Scheduler::PendingCancel a = scheduler_->BeginCancel({kStartMs + 100, 1}, "a");
  EXPECT_EQ(a.start(), Scheduler::CancelStart::kAccepted);
  std::move(a).End(/*deleted=*/true);
  Scheduler::PendingCancel far =
      scheduler_->BeginCancel({kStartMs + 3'600'000, 3}, "far");  // On disk.
  EXPECT_EQ(far.start(), Scheduler::CancelStart::kAccepted);
  AdvanceTo(kStartMs + 200);
  EXPECT_THAT(scheduler_->Poll(), ElementsAre(E(kStartMs + 200, 2, "b")));
  EXPECT_EQ(scheduler_->BeginCancel({kStartMs + 200, 2}, "b").start(),
            Scheduler::CancelStart::kAlreadyDue);
  std::move(far).End(/*deleted=*/true);
}

TEST_F(SchedulerTest, TheLoaderSkipsAMessageBeingCancelled) {
  Write({E(kStartMs + 90'000, 1, "a")});
  LoadAll();
  Scheduler::PendingCancel cancel =
      scheduler_->BeginCancel({kStartMs + 90'000, 1}, "a");
  EXPECT_EQ(cancel.start(), Scheduler::CancelStart::kAccepted);
  AdvanceTo(kStartMs + 60'000);
  LoadAll();  // Reads it from disk, but a cancel is deleting it.
  EXPECT_EQ(scheduler_->InWheel(), 0u);
  std::move(cancel).End(/*deleted=*/true);
  AdvanceTo(kStartMs + 90'000);
  EXPECT_THAT(scheduler_->Poll(), IsEmpty());
}

TEST_F(SchedulerTest, AFailedCancelPutsTheMessageBack) {
  Write({E(kStartMs + 100, 1, "a")});
  LoadAll();
  Scheduler::PendingCancel cancel =
      scheduler_->BeginCancel({kStartMs + 100, 1}, "a");
  EXPECT_EQ(cancel.start(), Scheduler::CancelStart::kAccepted);
  EXPECT_EQ(scheduler_->InWheel(), 0u);
  std::move(cancel).End(/*deleted=*/false);
  AdvanceTo(kStartMs + 100);
  EXPECT_THAT(scheduler_->Poll(), ElementsAre(E(kStartMs + 100, 1, "a")));
}

// A cancel token dropped without an end puts the message back, as a
// failed cancel does: an error path that forgets it loses no message.
TEST_F(SchedulerTest, ACancelTokenDroppedUnendedPutsTheMessageBack) {
  Write({E(kStartMs + 100, 1, "a")});
  LoadAll();
  {
    Scheduler::PendingCancel dropped =
        scheduler_->BeginCancel({kStartMs + 100, 1}, "a");
    EXPECT_EQ(dropped.start(), Scheduler::CancelStart::kAccepted);
    EXPECT_EQ(scheduler_->InWheel(), 0u);
  }
  EXPECT_EQ(scheduler_->InWheel(), 1u);
  AdvanceTo(kStartMs + 100);
  EXPECT_THAT(scheduler_->Poll(), ElementsAre(E(kStartMs + 100, 1, "a")));
}

// A moved-from token ends nothing; the one it moved to ends once.
TEST_F(SchedulerTest, AMovedTokenEndsOnce) {
  Write({E(kStartMs + 100, 1, "a")});
  LoadAll();
  Scheduler::PendingCancel first =
      scheduler_->BeginCancel({kStartMs + 100, 1}, "a");
  Scheduler::PendingCancel second = std::move(first);
  std::move(first).End(/*deleted=*/false);  // Moved from: no effect.
  EXPECT_EQ(scheduler_->InWheel(), 0u);
  std::move(second).End(/*deleted=*/true);
  std::move(second).End(/*deleted=*/false);  // Ended: no effect.
  EXPECT_EQ(scheduler_->InWheel(), 0u);
  AdvanceTo(kStartMs + 100);
  EXPECT_THAT(scheduler_->Poll(), IsEmpty());
}

TEST_F(SchedulerTest, SafeCursorIsTheLeastUndispatchedOrWritableKey) {
  Write({E(kStartMs + 100, 1, "a"), E(kStartMs + 200, 2, "b")});
  LoadAll();
  // Never past now: a publish may still write any key from now on.
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs, 0}));
  AdvanceTo(kStartMs + 150);
  Dispatch(scheduler_->Poll());
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs + 150, 0}));
  AdvanceTo(kStartMs + 300);
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs + 200, 0}));  // b.
  Dispatch(scheduler_->Poll());
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs + 300, 0}));
  // A write in progress holds it back to its key...
  Scheduler::PendingPublish publish =
      scheduler_->BeginPublish({kStartMs + 260, 3});
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs + 260, 3}));
  std::move(publish).Failed();
  // ...and a held publish floor to its floor, even after time moves on...
  Scheduler::CursorHold hold = scheduler_->HoldCursor();
  EXPECT_EQ(hold.floor(), kStartMs + 300);
  AdvanceTo(kStartMs + 900);
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs + 300, 0}));
  std::move(hold).Release();
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs + 900, 0}));
  // ...until the hold ends, by name or by its destructor.
  { Scheduler::CursorHold dropped = scheduler_->HoldCursor(); }
  AdvanceTo(kStartMs + 950);
  EXPECT_EQ(scheduler_->SafeCursor(), (DueKey{kStartMs + 950, 0}));
}

TEST_F(SchedulerTest, CancelWhileAWriteOfTheKeyIsInProgressIsRefused) {
  LoadAll();
  const DueKey key{kStartMs + 100, 1};
  Scheduler::PendingPublish publish = scheduler_->BeginPublish(key);
  EXPECT_EQ(scheduler_->BeginCancel(key, "a").start(),
            Scheduler::CancelStart::kInProgress);
  Write({E(kStartMs + 100, 1, "a")});
  std::move(publish).Durable("a");
  Scheduler::PendingCancel cancel = scheduler_->BeginCancel(key, "a");
  EXPECT_EQ(cancel.start(), Scheduler::CancelStart::kAccepted);
  EXPECT_EQ(scheduler_->BeginCancel(key, "a").start(),
            Scheduler::CancelStart::kInProgress);
  std::move(cancel).End(/*deleted=*/true);
}

TEST_F(SchedulerTest, AfterARestartTheClockNeverRunsBehindTheCursor) {
  storage::WriteBatch batch;
  {
    Changes cursor;
    lifecycle::MoveLoaderCursor(cursor, DueKey{kStartMs + 5000, 0});
    batch.Append(cursor.Take());
  }
  ASSERT_TRUE(store_->Write(batch).ok());
  NewScheduler();  // The wall clock reads kStartMs: 5 s behind the cursor.
  EXPECT_EQ(scheduler_->NowMs(), kStartMs + 5000);
  EXPECT_EQ(scheduler_->HoldCursor().floor(), kStartMs + 5000);
}

TEST_F(SchedulerTest, TimeNeverGoesBackwardWhenTheWallClockDoes) {
  AdvanceTo(kStartMs + 5000);
  EXPECT_EQ(scheduler_->NowMs(), kStartMs + 5000);
  AdvanceTo(kStartMs + 1000);  // The wall clock is set back.
  EXPECT_EQ(scheduler_->NowMs(), kStartMs + 5000);
  EXPECT_EQ(scheduler_->HoldCursor().floor(), kStartMs + 5000);
}

// The restart promise: after any mix of loads, publishes and dispatches,
// a new scheduler over the same store holds exactly the undispatched
// messages: none lost, none handed out twice.
TEST_F(SchedulerTest, RestartResumesFromTheCursorWithNothingLostOrRepeated) {
  Write({E(kStartMs + 100, 1, "a"), E(kStartMs + 200, 2, "b"),
         E(kStartMs + 300, 3, "c"), E(kStartMs + 90'000, 4, "d")});
  LoadAll();
  AdvanceTo(kStartMs + 250);
  Publish(E(kStartMs + 260, 5, "e"));
  Dispatch(scheduler_->Poll());  // a, b.
  // Crash before c, e (in memory) and d (on disk only) come due.
  NewScheduler();
  LoadAll();
  AdvanceTo(kStartMs + 100'000);
  LoadAll();
  EXPECT_THAT(scheduler_->Poll(),
              ElementsAre(E(kStartMs + 260, 5, "e"), E(kStartMs + 300, 3, "c"),
                          E(kStartMs + 90'000, 4, "d")));
}

}  // namespace
}  // namespace hourglass::broker
