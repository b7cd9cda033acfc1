#ifndef HOURGLASS_CLIENT_MESSAGE_H_
#define HOURGLASS_CLIENT_MESSAGE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace hourglass::client {

// The messages of the Broker service as plain structs, so that producers and
// consumers need no generated code. Field meanings and limits are those of
// api/hourglass/v1/broker.proto; the broker checks them (every bad field gets
// INVALID_ARGUMENT naming it).

// One message to deliver later.
struct Message {
  // Required; [A-Za-z0-9._-]{1,200}.
  std::string topic;
  // Opaque bytes, delivered unchanged. At most the broker's
  // --max_payload_bytes (1 MiB).
  std::string payload;
  std::map<std::string, std::string> headers;
  // When it comes due: `delay` after the broker takes it, or at `deliver_at`
  // (a past time means now). At most one of the two; neither means now.
  std::optional<absl::Duration> delay;
  std::optional<absl::Time> deliver_at;
  // Idempotency key, unique within the topic; empty lets the broker assign
  // one ("hg-" and 16 hex digits). Publishing an id that is still pending
  // stores nothing and returns the first receipt with `duplicate` set. A
  // Publisher retries a publish whose outcome is unknown only when every
  // message of it has an id.
  std::string id;
  // Its deadline: `ttl` after the broker takes it, or at `expire_at`. A
  // group that has not received it by then never does: it is dropped there,
  // or with `on_expire` kDeadLetter moved to `<topic>.dlq`. At most one of
  // the two, after the message comes due; neither means no deadline.
  std::optional<absl::Duration> ttl;
  std::optional<absl::Time> expire_at;
  enum class OnExpire { kDrop, kDeadLetter };
  OnExpire on_expire = OnExpire::kDrop;
};

// What the broker answered for one published message.
struct Receipt {
  // The message's id: the producer's, or the one the broker assigned.
  std::string id;
  // When it comes due, on the broker's clock, to the millisecond.
  absl::Time deliver_at;
  // The id was pending already: nothing was stored, and `deliver_at` is the
  // first publish's. After a retry this may be the Publisher's own earlier
  // attempt, whose answer was lost.
  bool duplicate = false;
};

// One delivery of a message to a consumer.
struct Delivery {
  // Acknowledge (or nack) the delivery with this id.
  std::string id;
  std::string topic;
  std::string payload;
  std::map<std::string, std::string> headers;
  // When it came due, and when it was published, on the broker's clock.
  absl::Time deliver_at;
  absl::Time published_at;
  // 1 for the first delivery to the group, then one more each time.
  uint32_t attempt = 0;
  // When this client read it from its stream, on this machine's clock:
  // before any queueing of the consumer's, for measuring lateness.
  absl::Time received_at;
};

}  // namespace hourglass::client

#endif  // HOURGLASS_CLIENT_MESSAGE_H_
