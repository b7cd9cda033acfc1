// The hourglass CLI's duration and time parsing and formatting.

#include "cmd/common/duration.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::cli {
namespace {

absl::Time Utc(int y, int mo, int d, int h, int mi, int s) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s),
                         absl::UTCTimeZone());
}

TEST(ParseDurationTest, ReadsEachUnit) {
  EXPECT_EQ(*ParseDuration("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseDuration("15m"), absl::Minutes(15));
  EXPECT_EQ(*ParseDuration("2h"), absl::Hours(2));
  EXPECT_EQ(*ParseDuration("3d"), absl::Hours(72));
  EXPECT_EQ(*ParseDuration("250us"), absl::Microseconds(250));
  EXPECT_EQ(*ParseDuration("7ns"), absl::Nanoseconds(7));
  EXPECT_EQ(*ParseDuration("0"), absl::ZeroDuration());
  EXPECT_EQ(*ParseDuration("0s"), absl::ZeroDuration());
}

TEST(ParseDurationTest, AddsCombinedParts) {
  EXPECT_EQ(*ParseDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("1d2h3m4s5ms"), absl::Hours(26) + absl::Minutes(3) +
                                               absl::Seconds(4) +
                                               absl::Milliseconds(5));
  EXPECT_EQ(*ParseDuration("3650d"), absl::Hours(24 * 3650));
}

TEST(ParseDurationTest, ReadsFractions) {
  EXPECT_EQ(*ParseDuration("1.5h"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("0.25s"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDuration(".5d"), absl::Hours(12));
  EXPECT_EQ(*ParseDuration("1.000000001s"),
            absl::Seconds(1) + absl::Nanoseconds(1));
}

TEST(ParseDurationTest, RefusesWhatIsNotADuration) {
  for (const char* text :
       {"", "5x", "5", "h", "-5s", "+5s", "1.h", "1h 30m", " 1h", "1H", "1e3s",
        "99999999999999999999s", "1.5.5s", "ms"}) {
    const absl::StatusOr<absl::Duration> parsed = ParseDuration(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << text;
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("\"", text,
                           "\" is not a duration (use e.g. 500ms, 30s, 15m, "
                           "2h, 3d)"));
  }
}

TEST(ParseTimeTest, ReadsRfc3339) {
  const absl::Time now = Utc(2020, 1, 1, 0, 0, 0);
  EXPECT_EQ(*ParseTime("2026-01-02T15:04:05Z", now), Utc(2026, 1, 2, 15, 4, 5));
  EXPECT_EQ(*ParseTime("2026-01-02T16:04:05.250+01:00", now),
            Utc(2026, 1, 2, 15, 4, 5) + absl::Milliseconds(250));
}

TEST(ParseTimeTest, ReadsNowAndOffsetsFromIt) {
  const absl::Time now = Utc(2026, 3, 4, 5, 6, 7);
  EXPECT_EQ(*ParseTime("now", now), now);
  EXPECT_EQ(*ParseTime("+30m", now), now + absl::Minutes(30));
  EXPECT_EQ(*ParseTime("-2h", now), now - absl::Hours(2));
  EXPECT_EQ(*ParseTime("+1d12h", now), now + absl::Hours(36));
}

TEST(ParseTimeTest, RefusesWhatIsNotATime) {
  for (const char* text : {"", "yesterday", "2026-01-02", "2026-01-02T15:04:05",
                           "+5x", "-", "+", "2026-13-02T15:04:05Z"}) {
    const absl::StatusOr<absl::Time> parsed = ParseTime(text, absl::Now());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << text;
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("\"", text,
                           "\" is not a time (use RFC 3339, e.g. "
                           "2026-01-02T15:04:05Z, or now, +30m, -2h)"));
  }
}

TEST(Rfc3339Test, PrintsUtcToTheMillisecond) {
  EXPECT_EQ(Rfc3339(Utc(2026, 1, 2, 15, 4, 5)), "2026-01-02T15:04:05.000Z");
  EXPECT_EQ(Rfc3339(Utc(2026, 1, 2, 15, 4, 5) + absl::Microseconds(250999)),
            "2026-01-02T15:04:05.250Z");
  EXPECT_EQ(Rfc3339(absl::UnixEpoch()), "1970-01-01T00:00:00.000Z");
}

TEST(HumanDurationTest, PrintsShortly) {
  EXPECT_EQ(HumanDuration(absl::ZeroDuration()), "0");
  EXPECT_EQ(HumanDuration(absl::Microseconds(250)), "250us");
  EXPECT_EQ(HumanDuration(absl::Nanoseconds(59843345)), "59.843ms");
  EXPECT_EQ(HumanDuration(absl::Milliseconds(1500)), "1.5s");
  EXPECT_EQ(HumanDuration(absl::Seconds(10)), "10s");
  EXPECT_EQ(HumanDuration(absl::Minutes(150)), "2h30m");
  EXPECT_EQ(HumanDuration(absl::Hours(72)), "3d");
  EXPECT_EQ(HumanDuration(absl::Hours(76) + absl::Nanoseconds(1)), "3d4h");
  EXPECT_EQ(HumanDuration(-absl::Seconds(2)), "-2s");
}

TEST(ProtoTimeTest, RoundTrips) {
  const absl::Time time = Utc(2026, 1, 2, 15, 4, 5) + absl::Nanoseconds(7);
  const google::protobuf::Timestamp timestamp = ToProto(time);
  EXPECT_EQ(timestamp.seconds(), absl::ToUnixSeconds(time));
  EXPECT_EQ(timestamp.nanos(), 7);
  EXPECT_EQ(FromProto(timestamp), time);

  // Before the epoch, nanos stay non-negative as protobuf requires.
  const absl::Time early = absl::UnixEpoch() - absl::Milliseconds(1);
  EXPECT_EQ(ToProto(early).seconds(), -1);
  EXPECT_EQ(ToProto(early).nanos(), 999'000'000);
  EXPECT_EQ(FromProto(ToProto(early)), early);

  // Past 2262, where int64 nanoseconds since the epoch end: a recurrence's
  // fire times go up to 9999.
  const absl::Time late = Utc(9999, 12, 31, 23, 59, 59) + absl::Nanoseconds(3);
  EXPECT_EQ(ToProto(late).seconds(), 253402300799);
  EXPECT_EQ(ToProto(late).nanos(), 3);
  EXPECT_EQ(FromProto(ToProto(late)), late);

  const absl::Duration duration = absl::Seconds(90) + absl::Nanoseconds(5);
  EXPECT_EQ(ToProto(duration).seconds(), 90);
  EXPECT_EQ(ToProto(duration).nanos(), 5);
  EXPECT_EQ(FromProto(ToProto(duration)), duration);
}

}  // namespace
}  // namespace hourglass::cli
