#ifndef HOURGLASS_API_VALIDATION_H_
#define HOURGLASS_API_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "broker/views.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "hourglass/v1/admin.pb.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::api {

// Limits on what clients may send; each is an hourglassd flag.
struct Limits {
  // --snapshot_dir, an absolute path: CreateSnapshot writes a new directory
  // in it, which the request names (a plain name, never a path). Empty: no
  // snapshots (FAILED_PRECONDITION).
  std::string snapshot_dir;
  // --max_payload_bytes. Default: 1 MiB.
  size_t max_payload_bytes = size_t{1} << 20;
  // --max_delay: how far ahead a message may be due. Default: 3650 days.
  absl::Duration max_delay = absl::Hours(24 * 3650);
  // --max_batch: messages per Publish. Default: 10,000.
  size_t max_batch = 10'000;
  // Longest message id, in bytes: an idempotency key in Publish, and any
  // id a request names (Cancel, Ack, Nack, Admin calls).
  size_t max_id_bytes = 128;
  // --max_headers: most headers of one message. Default: 64.
  size_t max_headers = 64;
  // --max_header_bytes: most bytes of one message's header keys and values
  // together. Default: 64 KiB.
  size_t max_header_bytes = size_t{64} << 10;
  // --max_ack_timeout: the longest ack_timeout a stream may ask for.
  // Default: 24 h.
  absl::Duration max_ack_timeout = absl::Hours(24);
  // --max_credit: the largest max_in_flight a stream may ask for, and the
  // most ids one Ack may carry (a stream never holds more deliveries).
  // Default: 10,000.
  uint32_t max_credit = 10'000;
  // --max_streams: most streams (Subscribe, SubscribeBatches and
  // PublishStream) open at once; the next one ends with
  // RESOURCE_EXHAUSTED. 0 means no limit. Default: 10,000.
  size_t max_streams = 10'000;
  // --max_publish_queue_bytes: most bytes of Publish requests accepted but
  // not yet answered (waiting for or being written to disk); a Publish that
  // would pass it gets RESOURCE_EXHAUSTED. 0 means no limit. Default:
  // 256 MiB.
  size_t max_publish_queue_bytes = size_t{256} << 20;
};

// Longest topic or group name, in bytes.
inline constexpr size_t kMaxNameBytes = 200;
// Longest name of a topic that producers create, in bytes: room is left
// for the ".dlq" of its dead-letter topic.
inline constexpr size_t kMaxTopicBytes = kMaxNameBytes - 4;

// OK if `name` is a valid topic or group name ([A-Za-z0-9._-], 1 to 200
// bytes); else INVALID_ARGUMENT naming `field` and the value, e.g.
// `topic "a b" has a space`. Also for header keys.
absl::Status ValidateName(std::string_view field, std::string_view name);

// ValidateName, for a topic that a request may create (Publish, a
// Subscribe's open): also at most kMaxTopicBytes long, unless it is a
// dead-letter topic (ends in ".dlq"), so that every topic's dead letters
// have a valid name.
absl::Status ValidateNewTopic(std::string_view field, std::string_view name);

// OK if `id` names a message: 1 to limits.max_id_bytes bytes. Else
// INVALID_ARGUMENT naming `field`: `id is empty`, `id "..." is 300 bytes
// long; the limit is 128`.
absl::Status ValidateId(std::string_view field, std::string_view id,
                        const Limits& limits);

// OK if `duration` is a valid google.protobuf.Duration (seconds within
// +-10,000 years, nanos within +-999,999,999 and of the same sign).
absl::Status ValidateDuration(std::string_view field,
                              const google::protobuf::Duration& duration);

// OK if `timestamp` is a valid google.protobuf.Timestamp (years 1 to 9999,
// nanos in [0, 999,999,999]).
absl::Status ValidateTimestamp(std::string_view field,
                               const google::protobuf::Timestamp& timestamp);

// A delay: a valid Duration, not negative, at most limits.max_delay.
absl::Status ValidateDelay(const google::protobuf::Duration& delay,
                           const Limits& limits);
