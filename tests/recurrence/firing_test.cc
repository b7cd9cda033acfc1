// Firing: which occurrences a stored recurrence publishes when it starts,
// when its pending occurrence comes due on time or after an outage (each
// misfire option, catch_up, the threshold), at its limit, with jitter,
// when resumed and when triggered. Times are exact.

#include "recurrence/firing.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recurrence/misfire.h"
#include "recurrence/occurrence.h"
#include "recurrence/rule.h"
#include "tests/recurrence/rule_testing.h"

namespace hourglass::recurrence {
namespace {

using ::hourglass::testing::Format;
using ::hourglass::testing::MakeRule;
using ::hourglass::testing::Utc;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

Rule Cron(const std::string& cron, const std::string& zone = "") {
  RuleSpec spec;
  spec.cron = cron;
  spec.time_zone = zone;
  return MakeRule(spec);
}

Rule EverySecond() {
  RuleSpec spec;
  spec.every = absl::Seconds(1);
  return MakeRule(spec);
}

Firing EveryMinute(FiringOptions options = {}) {
  return Firing("report", Cron("* * * * *"), options);
}

// The fire times of `occurrences`, in RFC 3339.
std::vector<std::string> FireTimes(const std::vector<Occurrence>& occurrences) {
  std::vector<std::string> out;
  for (const Occurrence& o : occurrences) out.push_back(Format(o.fire_time));
  return out;
}

std::string NextFire(const Plan& plan) {
  return plan.next ? Format(plan.next->fire_time) : "none";
}

TEST(FiringTest, StartSchedulesTheFirstFireTimeAfterNow) {
  const Plan plan = EveryMinute().Start(Utc("2027-01-01T10:00:30Z"), {});
  ASSERT_TRUE(plan.next.has_value());
  EXPECT_EQ(*plan.next, (Occurrence{Utc("2027-01-01T10:01:00Z"),
                                    Utc("2027-01-01T10:01:00Z"),
                                    "report@2027-01-01T10:01:00Z"}));
  EXPECT_THAT(plan.fire_now, IsEmpty());
  EXPECT_EQ(plan.progress, Progress());
  // A fire time at now itself is not after it.
  EXPECT_EQ(NextFire(EveryMinute().Start(Utc("2027-01-01T10:01:00Z"), {})),
            "2027-01-01T10:02:00Z");
}

TEST(FiringTest, AnOnTimeOccurrenceIsDeliveredAndTheNextScheduled) {
  const Firing firing = EveryMinute();
  const Occurrence due = firing.OccurrenceAt(Utc("2027-01-01T10:01:00Z"));
  const Plan plan = firing.Due(due, Utc("2027-01-01T10:01:00.005Z"), {});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_THAT(plan.fire_now, IsEmpty());
  EXPECT_EQ(NextFire(plan), "2027-01-01T10:02:00Z");
  EXPECT_EQ(plan.progress, (Progress{1, 0, Utc("2027-01-01T10:01:00Z")}));
  EXPECT_EQ(plan.skipped_by_policy + plan.skipped_too_old, 0u);
}

TEST(FiringTest, FireTimesThatCameDueWithALateStepFireTooWithoutMisses) {
  const Firing firing("tick", EverySecond(), {.misfire = MisfirePolicy::kSkip});
  const Occurrence due = firing.OccurrenceAt(Utc("2027-01-01T00:00:10Z"));
  const Plan plan = firing.Due(due, Utc("2027-01-01T00:00:12.500Z"),
                               {9, 0, Utc("2027-01-01T00:00:09Z")});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now),
              ElementsAre("2027-01-01T00:00:11Z", "2027-01-01T00:00:12Z"));
  EXPECT_EQ(NextFire(plan), "2027-01-01T00:00:13Z");
  EXPECT_EQ(plan.progress, (Progress{12, 0, Utc("2027-01-01T00:00:12Z")}));
}

