#ifndef HOURGLASS_CLIENT_INTERNAL_CONVERT_H_
#define HOURGLASS_CLIENT_INTERNAL_CONVERT_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/message.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::client::internal {

// The client's structs and the wire's messages, both ways. Times go through
// protobuf's google/protobuf/util/time_util.h, to the nanosecond: int64
// nanoseconds since the epoch, so times from 1678 to 2261 (the broker takes
// delays up to its --max_delay, 3650 days by default).

google::protobuf::Timestamp ToProto(absl::Time time);
google::protobuf::Duration ToProto(absl::Duration duration);
absl::Time FromProto(const google::protobuf::Timestamp& timestamp);
absl::Duration FromProto(const google::protobuf::Duration& duration);

// Fills `request` with `messages`, moving their strings. Errors:
// INVALID_ARGUMENT `message N: set delay or deliver_at, not both`; nothing
// else is checked here (the broker checks every field).
absl::Status ToRequest(std::vector<Message> messages,
                       hourglass::v1::PublishRequest& request);

Receipt FromProto(const hourglass::v1::Receipt& receipt);
// Moves the delivery's strings out of `delivery`.
Delivery FromProto(hourglass::v1::Delivery&& delivery);

}  // namespace hourglass::client::internal

#endif  // HOURGLASS_CLIENT_INTERNAL_CONVERT_H_
