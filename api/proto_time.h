#ifndef HOURGLASS_API_PROTO_TIME_H_
#define HOURGLASS_API_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace hourglass::api {

// Conversions between protobuf's well-known time types and absl's, for the
// edges of the API. The From* functions take values ValidateDuration and
// ValidateTimestamp (api/validation.h) accepted.
//
// Not protobuf's util/time_util.h: its conversions go through int64
// nanoseconds, which cover 1678 to 2262 and durations of +-292 years,
// while the API accepts years 0001 to 9999, durations of +-10,000 years,
// and deliver_at as far ahead as --max_delay says; absl's types hold them
// all (tests/api/proto_time_test.cc).
absl::Duration FromProto(const google::protobuf::Duration& duration);
absl::Time FromProto(const google::protobuf::Timestamp& timestamp);

// Writes `time`, or `duration`, to the nanosecond (floored for times).
void ToProto(absl::Time time, google::protobuf::Timestamp* out);
void ToProto(absl::Duration duration, google::protobuf::Duration* out);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_PROTO_TIME_H_
