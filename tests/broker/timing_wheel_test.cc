#include "broker/timing_wheel.h"

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/timing_wheel_model.h"

namespace hourglass::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

// Expires until `now_ms` and returns the handed-out entries as
// (due, value) pairs, in the order they came out.
std::vector<std::pair<int64_t, uint64_t>> Expire(TimingWheel& wheel,
                                                 int64_t now_ms) {
  std::vector<std::pair<int64_t, uint64_t>> out;
  const size_t n = wheel.ExpireUntil(now_ms, [&](const TimerEntry& e) {
    out.emplace_back(e.due_ms, e.value);
  });
  EXPECT_EQ(n, out.size());
  return out;
}

using Due = std::pair<int64_t, uint64_t>;

TEST(TimingWheelTest, EmptyWheelHasNoExpiryAndExpiresNothing) {
  TimingWheel wheel(1000);
  EXPECT_EQ(wheel.NextExpiry(), std::nullopt);
  EXPECT_TRUE(wheel.empty());
  EXPECT_THAT(Expire(wheel, 1'000'000), IsEmpty());
  EXPECT_EQ(wheel.now(), 1'000'000);
  EXPECT_EQ(wheel.NextExpiry(), std::nullopt);
}

TEST(TimingWheelTest, EntryComesOutAtItsMillisecondAndNotBefore) {
  TimingWheel wheel(0);
  wheel.Schedule(5, 42);
  EXPECT_EQ(wheel.size(), 1u);
  EXPECT_THAT(wheel.NextExpiry(), Optional(5));
  EXPECT_THAT(Expire(wheel, 4), IsEmpty());
  EXPECT_THAT(Expire(wheel, 5), ElementsAre(Due{5, 42}));
  EXPECT_TRUE(wheel.empty());
  EXPECT_THAT(Expire(wheel, 100), IsEmpty());
}

TEST(TimingWheelTest, EntryDueNowOrInThePastComesOutOnNextCall) {
  TimingWheel wheel(100);
  wheel.Schedule(100, 1);  // Due exactly now.
  wheel.Schedule(7, 2);    // Long overdue.
  wheel.Schedule(-5, 3);   // Before time began: also overdue.
  EXPECT_THAT(wheel.NextExpiry(), Optional(-5));
  // Even with a `now` that has not moved, they come out, in due order.
  EXPECT_THAT(Expire(wheel, 100),
              ElementsAre(Due{-5, 3}, Due{7, 2}, Due{100, 1}));
}

TEST(TimingWheelTest, OverdueEntriesPrecedeWheelEntriesInDueOrder) {
  TimingWheel wheel(50);
  wheel.Schedule(60, 1);
  wheel.Schedule(30, 2);
  wheel.Schedule(30, 3);  // Tie with 2: schedule order.
  wheel.Schedule(10, 4);
  EXPECT_THAT(Expire(wheel, 60),
              ElementsAre(Due{10, 4}, Due{30, 2}, Due{30, 3}, Due{60, 1}));
}

