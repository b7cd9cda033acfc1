#include "recurrence/cron.h"

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::recurrence {
namespace {

uint64_t Bits(std::initializer_list<int> values) {
  uint64_t bits = 0;
  for (int v : values) bits |= uint64_t{1} << v;
  return bits;
}

// Bits lo..hi, every `step`.
uint64_t Range(int lo, int hi, int step = 1) {
  uint64_t bits = 0;
  for (int v = lo; v <= hi; v += step) bits |= uint64_t{1} << v;
  return bits;
}

CronSchedule Parse(const std::string& text) {
  absl::StatusOr<CronSchedule> cron = ParseCron(text);
  EXPECT_TRUE(cron.ok()) << text << ": " << cron.status();
  return cron.value_or(CronSchedule{});
}

TEST(ParseCronTest, FiveFieldsAllStarsAllowEveryMinuteAtSecondZero) {
  const CronSchedule cron = Parse("* * * * *");
  EXPECT_EQ(cron.seconds, Bits({0}));
  EXPECT_EQ(cron.minutes, Range(0, 59));
  EXPECT_EQ(cron.hours, Range(0, 23));
  EXPECT_EQ(cron.days_of_month, Range(1, 31));
  EXPECT_EQ(cron.months, Range(1, 12));
  EXPECT_EQ(cron.days_of_week, Range(0, 6));
  EXPECT_TRUE(cron.day_of_month_star);
  EXPECT_TRUE(cron.day_of_week_star);
  EXPECT_TRUE(cron.hour_is_interval);
  EXPECT_FALSE(cron.has_seconds);
}

TEST(ParseCronTest, SixFieldsPutSecondsFirst) {
  const CronSchedule cron = Parse("*/20 5 4 3 2 1");
  EXPECT_TRUE(cron.has_seconds);
  EXPECT_EQ(cron.seconds, Bits({0, 20, 40}));
  EXPECT_EQ(cron.minutes, Bits({5}));
  EXPECT_EQ(cron.hours, Bits({4}));
  EXPECT_EQ(cron.days_of_month, Bits({3}));
  EXPECT_EQ(cron.months, Bits({2}));
  EXPECT_EQ(cron.days_of_week, Bits({1}));
  EXPECT_FALSE(cron.hour_is_interval);
  EXPECT_FALSE(cron.day_of_month_star);
  EXPECT_FALSE(cron.day_of_week_star);
}

TEST(ParseCronTest, ValuesRangesListsAndSteps) {
  const CronSchedule cron = Parse("1,5-7,*/20 1-23/5 3/7 10-12/1 */3");
  EXPECT_EQ(cron.minutes, Bits({0, 1, 5, 6, 7, 20, 40}));
  EXPECT_EQ(cron.hours, Bits({1, 6, 11, 16, 21}));
  EXPECT_EQ(cron.days_of_month, Bits({3, 10, 17, 24, 31}));
  EXPECT_EQ(cron.months, Bits({10, 11, 12}));
  EXPECT_EQ(cron.days_of_week, Bits({0, 3, 6}));
  EXPECT_TRUE(cron.hour_is_interval);  // A step.
  EXPECT_FALSE(cron.day_of_month_star);
  EXPECT_TRUE(cron.day_of_week_star);  // "*/3" starts with '*'.
}

TEST(ParseCronTest, NamesAreCaseInsensitive) {
  const CronSchedule cron = Parse("0 9 * jan,Mar-MAY,dec mon-FRI");
  EXPECT_EQ(cron.months, Bits({1, 3, 4, 5, 12}));
  EXPECT_EQ(cron.days_of_week, Range(1, 5));
  EXPECT_EQ(Parse("0 0 * * SUN,sat").days_of_week, Bits({0, 6}));
  EXPECT_EQ(Parse("0 0 * FEB-APR/2 *").months, Bits({2, 4}));
}

TEST(ParseCronTest, DayOfWeekSevenIsSunday) {
  EXPECT_EQ(Parse("0 0 * * 7").days_of_week, Bits({0}));
  EXPECT_EQ(Parse("0 0 * * 5-7").days_of_week, Bits({5, 6, 0}));
  EXPECT_EQ(Parse("0 0 * * 0-7").days_of_week, Range(0, 6));
}

TEST(ParseCronTest, FixedHoursAreNoInterval) {
  EXPECT_FALSE(Parse("0 1 * * *").hour_is_interval);
  EXPECT_FALSE(Parse("0 1-3 * * *").hour_is_interval);
  EXPECT_FALSE(Parse("0 9,17 * * *").hour_is_interval);
  EXPECT_TRUE(Parse("0 */2 * * *").hour_is_interval);
  EXPECT_TRUE(Parse("0 1-23/2 * * *").hour_is_interval);
  EXPECT_TRUE(Parse("0 1,*/6 * * *").hour_is_interval);
}

TEST(ParseCronTest, MacrosExpandToTheirExpressions) {
  EXPECT_EQ(Parse("@yearly"), Parse("0 0 1 1 *"));
  EXPECT_EQ(Parse("@annually"), Parse("0 0 1 1 *"));
  EXPECT_EQ(Parse("@monthly"), Parse("0 0 1 * *"));
  EXPECT_EQ(Parse("@weekly"), Parse("0 0 * * 0"));
  EXPECT_EQ(Parse("@daily"), Parse("0 0 * * *"));
  EXPECT_EQ(Parse("@midnight"), Parse("0 0 * * *"));
  EXPECT_EQ(Parse("@hourly"), Parse("0 * * * *"));
  EXPECT_EQ(Parse(" @Daily\t"), Parse("0 0 * * *"));
}

TEST(ParseCronTest, SpacesAndTabsSeparateFields) {
  EXPECT_EQ(Parse("  5\t4  *   * *  "), Parse("5 4 * * *"));
}

TEST(ParseCronTest, LeadingZerosAreDecimal) {
  EXPECT_EQ(Parse("08 09 * * *").minutes, Bits({8}));
}

// Every error message, exactly.
struct ErrorCase {
  std::string text;
  std::string message;
};

class ParseCronErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ParseCronErrorTest, IsInvalidArgumentNamingFieldAndValue) {
  const absl::StatusOr<CronSchedule> cron = ParseCron(GetParam().text);
  EXPECT_EQ(cron.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cron.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Messages, ParseCronErrorTest,
    ::testing::Values(
        ErrorCase{"0 24 * * *", "cron field 2 (hour): 24 is out of range 0-23"},
        ErrorCase{"60 * * * *",
                  "cron field 1 (minute): 60 is out of range 0-59"},
        ErrorCase{"60 * * * * *",
                  "cron field 1 (second): 60 is out of range 0-59"},
        ErrorCase{"0 0 0 * *",
                  "cron field 3 (day of month): 0 is out of range 1-31"},
        ErrorCase{"0 0 32 * *",
                  "cron field 3 (day of month): 32 is out of range 1-31"},
        ErrorCase{"0 0 * 13 *",
                  "cron field 4 (month): 13 is out of range 1-12"},
        ErrorCase{"0 0 * * 8",
                  "cron field 5 (day of week): 8 is out of range 0-7"},
        ErrorCase{"0 0 0 0 * *",
                  "cron field 4 (day of month): 0 is out of range 1-31"},
        ErrorCase{"0 1234567890 * * *",
                  "cron field 2 (hour): 1234567890 is out of range 0-23"},
        ErrorCase{"*/99999999999 * * * *",
                  "cron field 1 (minute): step 99999999999 is out of range "
                  "1-59"},
        ErrorCase{"x * * * *", "cron field 1 (minute): \"x\" is not a number"},
        ErrorCase{"-1 * * * *", "cron field 1 (minute): \"\" is not a number"},
        ErrorCase{"0 MON * * *",
                  "cron field 2 (hour): \"MON\" is not a number"},
        ErrorCase{"0 0 * FOO *",
                  "cron field 4 (month): \"FOO\" is not a number or a month "
                  "name"},
        ErrorCase{"0 0 * * MONDAY",
                  "cron field 5 (day of week): \"MONDAY\" is not a number or a "
                  "day name"},
        ErrorCase{"0 0 * * 5-1",
                  "cron field 5 (day of week): range 5-1 has its start after "
                  "its end"},
        ErrorCase{"0 0 * * FRI-MON",
                  "cron field 5 (day of week): range FRI-MON has its start "
                  "after its end"},
        ErrorCase{"*/0 * * * *",
                  "cron field 1 (minute): step 0 is out of range 1-59"},
        ErrorCase{"*/60 * * * *",
                  "cron field 1 (minute): step 60 is out of range 1-59"},
        ErrorCase{"0 */x * * *",
                  "cron field 2 (hour): step \"x\" is not a number"},
        ErrorCase{"0 */ * * *",
                  "cron field 2 (hour): step \"\" is not a number"},
        ErrorCase{"1,,2 * * * *",
                  "cron field 1 (minute): empty item in \"1,,2\""},
        ErrorCase{"1, * * * *", "cron field 1 (minute): empty item in \"1,\""},
        ErrorCase{"0 0 L * *",
                  "cron field 3 (day of month): \"L\" is not a number"},
        ErrorCase{"0 0 ? * *",
                  "cron field 3 (day of month): \"?\" is not a number"},
        ErrorCase{"1-2-3 * * * *",
                  "cron field 1 (minute): \"2-3\" is not a number"},
        ErrorCase{"\xff * * * *",
                  "cron field 1 (minute): \"\\xff\" is not a number"},
        ErrorCase{"1 2 3",
                  "cron expression \"1 2 3\" has 3 fields; want 5, or 6 "
                  "with seconds first"},
        ErrorCase{"1 2 3 4 5 6 7",
                  "cron expression \"1 2 3 4 5 6 7\" has 7 fields; want 5, or "
                  "6 with seconds first"},
        ErrorCase{"", "cron expression is empty"},
        ErrorCase{" \t ", "cron expression is empty"},
        ErrorCase{"@reboot", "unknown cron macro \"@reboot\""},
        ErrorCase{"@daily 5", "unknown cron macro \"@daily 5\""},
        ErrorCase{std::string(257, '*'),
                  "cron expression is 257 bytes long; the limit is 256"}),
    // Named by position: the expressions hold spaces and stars.
    [](const ::testing::TestParamInfo<ErrorCase>& info) {
      return absl::StrCat("case_", info.index);
    });

TEST(ParseCronTest, AcceptsTheLongestExpression) {
  const std::string text = std::string(kMaxCronLength - 9, ' ') + "0 0 1 * *";
  ASSERT_EQ(text.size(), kMaxCronLength);
  EXPECT_EQ(ParseCron(text).value_or(CronSchedule{}), Parse("0 0 1 * *"));
}

TEST(DayMatchesTest, BothDayFieldsRestrictedMatchEither) {
  // The 13th, or any Friday.
  const CronSchedule cron = Parse("0 0 13 * FRI");
  EXPECT_TRUE(DayMatches(cron, absl::CivilDay(2027, 1, 13)));   // Wednesday.
  EXPECT_TRUE(DayMatches(cron, absl::CivilDay(2027, 1, 15)));   // Friday.
  EXPECT_FALSE(DayMatches(cron, absl::CivilDay(2027, 1, 14)));  // Thursday.
}

TEST(DayMatchesTest, AStarredDayFieldMakesBothRequired) {
  // Vixie cron: "*/2" starts with '*', so odd days that are Fridays.
  const CronSchedule cron = Parse("0 0 */2 * FRI");
  EXPECT_TRUE(DayMatches(cron, absl::CivilDay(2027, 1, 1)));   // Fri, 1st.
  EXPECT_FALSE(DayMatches(cron, absl::CivilDay(2027, 1, 8)));  // Fri, 8th.
  EXPECT_FALSE(DayMatches(cron, absl::CivilDay(2027, 1, 3)));  // Sun, 3rd.
  const CronSchedule weekdays = Parse("0 0 * * MON-FRI");
  EXPECT_TRUE(DayMatches(weekdays, absl::CivilDay(2027, 1, 4)));   // Mon.
  EXPECT_FALSE(DayMatches(weekdays, absl::CivilDay(2027, 1, 3)));  // Sun.
  const CronSchedule first = Parse("0 0 1 * *");
  EXPECT_TRUE(DayMatches(first, absl::CivilDay(2027, 2, 1)));
  EXPECT_FALSE(DayMatches(first, absl::CivilDay(2027, 2, 2)));
}

TEST(CanMatchTest, FalseOnlyForDaysNoAllowedMonthHas) {
  EXPECT_FALSE(CanMatch(Parse("0 0 30 2 *")));
  EXPECT_FALSE(CanMatch(Parse("0 0 31 4,6,9,11 *")));
  EXPECT_FALSE(CanMatch(Parse("0 0 30-31 FEB */2")));  // Both required.
  EXPECT_TRUE(CanMatch(Parse("0 0 29 2 *")));
  EXPECT_TRUE(CanMatch(Parse("0 0 30 2 MON")));  // Either: Mondays in Feb.
  EXPECT_TRUE(CanMatch(Parse("0 0 31 * *")));
}

TEST(NextMatchTest, WalksToTheNextMatchingCivilSecond) {
  const absl::CivilSecond far(9999, 12, 31, 23, 59, 59);
  EXPECT_EQ(NextMatch(Parse("*/15 * * * *"),
                      absl::CivilSecond(2027, 1, 1, 10, 1, 0), far),
            absl::CivilSecond(2027, 1, 1, 10, 15, 0));
  EXPECT_EQ(NextMatch(Parse("0 0 29 2 *"), absl::CivilSecond(2027, 3, 1), far),
            absl::CivilSecond(2028, 2, 29));
  EXPECT_EQ(NextMatch(Parse("0 0 29 2 *"), absl::CivilSecond(2096, 3, 1), far),
            absl::CivilSecond(2104, 2, 29));  // 2100 is no leap year.
  EXPECT_EQ(NextMatch(Parse("0 0 31 * *"), absl::CivilSecond(2027, 4, 1), far),
            absl::CivilSecond(2027, 5, 31));
  EXPECT_EQ(
      NextMatch(Parse("59 59 23 31 12 *"), absl::CivilSecond(2027, 1, 1), far),
      absl::CivilSecond(2027, 12, 31, 23, 59, 59));
  // `from` itself, when it matches.
  EXPECT_EQ(NextMatch(Parse("30 9 * * *"),
                      absl::CivilSecond(2027, 1, 1, 9, 30, 0), far),
            absl::CivilSecond(2027, 1, 1, 9, 30, 0));
  // The next Friday the 13th... or any 13th or Friday: the 13th first.
  EXPECT_EQ(
      NextMatch(Parse("0 0 13 * FRI"), absl::CivilSecond(2027, 1, 9), far),
      absl::CivilSecond(2027, 1, 13));
}

TEST(NextMatchTest, StopsAtLast) {
  EXPECT_EQ(NextMatch(Parse("0 0 29 2 *"), absl::CivilSecond(2027, 3, 1),
                      absl::CivilSecond(2028, 2, 28, 23, 59, 59)),
            std::nullopt);
  EXPECT_EQ(NextMatch(Parse("0 12 * * *"), absl::CivilSecond(2027, 3, 1),
                      absl::CivilSecond(2027, 3, 1, 11, 59, 59)),
            std::nullopt);
  EXPECT_EQ(NextMatch(Parse("0 12 * * *"), absl::CivilSecond(2027, 3, 1),
                      absl::CivilSecond(2027, 3, 1, 12, 0, 0)),
            absl::CivilSecond(2027, 3, 1, 12, 0, 0));
  EXPECT_EQ(NextMatch(Parse("0 0 30 2 *"), absl::CivilSecond(2027, 1, 1),
                      absl::CivilSecond(9999, 1, 1)),
            std::nullopt);
}

}  // namespace
}  // namespace hourglass::recurrence