// A deliver_at: a valid Timestamp at most limits.max_delay after `now` (a
// past one means now).
absl::Status ValidateDeliverAt(const google::protobuf::Timestamp& deliver_at,
                               const Limits& limits, absl::Time now);

// A message's deadline, received at `now`: `on_expire` a known value; at
// most one of `expire_at` and `ttl`; a ttl a valid Duration of at most
// limits.max_delay; an expire_at a valid Timestamp at most limits.max_delay
// after `now`; and the deadline (ExpireAt) after the message's due time
// (DeliverAt): a ttl longer than the delay. INVALID_ARGUMENT naming the
// field and the values otherwise, e.g. `ttl 5s is not longer than the
// message's delay 10s: it would expire before it comes due`. REQUIRES: the
// message's delay or deliver_at is valid (ValidateDelay, ValidateDeliverAt).
absl::Status ValidateDeadline(const hourglass::v1::Message& message,
                              const Limits& limits, absl::Time now);

// Checks a whole Publish before anything is stored: an empty request, more
// than limits.max_batch messages, and for each message its topic
// (ValidateNewTopic), payload size, id (length; not of the form the broker
// assigns, see storage::IsAssignedIdForm), headers (at most
// limits.max_headers, of limits.max_header_bytes in all, each key a valid
// name), delay (negative or over max_delay), deliver_at (more than
// max_delay after `now`) and deadline (ValidateDeadline). Returns the first
// problem as INVALID_ARGUMENT, prefixed with the message index:
// `message 3: ...`; of several bad headers, the one with the least key.
absl::Status ValidatePublish(const hourglass::v1::PublishRequest& request,
                             const Limits& limits, absl::Time now);

// Checks the `open` of a Subscribe stream: topic (ValidateNewTopic) and
// group names, an ack_timeout that is a valid, non-negative Duration of at
// most limits.max_ack_timeout, and max_in_flight within limits.max_credit.
// Returns INVALID_ARGUMENT naming the field.
absl::Status ValidateOpen(const hourglass::v1::Open& open,
                          const Limits& limits);

// Checks an `ack`: at most limits.max_credit ids, each a valid id
// (ValidateId). INVALID_ARGUMENT naming the field: `ack.ids[2] is empty`.
absl::Status ValidateAck(const hourglass::v1::Ack& ack, const Limits& limits);

// Checks a `nack`: a valid id and a delay that is a valid, non-negative
// Duration of at most limits.max_delay (unset means none).
absl::Status ValidateNack(const hourglass::v1::Nack& nack,
                          const Limits& limits);

// Most buckets one GetSchedule answers with: a year of hours (8,784 in a
// leap year) fits.
inline constexpr size_t kMaxScheduleBuckets = 10'000;
// Most schedule counters one GetSchedule reads
// (storage::ScheduleCountReads): a bucket of whole days (hours) aligned to
// days (hours) reads one per day (hour), others read minutes too.
inline constexpr uint64_t kMaxScheduleReads = 100'000;

// Checks a GetSchedule and turns it into the broker's query (admin.proto
// says how buckets are placed): the topic name, `from`, `to` and `bucket`
// set and valid, `from` not before 1970, `to` after `from`, `bucket` a
// positive whole number of minutes, at most kMaxScheduleBuckets buckets
// reading at most kMaxScheduleReads counters. INVALID_ARGUMENT naming the
// field and the value otherwise.
absl::StatusOr<broker::ScheduleQuery> ValidateGetSchedule(
    const hourglass::v1::GetScheduleRequest& request);

// When `message` comes due, received at `now`: now + delay, the given
// deliver_at (a past one means now), or now if neither is set. Truncated
// to whole milliseconds. REQUIRES: ValidatePublish accepted the message.
absl::Time DeliverAt(const hourglass::v1::Message& message, absl::Time now);

// When `message`, received at `now`, expires: now + ttl, or expire_at, or
// InfiniteFuture if it has no deadline. Truncated to whole milliseconds.
// REQUIRES: ValidatePublish accepted the message.
absl::Time ExpireAt(const hourglass::v1::Message& message, absl::Time now);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_VALIDATION_H_