// Pending 10:00, the broker down until 12:00:00.5 (now - 1 h =
// 11:00:00.5): 10:00..11:00 are too old, 11:01..11:59 missed within
// catch_up, 12:00 on time.
constexpr char kPending[] = "2027-01-01T10:00:00Z";
constexpr char kBack[] = "2027-01-01T12:00:00.500Z";

TEST(FiringTest, AfterAnOutageOnceFiresTheLatestMissedTimeAndTheOnTimeOne) {
  const Firing firing = EveryMinute();
  const Plan plan =
      firing.Due(firing.OccurrenceAt(Utc(kPending)), Utc(kBack), {});
  EXPECT_FALSE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now),
              ElementsAre("2027-01-01T11:59:00Z", "2027-01-01T12:00:00Z"));
  EXPECT_EQ(plan.skipped_too_old, 61u);
  EXPECT_EQ(plan.skipped_by_policy, 58u);
  EXPECT_EQ(plan.progress, (Progress{2, 119, Utc("2027-01-01T12:00:00Z")}));
  EXPECT_EQ(NextFire(plan), "2027-01-01T12:01:00Z");
}

TEST(FiringTest, AfterAnOutageSkipFiresOnlyTheOnTimeOne) {
  const Firing firing = EveryMinute({.misfire = MisfirePolicy::kSkip});
  const Plan plan =
      firing.Due(firing.OccurrenceAt(Utc(kPending)), Utc(kBack), {});
  EXPECT_FALSE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now), ElementsAre("2027-01-01T12:00:00Z"));
  EXPECT_EQ(plan.skipped_too_old, 61u);
  EXPECT_EQ(plan.skipped_by_policy, 59u);
  EXPECT_EQ(plan.progress.misses, 120u);
}

TEST(FiringTest, AfterAnOutageAllFiresEveryMissedTimeWithinCatchUp) {
  const Firing firing = EveryMinute({.misfire = MisfirePolicy::kAll});
  const Plan plan =
      firing.Due(firing.OccurrenceAt(Utc(kPending)), Utc(kBack), {});
  EXPECT_FALSE(plan.deliver_due);  // 10:00 is older than catch_up.
  const std::vector<std::string> fired = FireTimes(plan.fire_now);
  ASSERT_EQ(fired.size(), 60u);
  EXPECT_EQ(fired.front(), "2027-01-01T11:01:00Z");
  EXPECT_EQ(fired[58], "2027-01-01T11:59:00Z");
  EXPECT_EQ(fired.back(), "2027-01-01T12:00:00Z");
  EXPECT_EQ(plan.skipped_too_old, 61u);
  EXPECT_EQ(plan.skipped_by_policy, 0u);
}

TEST(FiringTest, AShortOutageDeliversThePendingOccurrenceIfTheOptionKeepsIt) {
  // Pending 12:00, found at 12:03:30: 12:00, 12:01 and 12:02 missed, 12:03
  // on time.
  const Firing all = EveryMinute({.misfire = MisfirePolicy::kAll});
  Plan plan = all.Due(all.OccurrenceAt(Utc("2027-01-01T12:00:00Z")),
                      Utc("2027-01-01T12:03:30Z"), {});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now),
              ElementsAre("2027-01-01T12:01:00Z", "2027-01-01T12:02:00Z",
                          "2027-01-01T12:03:00Z"));
  EXPECT_EQ(plan.progress.occurrences, 4u);

  const Firing once = EveryMinute();
  plan = once.Due(once.OccurrenceAt(Utc("2027-01-01T12:00:00Z")),
                  Utc("2027-01-01T12:03:30Z"), {});
  EXPECT_FALSE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now),
              ElementsAre("2027-01-01T12:02:00Z", "2027-01-01T12:03:00Z"));
  EXPECT_EQ(plan.skipped_by_policy, 2u);
  EXPECT_EQ(NextFire(plan), "2027-01-01T12:04:00Z");
}

