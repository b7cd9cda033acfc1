#include "api/proto_time.h"

#include <cstdint>

namespace hourglass::api {

absl::Duration FromProto(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) +
         absl::Nanoseconds(duration.nanos());
}

absl::Time FromProto(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

void ToProto(absl::Time time, google::protobuf::Timestamp* out) {
  const int64_t seconds = absl::ToUnixSeconds(time);  // Floors.
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
}

void ToProto(absl::Duration duration, google::protobuf::Duration* out) {
  // Seconds and nanos share the duration's sign, as protobuf requires.
  const int64_t seconds =
      absl::IDivDuration(duration, absl::Seconds(1), &duration);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(duration)));
}

}  // namespace hourglass::api
