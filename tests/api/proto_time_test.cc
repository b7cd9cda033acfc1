// The conversions between protobuf's and absl's time types, at the edges of
// what the API accepts (api/validation.h): years 0001 to 9999, durations of
// +-10,000 years, and sub-nanosecond absl values. protobuf's
// util/time_util.h converts through int64 nanoseconds, which reach only
// +-292 years around 1970; these cases are why api/proto_time.cc does not.

#include "api/proto_time.h"

#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace hourglass::api {
namespace {

using google::protobuf::Duration;
using google::protobuf::Timestamp;
using google::protobuf::util::TimeUtil;

Timestamp MakeTimestamp(int64_t seconds, int32_t nanos) {
  Timestamp t;
  t.set_seconds(seconds);
  t.set_nanos(nanos);
  return t;
}

Duration MakeDuration(int64_t seconds, int32_t nanos) {
  Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

TEST(ProtoTimeTest, TimestampsOfEveryValidYearConvertExactly) {
  for (const int64_t seconds :
       {TimeUtil::kTimestampMinSeconds, int64_t{-1}, int64_t{0},
        int64_t{1'900'000'000}, TimeUtil::kTimestampMaxSeconds}) {
    const Timestamp proto = MakeTimestamp(seconds, 999'999'999);
    const absl::Time time = FromProto(proto);
    EXPECT_EQ(time,
              absl::FromUnixSeconds(seconds) + absl::Nanoseconds(999'999'999));
    Timestamp back;
    ToProto(time, &back);
    EXPECT_EQ(back.seconds(), seconds);
    EXPECT_EQ(back.nanos(), 999'999'999);
  }
}

TEST(ProtoTimeTest, TimesAreFlooredToTheNanosecond) {
  Timestamp out;
  // A quarter nanosecond before the epoch.
  ToProto(absl::UnixEpoch() - absl::Nanoseconds(1) / 4, &out);
  EXPECT_EQ(out.seconds(), -1);
  EXPECT_EQ(out.nanos(), 999'999'999);
  ToProto(absl::UnixEpoch() - absl::Milliseconds(500), &out);
  EXPECT_EQ(out.seconds(), -1);
  EXPECT_EQ(out.nanos(), 500'000'000);
}

TEST(ProtoTimeTest, DurationsOfTenThousandYearsConvertExactly) {
  for (const int64_t seconds : {-TimeUtil::kDurationMaxSeconds, int64_t{-1},
                                int64_t{1}, TimeUtil::kDurationMaxSeconds}) {
    const int32_t nanos = seconds < 0 ? -999'999'999 : 999'999'999;
    const absl::Duration d = FromProto(MakeDuration(seconds, nanos));
    EXPECT_EQ(d, absl::Seconds(seconds) + absl::Nanoseconds(nanos));
    Duration back;
    ToProto(d, &back);
    EXPECT_EQ(back.seconds(), seconds);
    EXPECT_EQ(back.nanos(), nanos);
  }
}

TEST(ProtoTimeTest, DurationsKeepOneSignAndTruncateTowardZero) {
  Duration out;
  ToProto(absl::Milliseconds(-1500), &out);
  EXPECT_EQ(out.seconds(), -1);
  EXPECT_EQ(out.nanos(), -500'000'000);
  ToProto(-absl::Nanoseconds(1) / 4, &out);
  EXPECT_EQ(out.seconds(), 0);
  EXPECT_EQ(out.nanos(), 0);
  ToProto(absl::Nanoseconds(7) / 4, &out);
  EXPECT_EQ(out.seconds(), 0);
  EXPECT_EQ(out.nanos(), 1);
}

}  // namespace
}  // namespace hourglass::api
