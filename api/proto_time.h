#ifndef HOURGLASS_API_PROTO_TIME_H_
#define HOURGLASS_API_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace hourglass::api {

// Conversions between protobuf's well-known time types and absl's, for the
// edges of the API. The From* functions take values ValidateDuration and
// ValidateTimestamp (api/validation.h) accepted.
absl::Duration FromProto(const google::protobuf::Duration& duration);
absl::Time FromProto(const google::protobuf::Timestamp& timestamp);

// Writes `time`, or `duration`, to the nanosecond (floored for times).
void ToProto(absl::Time time, google::protobuf::Timestamp* out);
void ToProto(absl::Duration duration, google::protobuf::Duration* out);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_PROTO_TIME_H_
