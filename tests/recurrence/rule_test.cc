// Fixed cases of Rule: exact fire times around DST transitions in zones
// whose rules differ (an hour, half an hour, none), on rare days, and the
// factory's errors. Transition instants are those of `zdump -v` for 2027.

#include "recurrence/rule.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/recurrence/rule_testing.h"

namespace hourglass::recurrence {
namespace {

using ::hourglass::testing::Format;
using ::hourglass::testing::MakeRule;
using ::hourglass::testing::Utc;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

Rule Cron(const std::string& cron, const std::string& zone,
          GapPolicy gap = GapPolicy::kFire,
          OverlapPolicy overlap = OverlapPolicy::kAuto) {
  RuleSpec spec;
  spec.cron = cron;
  spec.time_zone = zone;
  spec.on_gap = gap;
  spec.on_overlap = overlap;
  return MakeRule(spec);
}

// The first `n` fire times after `from`, formatted.
std::vector<std::string> Fires(const Rule& rule, const std::string& from,
                               size_t n) {
  std::vector<std::string> out;
  for (absl::Time t : rule.Preview(Utc(from), n)) out.push_back(Format(t));
  return out;
}

std::string Next(const Rule& rule, const std::string& after) {
  const std::optional<absl::Time> next = rule.NextAfter(Utc(after));
  return next ? Format(*next) : "none";
}

// New York: clocks go from 02:00 EST to 03:00 EDT at 2027-03-14T07:00Z,
// and from 02:00 EDT back to 01:00 EST at 2027-11-07T06:00Z.
constexpr char kNewYork[] = "America/New_York";

TEST(RuleDstTest, NewYorkSkippedTimeFiresAtTheTransition) {
  EXPECT_THAT(Fires(Cron("30 2 * * *", kNewYork), "2027-03-13T00:00:00Z", 3),
              ElementsAre("2027-03-13T07:30:00Z", "2027-03-14T07:00:00Z",
                          "2027-03-15T06:30:00Z"));
  EXPECT_THAT(Fires(Cron("0 2 * * *", kNewYork), "2027-03-13T12:00:00Z", 2),
              ElementsAre("2027-03-14T07:00:00Z", "2027-03-15T06:00:00Z"));
}

TEST(RuleDstTest, NewYorkSkippedTimesFireOnceWithTheTimeAfterTheGap) {
  // 02:15 and 02:45 do not exist; both become 03:00 EDT (07:00Z), once.
  EXPECT_THAT(Fires(Cron("15,45 * * * *", kNewYork), "2027-03-14T06:00:00Z", 4),
              ElementsAre("2027-03-14T06:15:00Z", "2027-03-14T06:45:00Z",
                          "2027-03-14T07:00:00Z", "2027-03-14T07:15:00Z"));
  // 02:00 and 02:30 do not exist, 03:00 does: one fire at 07:00Z.
  EXPECT_THAT(Fires(Cron("*/30 * * * *", kNewYork), "2027-03-14T06:00:00Z", 3),
              ElementsAre("2027-03-14T06:30:00Z", "2027-03-14T07:00:00Z",
                          "2027-03-14T07:30:00Z"));
}

TEST(RuleDstTest, NewYorkSkippedTimesFireNothingUnderSkip) {
  EXPECT_THAT(Fires(Cron("30 2 * * *", kNewYork, GapPolicy::kSkip),
                    "2027-03-13T00:00:00Z", 2),
              ElementsAre("2027-03-13T07:30:00Z", "2027-03-15T06:30:00Z"));
  EXPECT_THAT(Fires(Cron("15,45 * * * *", kNewYork, GapPolicy::kSkip),
                    "2027-03-14T06:00:00Z", 3),
              ElementsAre("2027-03-14T06:15:00Z", "2027-03-14T06:45:00Z",
                          "2027-03-14T07:15:00Z"));
  // 03:00 exists: skipping 02:00 and 02:30 leaves it.
  EXPECT_THAT(Fires(Cron("*/30 * * * *", kNewYork, GapPolicy::kSkip),
                    "2027-03-14T06:00:00Z", 3),
              ElementsAre("2027-03-14T06:30:00Z", "2027-03-14T07:00:00Z",
                          "2027-03-14T07:30:00Z"));
}

TEST(RuleDstTest, NewYorkRepeatedFixedHourFiresOnceAtTheFirstOccurrence) {
  EXPECT_THAT(Fires(Cron("30 1 * * *", kNewYork), "2027-11-06T00:00:00Z", 3),
              ElementsAre("2027-11-06T05:30:00Z", "2027-11-07T05:30:00Z",
                          "2027-11-08T06:30:00Z"));
  // From within the second pass, the next fire is the next day's.
  EXPECT_EQ(Next(Cron("30 1 * * *", kNewYork), "2027-11-07T06:10:00Z"),
            "2027-11-08T06:30:00Z");
  // A minute step under a fixed hour is no interval hour field.
  EXPECT_THAT(Fires(Cron("*/30 1 * * *", kNewYork), "2027-11-07T04:00:00Z", 3),
              ElementsAre("2027-11-07T05:00:00Z", "2027-11-07T05:30:00Z",
                          "2027-11-08T06:00:00Z"));
}

TEST(RuleDstTest, NewYorkRepeatedFixedHourFiresTwiceUnderBoth) {
  const Rule rule =
      Cron("30 1 * * *", kNewYork, GapPolicy::kFire, OverlapPolicy::kBoth);
  EXPECT_THAT(Fires(rule, "2027-11-06T12:00:00Z", 3),
              ElementsAre("2027-11-07T05:30:00Z", "2027-11-07T06:30:00Z",
                          "2027-11-08T06:30:00Z"));
  EXPECT_EQ(Next(rule, "2027-11-07T05:45:00Z"), "2027-11-07T06:30:00Z");
}

TEST(RuleDstTest, NewYorkRepeatedIntervalHourFiresAtBothOccurrences) {
  EXPECT_THAT(Fires(Cron("30 * * * *", kNewYork), "2027-11-07T04:00:00Z", 4),
              ElementsAre("2027-11-07T04:30:00Z", "2027-11-07T05:30:00Z",
                          "2027-11-07T06:30:00Z", "2027-11-07T07:30:00Z"));
  // In instant order, not local order: 01:00 EDT, 01:45 EDT, 01:00 EST...
  EXPECT_THAT(Fires(Cron("0,45 * * * *", kNewYork), "2027-11-07T04:59:59Z", 5),
              ElementsAre("2027-11-07T05:00:00Z", "2027-11-07T05:45:00Z",
                          "2027-11-07T06:00:00Z", "2027-11-07T06:45:00Z",
                          "2027-11-07T07:00:00Z"));
  // From within either pass.
  EXPECT_EQ(Next(Cron("30 * * * *", kNewYork), "2027-11-07T05:45:00Z"),
            "2027-11-07T06:30:00Z");
  EXPECT_EQ(Next(Cron("30 * * * *", kNewYork), "2027-11-07T06:10:00Z"),
            "2027-11-07T06:30:00Z");
  EXPECT_EQ(Next(Cron("0 */2 * * *", kNewYork), "2027-11-07T05:30:00Z"),
            "2027-11-07T07:00:00Z");  // 02:00 EST; 00:00 and 02:00 are unique.
  EXPECT_THAT(Fires(Cron("0 1-3/2 * * *", kNewYork), "2027-11-07T04:00:00Z", 3),
              ElementsAre("2027-11-07T05:00:00Z", "2027-11-07T06:00:00Z",
                          "2027-11-07T08:00:00Z"));
}

TEST(RuleDstTest, NewYorkSecondsFieldAcrossTheOverlap) {
  EXPECT_THAT(Fires(Cron("58 59 1 * * *", kNewYork), "2027-11-07T05:59:00Z", 2),
              ElementsAre("2027-11-07T05:59:58Z", "2027-11-08T06:59:58Z"));
  EXPECT_THAT(
      Fires(Cron("*/30 59 * * * *", kNewYork), "2027-11-07T05:59:00Z", 4),
      ElementsAre("2027-11-07T05:59:30Z", "2027-11-07T06:59:00Z",
                  "2027-11-07T06:59:30Z", "2027-11-07T07:59:00Z"));
}

// London: 01:00 GMT to 02:00 BST at 2027-03-28T01:00Z; 02:00 BST back to
// 01:00 GMT at 2027-10-31T01:00Z.
TEST(RuleDstTest, London) {
  const char* zone = "Europe/London";
  EXPECT_THAT(Fires(Cron("30 1 * * *", zone), "2027-03-27T00:00:00Z", 3),
              ElementsAre("2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z",
                          "2027-03-29T00:30:00Z"));
  EXPECT_THAT(Fires(Cron("30 1 * * *", zone), "2027-10-30T00:00:00Z", 3),
              ElementsAre("2027-10-30T00:30:00Z", "2027-10-31T00:30:00Z",
                          "2027-11-01T01:30:00Z"));
  EXPECT_THAT(Fires(Cron("*/40 * * * *", zone), "2027-10-30T23:30:00Z", 5),
              ElementsAre("2027-10-30T23:40:00Z", "2027-10-31T00:00:00Z",
                          "2027-10-31T00:40:00Z", "2027-10-31T01:00:00Z",
                          "2027-10-31T01:40:00Z"));
}

// Lord Howe moves by half an hour: 02:00 +10:30 to 02:30 +11 at
// 2027-10-02T15:30Z; 02:00 +11 back to 01:30 +10:30 at 2027-04-03T15:00Z.
TEST(RuleDstTest, LordHoweHalfHourShift) {
  const char* zone = "Australia/Lord_Howe";
  EXPECT_THAT(Fires(Cron("15 2 * * *", zone), "2027-10-01T00:00:00Z", 3),
              ElementsAre("2027-10-01T15:45:00Z", "2027-10-02T15:30:00Z",
                          "2027-10-03T15:15:00Z"));
  // 02:00 and 02:15 are skipped, 02:30 exists: all three at 15:30Z.
  EXPECT_THAT(Fires(Cron("*/15 * * * *", zone), "2027-10-02T15:00:00Z", 3),
              ElementsAre("2027-10-02T15:15:00Z", "2027-10-02T15:30:00Z",
                          "2027-10-02T15:45:00Z"));
  EXPECT_THAT(Fires(Cron("15 2 * * *", zone, GapPolicy::kSkip),
                    "2027-10-01T00:00:00Z", 2),
              ElementsAre("2027-10-01T15:45:00Z", "2027-10-03T15:15:00Z"));
  // 01:30 to 01:59 occur twice: at +11 (14:30Z-14:59Z), then at +10:30
  // (15:00Z-15:29Z).
  EXPECT_THAT(Fires(Cron("45 1 * * *", zone), "2027-04-02T00:00:00Z", 3),
              ElementsAre("2027-04-02T14:45:00Z", "2027-04-03T14:45:00Z",
                          "2027-04-04T15:15:00Z"));
  EXPECT_THAT(Fires(Cron("*/20 * * * *", zone), "2027-04-03T13:59:59Z", 5),
              ElementsAre("2027-04-03T14:00:00Z", "2027-04-03T14:20:00Z",
                          "2027-04-03T14:40:00Z", "2027-04-03T15:10:00Z",
                          "2027-04-03T15:30:00Z"));
}

TEST(RuleDstTest, KolkataHasAFixedHalfHourOffset) {
  EXPECT_THAT(
      Fires(Cron("0 9 * * *", "Asia/Kolkata"), "2027-03-13T00:00:00Z", 3),
      ElementsAre("2027-03-13T03:30:00Z", "2027-03-14T03:30:00Z",
                  "2027-03-15T03:30:00Z"));
  EXPECT_THAT(
      Fires(Cron("30 2 * * *", "Asia/Kolkata"), "2027-11-06T00:00:00Z", 2),
      ElementsAre("2027-11-06T21:00:00Z", "2027-11-07T21:00:00Z"));
}

TEST(RuleDaysTest, FebruaryTwentyNinthFiresOnlyInLeapYears) {
  EXPECT_THAT(Fires(Cron("0 0 29 2 *", "UTC"), "2027-01-01T00:00:00Z", 4),
              ElementsAre("2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z",
                          "2036-02-29T00:00:00Z", "2040-02-29T00:00:00Z"));
  EXPECT_THAT(Fires(Cron("0 0 29 2 *", "UTC"), "2096-03-01T00:00:00Z", 1),
              ElementsAre("2104-02-29T00:00:00Z"));
  EXPECT_THAT(Fires(Cron("0 0 29 2 *", kNewYork), "2027-01-01T00:00:00Z", 1),
              ElementsAre("2028-02-29T05:00:00Z"));
}

TEST(RuleDaysTest, DayThirtyOneSkipsShortMonths) {
  EXPECT_THAT(Fires(Cron("0 12 31 * *", "UTC"), "2027-01-01T00:00:00Z", 5),
              ElementsAre("2027-01-31T12:00:00Z", "2027-03-31T12:00:00Z",
                          "2027-05-31T12:00:00Z", "2027-07-31T12:00:00Z",
                          "2027-08-31T12:00:00Z"));
}

TEST(RuleDaysTest, DayOfMonthOrDayOfWeek) {
  // The 1st, or Sundays.
  EXPECT_THAT(Fires(Cron("0 0 1 * SUN", "UTC"), "2027-02-25T00:00:00Z", 3),
              ElementsAre("2027-02-28T00:00:00Z", "2027-03-01T00:00:00Z",
                          "2027-03-07T00:00:00Z"));
}

TEST(RuleDaysTest, ImpossibleDatesNeverFire) {
  EXPECT_EQ(Next(Cron("0 0 30 2 *", "UTC"), "2027-01-01T00:00:00Z"), "none");
  EXPECT_EQ(Next(Cron("0 0 31 4,6,9,11 *", kNewYork), "2027-01-01T00:00:00Z"),
            "none");
  EXPECT_EQ(
      Next(Cron("0 0 30 2 *", kNewYork, GapPolicy::kFire, OverlapPolicy::kBoth),
           "2027-01-01T00:00:00Z"),
      "none");
}

TEST(RuleTimesTest, FireTimesAreWholeSecondsStrictlyAfter) {
  const Rule rule = Cron("30 * * * *", "UTC");
  EXPECT_EQ(Next(rule, "2027-01-01T06:29:59.999Z"), "2027-01-01T06:30:00Z");
  EXPECT_EQ(Next(rule, "2027-01-01T06:30:00Z"), "2027-01-01T07:30:00Z");
  EXPECT_EQ(Next(rule, "2027-01-01T06:30:00.5Z"), "2027-01-01T07:30:00Z");
  EXPECT_EQ(rule.NextAfter(absl::InfinitePast()), Utc("1970-01-01T00:30:00Z"));
  EXPECT_EQ(rule.NextAfter(absl::InfiniteFuture()), std::nullopt);
  EXPECT_EQ(Next(rule, "9999-12-31T23:00:00Z"), "9999-12-31T23:30:00Z");
  EXPECT_EQ(Next(rule, "9999-12-31T23:30:00Z"), "none");
}

TEST(RuleTimesTest, StartIsInclusiveEndExclusive) {
  RuleSpec spec;
  spec.cron = "0 * * * *";
  spec.start_at = Utc("2027-01-01T00:59:59.5Z");  // Rounded up to 01:00.
  spec.end_at = Utc("2027-01-01T03:00:00Z");
  const Rule rule = MakeRule(spec);
  EXPECT_THAT(Fires(rule, "2026-01-01T00:00:00Z", 5),
              ElementsAre("2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z"));
  EXPECT_EQ(rule.NextAfter(absl::InfinitePast()), Utc("2027-01-01T01:00:00Z"));
  EXPECT_EQ(Next(rule, "2027-01-01T02:00:00Z"), "none");
}

TEST(RuleEveryTest, FiresEveryPeriodFromStartInUtc) {
  RuleSpec spec;
  spec.every = absl::Minutes(90);
  spec.time_zone = kNewYork;  // Ignored: UTC durations across the gap.
  spec.start_at = Utc("2027-03-14T05:00:00Z");
  const Rule rule = MakeRule(spec);
  EXPECT_THAT(Fires(rule, "2027-01-01T00:00:00Z", 4),
              ElementsAre("2027-03-14T05:00:00Z", "2027-03-14T06:30:00Z",
                          "2027-03-14T08:00:00Z", "2027-03-14T09:30:00Z"));
  EXPECT_EQ(Next(rule, "2027-03-14T06:30:00Z"), "2027-03-14T08:00:00Z");
  EXPECT_EQ(Next(rule, "2027-03-14T06:29:59.5Z"), "2027-03-14T06:30:00Z");
}

TEST(RuleEveryTest, WithoutStartIsAnchoredAtTheUnixEpoch) {
  RuleSpec spec;
  spec.every = absl::Hours(1);
  spec.end_at = Utc("2027-03-14T10:00:00Z");
  const Rule rule = MakeRule(spec);
  EXPECT_EQ(Next(rule, "2027-03-14T07:10:00Z"), "2027-03-14T08:00:00Z");
  EXPECT_EQ(Next(rule, "2027-03-14T08:59:59Z"), "2027-03-14T09:00:00Z");
  EXPECT_EQ(Next(rule, "2027-03-14T09:00:00Z"), "none");
  EXPECT_EQ(rule.NextAfter(absl::InfinitePast()), absl::UnixEpoch());
}

TEST(RuleEveryTest, LongPeriodsStopAtTheLastFireTime) {
  RuleSpec spec;
  spec.every = absl::Hours(24 * 365 * 4000);
  spec.start_at = Utc("2027-01-01T00:00:00Z");
  const Rule rule = MakeRule(spec);
  EXPECT_EQ(Next(rule, "2027-01-01T00:00:00Z"), "6024-05-06T00:00:00Z");
  EXPECT_EQ(Next(rule, "6024-05-06T00:00:00Z"), "none");
}

TEST(RuleTimesTest, PreviewStopsAtTheEnd) {
  RuleSpec spec;
  spec.every = absl::Seconds(1);
  spec.start_at = Utc("2027-01-01T00:00:00Z");
  spec.end_at = Utc("2027-01-01T00:00:03Z");
  EXPECT_THAT(Fires(MakeRule(spec), "2026-12-31T00:00:00Z", 10),
              ElementsAre("2027-01-01T00:00:00Z", "2027-01-01T00:00:01Z",
                          "2027-01-01T00:00:02Z"));
  EXPECT_THAT(Fires(MakeRule(spec), "2027-01-01T00:00:02Z", 10), IsEmpty());
}

absl::Status CreateError(RuleSpec spec) { return Rule::Create(spec).status(); }

TEST(RuleCreateTest, ErrorsAreInvalidArgumentNamingTheValue) {
  RuleSpec spec;
  spec.cron = "0 0 * * *";
  spec.time_zone = "Mars/Olympus";
  EXPECT_EQ(CreateError(spec),
            absl::InvalidArgumentError("unknown time zone \"Mars/Olympus\""));
  spec.time_zone = "../../etc/passwd";
  EXPECT_EQ(CreateError(spec), absl::InvalidArgumentError(
                                   "unknown time zone \"../../etc/passwd\""));
  spec.time_zone = "localtime";
  EXPECT_EQ(CreateError(spec),
            absl::InvalidArgumentError("unknown time zone \"localtime\""));
  spec.time_zone = "America";
  EXPECT_EQ(CreateError(spec),
            absl::InvalidArgumentError("unknown time zone \"America\""));
  spec.time_zone = "UTC";
  spec.cron = "0 24 * * *";
  EXPECT_EQ(CreateError(spec), absl::InvalidArgumentError(
                                   "cron field 2 (hour): 24 is out of range "
                                   "0-23"));
  spec.every = absl::Seconds(5);
  EXPECT_EQ(
      CreateError(spec),
      absl::InvalidArgumentError("a rule needs exactly one of cron and every"));
  spec.cron.clear();
  spec.every = absl::ZeroDuration();
  EXPECT_EQ(
      CreateError(spec),
      absl::InvalidArgumentError("a rule needs exactly one of cron and every"));
  spec.every = absl::Milliseconds(500);
  EXPECT_EQ(CreateError(spec),
            absl::InvalidArgumentError("every 500ms is shorter than 1s"));
  spec.every = absl::Milliseconds(1500);
  EXPECT_EQ(CreateError(spec),
            absl::InvalidArgumentError("every 1.5s is not a whole number of "
                                       "seconds"));
  spec.every = absl::Seconds(1);
  spec.start_at = Utc("2027-01-01T00:00:00Z");
  spec.end_at = spec.start_at;
  EXPECT_EQ(CreateError(spec),
            absl::InvalidArgumentError(
                "end_at 2027-01-01T00:00:00Z is not after start_at "
                "2027-01-01T00:00:00Z"));
}

TEST(RuleCreateTest, LoadsZonesAndDefaultsToUtc) {
  RuleSpec spec;
  spec.cron = "0 0 * * *";
  EXPECT_EQ(MakeRule(spec).zone(), absl::UTCTimeZone());
  spec.time_zone = kNewYork;
  EXPECT_EQ(MakeRule(spec).zone().name(), kNewYork);
}

TEST(RuleOptionsTest, ParsesTheOptionNames) {
  EXPECT_EQ(ParseGapPolicy("fire").value(), GapPolicy::kFire);
  EXPECT_EQ(ParseGapPolicy("skip").value(), GapPolicy::kSkip);
  EXPECT_EQ(ParseGapPolicy("later").status(),
            absl::InvalidArgumentError(
                "on_gap \"later\": want \"fire\" or \"skip\""));
  EXPECT_EQ(ParseOverlapPolicy("auto").value(), OverlapPolicy::kAuto);
  EXPECT_EQ(ParseOverlapPolicy("both").value(), OverlapPolicy::kBoth);
  EXPECT_EQ(ParseOverlapPolicy("once").status(),
            absl::InvalidArgumentError(
                "on_overlap \"once\": want \"auto\" or \"both\""));
  EXPECT_EQ(ParseEvery("1h30m").value(), absl::Minutes(90));
  EXPECT_EQ(ParseEvery("1s").value(), absl::Seconds(1));
  EXPECT_EQ(ParseEvery("soon").status(),
            absl::InvalidArgumentError("every \"soon\" is not a duration"));
  EXPECT_EQ(ParseEvery("0.5s").status(),
            absl::InvalidArgumentError("every 0.5s is shorter than 1s"));
  EXPECT_EQ(ParseEvery("inf").status(),
            absl::InvalidArgumentError("every inf is not finite"));
  EXPECT_EQ(ParseEvery("1.5s").status(),
            absl::InvalidArgumentError(
                "every 1.5s is not a whole number of seconds"));
}

}  // namespace
}  // namespace hourglass::recurrence