TEST(FiringTest, TheThresholdSeparatesLateFromMissed) {
  const Firing skip = EveryMinute({.misfire = MisfirePolicy::kSkip});
  const Occurrence due = skip.OccurrenceAt(Utc("2027-01-01T12:00:00Z"));
  // 60 s late: on time.
  Plan plan = skip.Due(due, Utc("2027-01-01T12:01:00Z"), {});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now), ElementsAre("2027-01-01T12:01:00Z"));
  EXPECT_EQ(plan.progress.misses, 0u);
  // 60.001 s late: missed, and skipped; 12:01 is on time.
  plan = skip.Due(due, Utc("2027-01-01T12:01:00.001Z"), {});
  EXPECT_FALSE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now), ElementsAre("2027-01-01T12:01:00Z"));
  EXPECT_EQ(plan.skipped_by_policy, 1u);
  EXPECT_EQ(plan.progress.misses, 1u);
}

TEST(FiringTest, JitterDelaysEachOccurrenceAndWidensOnTime) {
  const Firing firing = EveryMinute({.jitter = absl::Seconds(30)});
  const absl::Time fire = Utc("2027-01-01T12:00:00Z");
  const Occurrence due = firing.OccurrenceAt(fire);
  EXPECT_EQ(due.due, fire + Jitter("report", fire, absl::Seconds(30)));
  EXPECT_GE(due.due, fire);
  EXPECT_LE(due.due, fire + absl::Seconds(30));
  // 80 s after the fire time: late, but within threshold plus jitter.
  const Plan plan = firing.Due(due, fire + absl::Seconds(80), {});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_EQ(plan.skipped_by_policy + plan.skipped_too_old, 0u);
  ASSERT_TRUE(plan.next.has_value());
  EXPECT_EQ(plan.next->due,
            plan.next->fire_time +
                Jitter("report", plan.next->fire_time, absl::Seconds(30)));
}

TEST(FiringTest, TheLimitEndsTheRecurrence) {
  const Firing firing = EveryMinute({.limit = 3});
  Plan plan = firing.Due(firing.OccurrenceAt(Utc("2027-01-01T12:00:00Z")),
                         Utc("2027-01-01T12:00:00Z"), {2, 0, std::nullopt});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_EQ(plan.progress.occurrences, 3u);
  EXPECT_FALSE(plan.next.has_value());

  // Catching up stops at the limit; what it does not fire is no miss.
  const Firing two("r", Cron("* * * * *"),
                   {.limit = 2, .misfire = MisfirePolicy::kAll});
  plan = two.Due(two.OccurrenceAt(Utc("2027-01-01T12:00:00Z")),
                 Utc("2027-01-01T12:03:30Z"), {});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_THAT(FireTimes(plan.fire_now), ElementsAre("2027-01-01T12:01:00Z"));
  EXPECT_EQ(plan.progress, (Progress{2, 0, Utc("2027-01-01T12:01:00Z")}));
  EXPECT_FALSE(plan.next.has_value());
}

TEST(FiringTest, ARuleThatEndsSchedulesNothing) {
  RuleSpec spec;
  spec.cron = "0 * * * *";
  spec.end_at = Utc("2027-01-01T12:00:00Z");
  const Firing firing("r", MakeRule(spec), {});
  EXPECT_EQ(NextFire(firing.Start(Utc("2027-01-01T10:30:00Z"), {})),
            "2027-01-01T11:00:00Z");
  const Plan plan = firing.Due(firing.OccurrenceAt(Utc("2027-01-01T11:00:00Z")),
                               Utc("2027-01-01T11:00:00Z"), {});
  EXPECT_TRUE(plan.deliver_due);
  EXPECT_FALSE(plan.next.has_value());
}

TEST(FiringTest, ADailyRuleInNewYorkFiresAtTheEndOfTheSpringGap) {
  const Firing firing("daily", Cron("30 2 * * *", "America/New_York"), {});
  const Plan plan = firing.Due(firing.OccurrenceAt(Utc("2027-03-13T07:30:00Z")),
                               Utc("2027-03-13T07:30:00.010Z"), {});
  EXPECT_TRUE(plan.deliver_due);
  ASSERT_TRUE(plan.next.has_value());
  EXPECT_EQ(plan.next->id, "daily@2027-03-14T07:00:00Z");
}