TEST(TimingWheelTest, TiesComeOutInScheduleOrderAcrossLevels) {
  TimingWheel wheel(0);
  // The same due time scheduled from far away (a coarse level) and then,
  // after time has moved, from close by (a fine level).
  const int64_t due = 300'000;
  wheel.Schedule(due, 1);
  Expire(wheel, 200'000);
  wheel.Schedule(due, 2);
  Expire(wheel, 299'990);
  wheel.Schedule(due, 3);
  wheel.Schedule(due - 1, 4);
  EXPECT_THAT(Expire(wheel, due), ElementsAre(Due{due - 1, 4}, Due{due, 1},
                                              Due{due, 2}, Due{due, 3}));
}

// For each level boundary 64^L (and the overflow past the top level at
// 64^7), entries one before, at, and one after the boundary come out at
// exactly their millisecond, in order.
TEST(TimingWheelTest, ExactAtEveryLevelBoundary) {
  for (int level = 1; level <= TimingWheel::kLevels; ++level) {
    SCOPED_TRACE("level boundary 64^" + std::to_string(level));
    const int64_t boundary = int64_t{1} << (6 * level);
    TimingWheel wheel(0);
    wheel.Schedule(boundary + 1, 3);
    wheel.Schedule(boundary, 2);
    wheel.Schedule(boundary - 1, 1);
    for (uint64_t value = 1; value <= 3; ++value) {
      const int64_t due = boundary - 2 + static_cast<int64_t>(value);
      EXPECT_THAT(wheel.NextExpiry(), Optional(due));
      EXPECT_THAT(Expire(wheel, due - 1), IsEmpty());
      EXPECT_THAT(Expire(wheel, due), ElementsAre(Due{due, value}));
    }
    EXPECT_TRUE(wheel.empty());
  }
}

// Same, but time starts just before the boundary, so the entries straddle
// an aligned window change rather than sitting in the first window.
TEST(TimingWheelTest, ExactAcrossWindowChangeAtEveryLevel) {
  for (int level = 1; level <= TimingWheel::kLevels; ++level) {
    SCOPED_TRACE("level boundary 64^" + std::to_string(level));
    const int64_t boundary = int64_t{3} << (6 * level);
    TimingWheel wheel(boundary - 2);
    wheel.Schedule(boundary, 2);
    wheel.Schedule(boundary - 1, 1);
    wheel.Schedule(boundary + (int64_t{1} << (6 * level)) - 1, 3);
    EXPECT_THAT(Expire(wheel, boundary - 1), ElementsAre(Due{boundary - 1, 1}));
    EXPECT_THAT(Expire(wheel, boundary), ElementsAre(Due{boundary, 2}));
    const int64_t last = boundary + (int64_t{1} << (6 * level)) - 1;
    EXPECT_THAT(wheel.NextExpiry(), Optional(last));
    EXPECT_THAT(Expire(wheel, last - 1), IsEmpty());
    EXPECT_THAT(Expire(wheel, last), ElementsAre(Due{last, 3}));
  }
}

TEST(TimingWheelTest, The63And64And4095And4096MillisecondEdges) {
  TimingWheel wheel(0);
  wheel.Schedule(4096, 4);
  wheel.Schedule(64, 2);
  wheel.Schedule(4095, 3);
  wheel.Schedule(63, 1);
  std::vector<Due> out;
  for (int64_t t = 0; t <= 5000; ++t) {
    for (const Due& d : Expire(wheel, t)) {
      EXPECT_EQ(d.first, t);
      out.push_back(d);
    }
  }
  EXPECT_THAT(out,
              ElementsAre(Due{63, 1}, Due{64, 2}, Due{4095, 3}, Due{4096, 4}));
}

TEST(TimingWheelTest, FarFutureBeyondTopLevelIsKept) {
  TimingWheel wheel(0);
  const int64_t top_span = int64_t{1} << (6 * TimingWheel::kLevels);
  const int64_t far = 5 * top_span + 12345;  // Five top windows ahead.
  wheel.Schedule(far, 1);
  wheel.Schedule(far + top_span, 2);
  wheel.Schedule(10, 3);
  EXPECT_THAT(Expire(wheel, 10), ElementsAre(Due{10, 3}));
  EXPECT_THAT(Expire(wheel, far - 1), IsEmpty());
  EXPECT_EQ(wheel.size(), 2u);
  EXPECT_THAT(wheel.NextExpiry(), Optional(far));
  EXPECT_THAT(Expire(wheel, far), ElementsAre(Due{far, 1}));
  EXPECT_THAT(Expire(wheel, far + top_span),
              ElementsAre(Due{far + top_span, 2}));
}

// Found by tests/fuzz/timing_wheel_fuzz: reaching overflow entries across
// empty top-level windows entered each window in turn, cascading the whole
// overflow list each time (2^20 windows up to kMaxTimeMs: minutes for a
// few thousand entries). Now it jumps to the earliest entry's window.
TEST(TimingWheelTest, LeapOverEmptyTopWindowsToManyOverflowEntries) {
  TimingWheel wheel(0);
  const int64_t top_span = int64_t{1} << (6 * TimingWheel::kLevels);
  constexpr uint64_t kEntries = 5000;
  for (uint64_t i = 0; i < kEntries; ++i) {
    wheel.Schedule(TimingWheel::kMaxTimeMs - static_cast<int64_t>(i), i);
  }
  wheel.Schedule(3 * top_span + 7, kEntries);  // Between: some windows on.
  EXPECT_THAT(Expire(wheel, 3 * top_span + 6), IsEmpty());
  EXPECT_THAT(Expire(wheel, 3 * top_span + 7),
              ElementsAre(Due{3 * top_span + 7, kEntries}));
  EXPECT_THAT(wheel.NextExpiry(),
              Optional(TimingWheel::kMaxTimeMs - int64_t{kEntries - 1}));
  EXPECT_THAT(Expire(wheel, TimingWheel::kMaxTimeMs - int64_t{kEntries}),
              IsEmpty());
  const std::vector<Due> last = Expire(wheel, TimingWheel::kMaxTimeMs);
  ASSERT_EQ(last.size(), kEntries);
  for (uint64_t i = 0; i < kEntries; ++i) {
    // Due order: the last scheduled is the earliest.
    EXPECT_EQ(last[i], (Due{TimingWheel::kMaxTimeMs -
                                static_cast<int64_t>(kEntries - 1 - i),
                            kEntries - 1 - i}));
  }
  EXPECT_TRUE(wheel.empty());
}

TEST(TimingWheelTest, TimesPastTheMaximumAreClamped) {
  TimingWheel wheel(0);
  const TimerHandle h = wheel.Schedule(INT64_MAX, 9);
  EXPECT_EQ(h.due_ms, TimingWheel::kMaxTimeMs);
  EXPECT_THAT(Expire(wheel, TimingWheel::kMaxTimeMs - 1), IsEmpty());
  EXPECT_THAT(Expire(wheel, INT64_MAX),
              ElementsAre(Due{TimingWheel::kMaxTimeMs, 9}));
}

TEST(TimingWheelTest, CancelRemovesOnlyThatEntry) {
  TimingWheel wheel(0);
  const TimerHandle a = wheel.Schedule(100, 1);
  const TimerHandle b = wheel.Schedule(100, 2);
  const TimerHandle c = wheel.Schedule(100'000, 3);
  EXPECT_TRUE(wheel.Cancel(b));
  EXPECT_FALSE(wheel.Cancel(b));  // Already cancelled.
  EXPECT_EQ(wheel.size(), 2u);
  EXPECT_THAT(Expire(wheel, 100), ElementsAre(Due{100, 1}));
  EXPECT_FALSE(wheel.Cancel(a));  // Already expired.
  EXPECT_TRUE(wheel.Cancel(c));
  EXPECT_TRUE(wheel.empty());
  EXPECT_EQ(wheel.NextExpiry(), std::nullopt);
  EXPECT_THAT(Expire(wheel, 1'000'000), IsEmpty());
}

TEST(TimingWheelTest, CancellingTheLastEntryOfASlotClearsIt) {
  TimingWheel wheel(0);
  const TimerHandle near = wheel.Schedule(10, 1);
  wheel.Schedule(5000, 2);
  EXPECT_THAT(wheel.NextExpiry(), Optional(10));
  EXPECT_TRUE(wheel.Cancel(near));
  // The next expiry is the remaining entry, not the emptied slot.
  EXPECT_THAT(wheel.NextExpiry(), Optional(5000));
}

TEST(TimingWheelTest, CancelOverdueAndOverflowEntries) {
  TimingWheel wheel(1000);
  const TimerHandle overdue = wheel.Schedule(3, 1);
  const TimerHandle far = wheel.Schedule(int64_t{1} << 50, 2);
  EXPECT_TRUE(wheel.Cancel(overdue));
  EXPECT_TRUE(wheel.Cancel(far));
  EXPECT_EQ(wheel.NextExpiry(), std::nullopt);
  EXPECT_THAT(Expire(wheel, int64_t{1} << 51), IsEmpty());
}

TEST(TimingWheelTest, StaleHandleDoesNotCancelTheEntryReusingItsSlot) {
  TimingWheel wheel(0);
  const TimerHandle old = wheel.Schedule(10, 1);
  EXPECT_THAT(Expire(wheel, 10), ElementsAre(Due{10, 1}));
  const TimerHandle fresh = wheel.Schedule(20, 2);
  EXPECT_EQ(fresh.id, old.id);      // The id was recycled...
  EXPECT_FALSE(wheel.Cancel(old));  // ...but the old handle is dead.
  EXPECT_THAT(Expire(wheel, 20), ElementsAre(Due{20, 2}));
}

TEST(TimingWheelTest, RescheduleIsCancelThenSchedule) {
  TimingWheel wheel(0);
  const TimerHandle h = wheel.Schedule(1000, 7);
  ASSERT_TRUE(wheel.Cancel(h));
  wheel.Schedule(400, 7);
  EXPECT_THAT(Expire(wheel, 2000), ElementsAre(Due{400, 7}));
}

TEST(TimingWheelTest, NowNeverMovesBackward) {
  TimingWheel wheel(500);
  Expire(wheel, 1000);
  EXPECT_THAT(Expire(wheel, 10), IsEmpty());
  EXPECT_EQ(wheel.now(), 1000);
  wheel.Schedule(999, 1);  // Behind the wheel's time: overdue.
  EXPECT_THAT(Expire(wheel, 10), ElementsAre(Due{999, 1}));
}

TEST(TimingWheelTest, MemoryIsReturnedAfterABurst) {
  TimingWheel wheel(0);
  for (uint64_t i = 0; i < 1'000'000; ++i) wheel.Schedule(1000, i);
  const size_t peak = wheel.MemoryUsage();
  EXPECT_GE(peak, 24u * 1'000'000);
  EXPECT_EQ(Expire(wheel, 1000).size(), 1'000'000u);
  // The 24-byte entries' blocks go back to the allocator; the per-id state
  // (sequence, bits, free list: under 10 bytes an id) stays sized for the
  // peak.
  EXPECT_LE(wheel.MemoryUsage(), 10u * 1'000'000);
}

// The reference model (shared with tests/fuzz/timing_wheel_fuzz.cc).
using ReferenceModel = ::hourglass::testing::TimingWheelModel;

uint64_t SeedFromEnvironment() {
  if (const char* s = std::getenv("HOURGLASS_SEED"); s != nullptr && *s) {
    return std::strtoull(s, nullptr, 10);
  }
  return std::random_device{}();
}

// At least 1M mixed operations, compared step by step with the reference
// model. Set HOURGLASS_SEED to replay a run.
TEST(TimingWheelRandomTest, MatchesReferenceModel) {
  const uint64_t seed = SeedFromEnvironment();
  std::printf("HOURGLASS_SEED=%llu\n", static_cast<unsigned long long>(seed));
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };

  const int64_t start = uniform(0, int64_t{1} << 41);
  TimingWheel wheel(start);
  ReferenceModel model;
  struct Live {
    TimerHandle handle;
    uint64_t order;
  };
  std::vector<Live> live;         // Possibly already expired.
  std::vector<TimerHandle> dead;  // Cancelled or expired.
  uint64_t order = 0;
  int64_t now = start;
  constexpr int kOperations = 1'200'000;

  for (int op = 0; op < kOperations; ++op) {
    const int kind = static_cast<int>(uniform(0, 99));
    if (kind < 55) {
      // Delays mixing every level, overdue entries and, rarely, overflow.
      int64_t due;
      const int shape = static_cast<int>(uniform(0, 99));
      if (shape < 5) {
        due = now - uniform(0, 100'000);
      } else if (shape < 40) {
        due = now + uniform(0, 200);
      } else if (shape < 70) {
        due = now + uniform(0, 70'000);
      } else if (shape < 98) {
        due = now + uniform(0, int64_t{1} << uniform(12, 40));
      } else {
        due = now + uniform(0, int64_t{1} << 45);
      }
      const uint64_t value = rng();
      const TimerHandle h = wheel.Schedule(due, value);
      ASSERT_EQ(h.due_ms, due);
      model.Schedule(due, order, value);
      live.push_back({h, order++});
    } else if (kind < 70 && !live.empty()) {
      const size_t i = static_cast<size_t>(uniform(0, live.size() - 1));
      const Live victim = live[i];
      live[i] = live.back();
      live.pop_back();
      const bool expected = model.Cancel(victim.handle.due_ms, victim.order);
      ASSERT_EQ(wheel.Cancel(victim.handle), expected) << "op " << op;
      dead.push_back(victim.handle);
    } else if (kind < 72 && !dead.empty()) {
      const size_t i = static_cast<size_t>(uniform(0, dead.size() - 1));
      ASSERT_FALSE(wheel.Cancel(dead[i])) << "op " << op;
    } else {
      // Advance: mostly small steps, sometimes to the next expiry, rarely a
      // leap across coarse levels.
      const int shape = static_cast<int>(uniform(0, 99));
      if (shape < 70) {
        now += uniform(0, 50);
      } else if (shape < 90) {
        if (auto next = wheel.NextExpiry(); next && *next > now) now = *next;
      } else if (shape < 99) {
        now += uniform(0, 100'000);
      } else {
        now += uniform(0, int64_t{1} << 43);
      }
      const std::vector<Due> got = Expire(wheel, now);
      const std::vector<Due> want = model.ExpireUntil(now);
      ASSERT_EQ(got, want) << "op " << op << " now " << now;
    }
    ASSERT_EQ(wheel.size(), model.size()) << "op " << op;
    // NextExpiry is never later than the true next due time, and is absent
    // exactly when nothing is pending.
    const std::optional<int64_t> next = wheel.NextExpiry();
    const std::optional<int64_t> min_due = model.MinDue();
    ASSERT_EQ(next.has_value(), min_due.has_value()) << "op " << op;
    if (next) {
      ASSERT_LE(*next, *min_due) << "op " << op;
    }
    if (live.size() > 200'000) {
      // Forget handles of entries that most likely expired.
      live.erase(live.begin(), live.begin() + 100'000);
    }
    if (dead.size() > 10'000) dead.clear();
  }

  // Drain: following NextExpiry must reach every remaining entry in order,
  // each step making progress.
  while (auto next = wheel.NextExpiry()) {
    const int64_t target = std::max(*next, now);
    const std::vector<Due> got = Expire(wheel, target);
    ASSERT_EQ(got, model.ExpireUntil(target));
    ASSERT_TRUE(!got.empty() || wheel.NextExpiry() != next);
    now = target;
  }
  EXPECT_EQ(model.size(), 0u);
}

}  // namespace
}  // namespace hourglass::broker
