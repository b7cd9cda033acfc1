#include "recurrence/misfire.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recurrence/occurrence.h"
#include "recurrence/rule.h"
#include "tests/recurrence/rule_testing.h"

namespace hourglass::recurrence {
namespace {

using ::hourglass::testing::MakeRule;
using ::hourglass::testing::Utc;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

Rule Hourly() {
  RuleSpec spec;
  spec.cron = "0 * * * *";
  return MakeRule(spec);
}

// Missed: 01:00, 02:00, 03:00, 04:00, 05:00.
constexpr char kLastFired[] = "2027-01-01T00:00:00Z";
constexpr char kNow[] = "2027-01-01T05:30:00Z";

TEST(MissedFireTimesTest, SkipFiresNothing) {
  const Misfires m = MissedFireTimes(Hourly(), Utc(kLastFired), Utc(kNow),
                                     MisfirePolicy::kSkip, absl::Hours(2));
  EXPECT_THAT(m.fire, IsEmpty());
  EXPECT_EQ(m.skipped, 5);
}

TEST(MissedFireTimesTest, OnceFiresTheLatestMissedTimeWithinCatchUp) {
  const Misfires m = MissedFireTimes(Hourly(), Utc(kLastFired), Utc(kNow),
                                     MisfirePolicy::kOnce, absl::Hours(2));
  EXPECT_THAT(m.fire, ElementsAre(Utc("2027-01-01T05:00:00Z")));
  EXPECT_EQ(m.skipped, 4);
}

TEST(MissedFireTimesTest, AllFiresEachMissedTimeWithinCatchUpOldestFirst) {
  const Misfires m = MissedFireTimes(Hourly(), Utc(kLastFired), Utc(kNow),
                                     MisfirePolicy::kAll, absl::Hours(2));
  EXPECT_THAT(m.fire, ElementsAre(Utc("2027-01-01T04:00:00Z"),
                                  Utc("2027-01-01T05:00:00Z")));
  EXPECT_EQ(m.skipped, 3);
}

TEST(MissedFireTimesTest, CatchUpIncludesATimeExactlyThatOld) {
  const Misfires m =
      MissedFireTimes(Hourly(), Utc(kLastFired), Utc("2027-01-01T05:00:00Z"),
                      MisfirePolicy::kAll, absl::Hours(2));
  EXPECT_THAT(m.fire, ElementsAre(Utc("2027-01-01T03:00:00Z"),
                                  Utc("2027-01-01T04:00:00Z"),
                                  Utc("2027-01-01T05:00:00Z")));
  EXPECT_EQ(m.skipped, 2);
  const Misfires just_after = MissedFireTimes(
      Hourly(), Utc(kLastFired), Utc("2027-01-01T05:00:00.5Z"),
      MisfirePolicy::kAll, absl::Hours(2) + absl::Milliseconds(500));
  EXPECT_EQ(just_after.fire.front(), Utc("2027-01-01T03:00:00Z"));
}

TEST(MissedFireTimesTest, ZeroOrNegativeCatchUpFiresOnlyATimeAtNow) {
  for (absl::Duration catch_up : {absl::ZeroDuration(), absl::Seconds(-5)}) {
    const Misfires at_now =
        MissedFireTimes(Hourly(), Utc(kLastFired), Utc("2027-01-01T05:00:00Z"),
                        MisfirePolicy::kOnce, catch_up);
    EXPECT_THAT(at_now.fire, ElementsAre(Utc("2027-01-01T05:00:00Z")));
    EXPECT_EQ(at_now.skipped, 4);
    const Misfires later = MissedFireTimes(Hourly(), Utc(kLastFired),
                                           Utc("2027-01-01T05:00:00.5Z"),
                                           MisfirePolicy::kOnce, catch_up);
    EXPECT_THAT(later.fire, IsEmpty());
    EXPECT_EQ(later.skipped, 5);
  }
}

TEST(MissedFireTimesTest, InfiniteCatchUpFiresEveryMissedTime) {
  const Misfires m =
      MissedFireTimes(Hourly(), Utc(kLastFired), Utc(kNow), MisfirePolicy::kAll,
                      absl::InfiniteDuration());
  EXPECT_EQ(m.fire.size(), 5u);
  EXPECT_EQ(m.fire.front(), Utc("2027-01-01T01:00:00Z"));
  EXPECT_EQ(m.skipped, 0);
}

TEST(MissedFireTimesTest, NothingMissedWhenNowIsNotAfterLastFired) {
  for (MisfirePolicy policy :
       {MisfirePolicy::kSkip, MisfirePolicy::kOnce, MisfirePolicy::kAll}) {
    const Misfires m =
        MissedFireTimes(Hourly(), Utc(kNow), Utc(kNow), policy, absl::Hours(2));
    EXPECT_THAT(m.fire, IsEmpty());
    EXPECT_EQ(m.skipped, 0);
  }
  const Misfires none =
      MissedFireTimes(Hourly(), Utc("2027-01-01T05:00:00Z"), Utc(kNow),
                      MisfirePolicy::kAll, absl::Hours(2));
  EXPECT_THAT(none.fire, IsEmpty());
  EXPECT_EQ(none.skipped, 0);
}

TEST(MissedFireTimesTest, OnlyTimesBeforeTheRulesEndAreMissed) {
  RuleSpec spec;
  spec.cron = "0 * * * *";
  spec.end_at = Utc("2027-01-01T03:00:00Z");
  const Misfires m = MissedFireTimes(MakeRule(spec), Utc(kLastFired), Utc(kNow),
                                     MisfirePolicy::kOnce, absl::Hours(4));
  EXPECT_THAT(m.fire, ElementsAre(Utc("2027-01-01T02:00:00Z")));
  EXPECT_EQ(m.skipped, 1);
}

TEST(MissedFireTimesTest, EveryRulesCountSkippedTimesExactly) {
  RuleSpec spec;
  spec.every = absl::Seconds(1);
  spec.start_at = Utc("2027-01-01T00:00:00Z");
  spec.end_at = Utc("2027-03-01T00:00:00Z");
  const Rule rule = MakeRule(spec);
  const absl::Time last = Utc("2027-01-01T00:00:00Z");
  const absl::Time now = last + absl::Hours(24 * 30);
  const Misfires once =
      MissedFireTimes(rule, last, now, MisfirePolicy::kOnce, absl::Seconds(10));
  EXPECT_THAT(once.fire, ElementsAre(now));
  EXPECT_EQ(once.skipped, 30 * 86400 - 1);
  const Misfires skip =
      MissedFireTimes(rule, last, now, MisfirePolicy::kSkip, absl::Seconds(10));
  EXPECT_EQ(skip.skipped, 30 * 86400);
  // Past the end: only the times before it.
  const Misfires ended =
      MissedFireTimes(rule, last, last + absl::Hours(24 * 90),
                      MisfirePolicy::kSkip, absl::ZeroDuration());
  EXPECT_EQ(ended.skipped, 59 * 86400 - 1);
}

TEST(MissedFireTimesTest, CronRulesStopCountingAtTheLimit) {
  RuleSpec spec;
  spec.cron = "* * * * * *";
  const absl::Time last = Utc("2027-01-01T00:00:00Z");
  const Misfires m =
      MissedFireTimes(MakeRule(spec), last, last + absl::Hours(24 * 20),
                      MisfirePolicy::kSkip, absl::Hours(1));
  EXPECT_EQ(m.skipped, kMaxCountedMisses);
}

TEST(MisfirePolicyTest, ParsesTheOptionNames) {
  EXPECT_EQ(ParseMisfirePolicy("skip").value(), MisfirePolicy::kSkip);
  EXPECT_EQ(ParseMisfirePolicy("once").value(), MisfirePolicy::kOnce);
  EXPECT_EQ(ParseMisfirePolicy("all").value(), MisfirePolicy::kAll);
  EXPECT_EQ(ParseMisfirePolicy("ALL").status(),
            absl::InvalidArgumentError(
                "misfire \"ALL\": want \"skip\", \"once\" or \"all\""));
}

TEST(OccurrenceIdTest, IsTheIdAtTheFireTimeInRfc3339Utc) {
  EXPECT_EQ(OccurrenceId("daily", Utc("2027-03-14T07:00:00Z")),
            "daily@2027-03-14T07:00:00Z");
  EXPECT_EQ(OccurrenceId("daily", Utc("2027-03-14T03:00:00-04:00")),
            "daily@2027-03-14T07:00:00Z");
  EXPECT_EQ(OccurrenceId("a@b", Utc("2027-03-14T07:00:00.5Z")),
            "a@b@2027-03-14T07:00:00.5Z");
}

TEST(JitterTest, IsFixedForTheSameInputsInEveryProcess) {
  // Golden values (checked against an independent FNV-1a and splitmix64):
  // a change to them changes every node's delays and breaks agreement
  // between releases.
  const absl::Time t = Utc("2027-03-14T07:00:00Z");
  EXPECT_EQ(StableHash("daily", t), 11491199425361621399u);
  EXPECT_EQ(StableHash("", absl::UnixEpoch()), 7526961181645162559u);
  EXPECT_EQ(Jitter("daily", t, absl::Seconds(30)), absl::Milliseconds(18688));
  EXPECT_EQ(Jitter("daily", t, absl::Seconds(30)),
            Jitter("daily", t, absl::Seconds(30)));
  EXPECT_NE(StableHash("daily", t), StableHash("daily", t + absl::Seconds(1)));
  EXPECT_NE(StableHash("daily", t), StableHash("dailz", t));
}

TEST(JitterTest, IsUniformInWholeMillisecondsUpToTheMaximum) {
  const absl::Duration max = absl::Milliseconds(1000);
  const absl::Time start = Utc("2027-01-01T00:00:00Z");
  absl::Duration sum, lowest = max, highest;
  constexpr int kSamples = 20000;
  for (int i = 0; i < kSamples; ++i) {
    const absl::Duration d = Jitter("r", start + absl::Seconds(i), max);
    ASSERT_GE(d, absl::ZeroDuration());
    ASSERT_LE(d, max);
    ASSERT_EQ(d, absl::Trunc(d, absl::Milliseconds(1)));
    sum += d;
    lowest = std::min(lowest, d);
    highest = std::max(highest, d);
  }
  EXPECT_EQ(lowest, absl::ZeroDuration());
  EXPECT_EQ(highest, max);
  EXPECT_NEAR(absl::ToDoubleMilliseconds(sum / kSamples), 500.0, 10.0);
}

TEST(JitterTest, IsZeroBelowOneMillisecond) {
  const absl::Time t = Utc("2027-03-14T07:00:00Z");
  EXPECT_EQ(Jitter("daily", t, absl::ZeroDuration()), absl::ZeroDuration());
  EXPECT_EQ(Jitter("daily", t, absl::Microseconds(999)), absl::ZeroDuration());
  EXPECT_EQ(Jitter("daily", t, absl::Seconds(-1)), absl::ZeroDuration());
}

}  // namespace
}  // namespace hourglass::recurrence