TEST(FiringTest, ResumeTreatsThePauseAsAnOutage) {
  const Firing firing = EveryMinute();
  const Plan plan =
      firing.Resume(Utc("2027-01-01T10:00:30Z"), Utc("2027-01-01T10:05:10Z"),
                    {7, 0, Utc("2027-01-01T10:00:00Z")});
  EXPECT_FALSE(plan.deliver_due);
  // 10:01..10:04 missed ("once": 10:04), 10:05 on time.
  EXPECT_THAT(FireTimes(plan.fire_now),
              ElementsAre("2027-01-01T10:04:00Z", "2027-01-01T10:05:00Z"));
  EXPECT_EQ(plan.progress, (Progress{9, 3, Utc("2027-01-01T10:05:00Z")}));
  EXPECT_EQ(NextFire(plan), "2027-01-01T10:06:00Z");
}

TEST(FiringTest, TriggerFiresOnceNowWithoutJitterAndLeavesThePendingOne) {
  const Firing firing = EveryMinute({.jitter = absl::Seconds(30)});
  const Plan plan = firing.Trigger(Utc("2027-01-01T10:00:00.700Z"),
                                   Utc("2027-01-01T10:01:00Z"),
                                   {4, 1, Utc("2027-01-01T09:59:00Z")});
  EXPECT_THAT(plan.fire_now,
              ElementsAre(Occurrence{Utc("2027-01-01T10:00:00Z"),
                                     Utc("2027-01-01T10:00:00Z"),
                                     "report@2027-01-01T10:00:00Z"}));
  EXPECT_EQ(plan.progress, (Progress{5, 1, Utc("2027-01-01T10:00:00Z")}));
  EXPECT_FALSE(plan.next.has_value());
}

TEST(FiringTest, ResumeFiresThePendingFireTimeThePauseCancelled) {
  // Pending 10:01 (due 10:01 plus its jitter), paused before it came due,
  // resumed at 10:01:20: 10:01 is on time, and fires.
  const Firing firing = EveryMinute({.jitter = absl::Seconds(30)});
  const Plan plan =
      firing.Resume(Utc("2027-01-01T10:01:00Z"), Utc("2027-01-01T10:01:20Z"),
                    {5, 0, Utc("2027-01-01T10:00:00Z")});
  EXPECT_THAT(plan.fire_now,
              ElementsAre(Occurrence{Utc("2027-01-01T10:01:00Z"),
                                     Utc("2027-01-01T10:01:20Z"),
                                     "report@2027-01-01T10:01:00Z"}));
  EXPECT_EQ(plan.progress, (Progress{6, 0, Utc("2027-01-01T10:01:00Z")}));
  EXPECT_EQ(NextFire(plan), "2027-01-01T10:02:00Z");
  // Without a pending one (its limit had ended it) nothing is missed.
  const Plan ended = EveryMinute({.limit = 5})
                         .Resume(std::nullopt, Utc("2027-01-01T11:00:00Z"),
                                 {5, 0, std::nullopt});
  EXPECT_THAT(ended.fire_now, IsEmpty());
  EXPECT_FALSE(ended.next.has_value());
}

TEST(FiringTest, ATriggerInTheSecondOfAnOccurrenceIsThatOccurrence) {
  const Firing firing = EveryMinute({.limit = 2});
  // 10:01 pending: a trigger at 10:01:00.3 names it, and adds nothing.
  Plan plan = firing.Trigger(Utc("2027-01-01T10:01:00.300Z"),
                             Utc("2027-01-01T10:01:00Z"), {});
  EXPECT_THAT(plan.fire_now, IsEmpty());
  EXPECT_EQ(plan.progress, Progress());
  // 10:01 fired: the same.
  plan = firing.Trigger(Utc("2027-01-01T10:01:00.300Z"),
                        Utc("2027-01-01T10:02:00Z"),
                        {1, 0, Utc("2027-01-01T10:01:00Z")});
  EXPECT_THAT(plan.fire_now, IsEmpty());
  EXPECT_EQ(plan.progress.occurrences, 1u);
}

