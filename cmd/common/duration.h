#ifndef HOURGLASS_CMD_COMMON_DURATION_H_
#define HOURGLASS_CMD_COMMON_DURATION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace hourglass::cli {

// Parses a non-negative duration written as one or more <number><unit>
// parts, e.g. "500ms", "30s", "15m", "2h", "3d", "1h30m", "1.5h": the syntax
// of absl::ParseDuration (which reads it) without a sign or "inf", plus the
// unit d (24 h). Units: ns, us, ms, s, m, h, d. "0" alone means zero.
//
// Errors: INVALID_ARGUMENT `"5x" is not a duration (use e.g. 500ms, 30s, 15m,
// 2h, 3d)`; the caller prefixes the flag's name.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// Parses a point in time: RFC 3339 ("2026-01-02T15:04:05Z",
// "2026-01-02T16:04:05.250+01:00"), "now", or a duration relative to `now`
// with a sign ("+30m", "-2h").
//
// Errors: INVALID_ARGUMENT `"x" is not a time (use RFC 3339, e.g.
// 2026-01-02T15:04:05Z, or now, +30m, -2h)`.
absl::StatusOr<absl::Time> ParseTime(absl::string_view text, absl::Time now);

// RFC 3339 in UTC with milliseconds: "2026-01-02T15:04:05.250Z". The broker
// keeps times to the millisecond.
std::string Rfc3339(absl::Time time);

// A short human duration: "0", "250us", "59.843ms", "1.5s", "2h30m",
// "3d4h". Truncated to the microsecond from 1 ms, to the millisecond from
// 1 s.
std::string HumanDuration(absl::Duration duration);

// Conversions to and from protobuf's time types, to the nanosecond (times
// floored): Timestamps as seconds and nanos, for every year they hold;
// Durations through int64 nanoseconds (google/protobuf/util/time_util.h),
// so up to 292 years either way.
google::protobuf::Duration ToProto(absl::Duration duration);
google::protobuf::Timestamp ToProto(absl::Time time);
absl::Duration FromProto(const google::protobuf::Duration& duration);
absl::Time FromProto(const google::protobuf::Timestamp& timestamp);

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_COMMON_DURATION_H_