TEST(FiringTest, ATriggerPastTheLimitPublishesNothing) {
  const Plan plan = EveryMinute({.limit = 3})
                        .Trigger(Utc("2027-01-01T10:00:30Z"), std::nullopt,
                                 {3, 0, std::nullopt});
  EXPECT_THAT(plan.fire_now, IsEmpty());
  EXPECT_EQ(plan.progress.occurrences, 3u);
}

TEST(FiringTest, WithNoCatchUpEveryMissedTimeIsTooOld) {
  const Firing firing = EveryMinute(
      {.misfire = MisfirePolicy::kAll, .catch_up = absl::ZeroDuration()});
  const Occurrence due = firing.OccurrenceAt(Utc("2027-01-01T12:00:00Z"));
  for (absl::Duration late :
       {absl::Nanoseconds(1), absl::Nanoseconds(2), absl::Milliseconds(1)}) {
    const Plan plan = firing.Due(due, Utc("2027-01-01T12:01:00Z") + late, {});
    EXPECT_FALSE(plan.deliver_due) << late;
    EXPECT_EQ(plan.skipped_too_old, 1u) << late;
    EXPECT_EQ(plan.skipped_by_policy, 0u) << late;
    EXPECT_THAT(FireTimes(plan.fire_now), ElementsAre("2027-01-01T12:01:00Z"));
  }
}

TEST(FiringTest, SkipCountsMissesWithoutWalkingThem) {
  // Every second, down 30 days, catch_up unbounded: 2,591,940 skipped
  // (counted, not walked), the 61 of the last minute on time.
  const Firing firing(
      "tick", EverySecond(),
      {.misfire = MisfirePolicy::kSkip, .catch_up = absl::InfiniteDuration()});
  const absl::Time pending = Utc("2027-01-01T00:00:00Z");
  const Plan plan = firing.Due(firing.OccurrenceAt(pending),
                               pending + absl::Hours(24 * 30), {});
  EXPECT_FALSE(plan.deliver_due);
  EXPECT_EQ(plan.skipped_by_policy, 2'591'940u);
  EXPECT_EQ(plan.skipped_too_old, 0u);
  ASSERT_EQ(plan.fire_now.size(), 61u);
  EXPECT_EQ(Format(plan.fire_now.front().fire_time), "2027-01-30T23:59:00Z");
  EXPECT_EQ(plan.progress,
            (Progress{61, 2'591'940, Utc("2027-01-31T00:00:00Z")}));
}

TEST(FiringTest, ACronRulesMissesAreSplitExactlyBelowTheCountCap) {
  // Every second by cron, down 13 days under skip: the 3,540 fire times of
  // the hour's window before the last minute are skipped by the option;
  // the older ones are too old, counted up to kMaxCountedMisses.
  const Firing firing("tick", Cron("* * * * * *"),
                      {.misfire = MisfirePolicy::kSkip});
  const absl::Time pending = Utc("2027-01-01T00:00:00Z");
  const Plan plan = firing.Due(firing.OccurrenceAt(pending),
                               pending + absl::Hours(24 * 13), {});
  EXPECT_EQ(plan.skipped_by_policy, 3'540u);
  EXPECT_EQ(plan.skipped_too_old, static_cast<uint64_t>(kMaxCountedMisses));
  EXPECT_EQ(plan.fire_now.size(), 61u);
}

TEST(FiringTest, AClockBehindNeverSchedulesAFireTimeAgain) {
  // The last fire was 10:01 on a node whose clock ran ahead; this one says
  // 10:00:50.
  const Firing firing = EveryMinute();
  const Plan plan = firing.Start(Utc("2027-01-01T10:00:50Z"),
                                 {3, 0, Utc("2027-01-01T10:01:00Z")});
  EXPECT_EQ(NextFire(plan), "2027-01-01T10:02:00Z");
}

}  // namespace
}  // namespace hourglass::recurrence
