#ifndef HOURGLASS_BROKER_BROKER_H_
#define HOURGLASS_BROKER_BROKER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "broker/consumer.h"
#include "broker/views.h"

namespace hourglass::broker {

// A message to publish, already validated (api/validation.h).
struct NewMessage {
  std::string topic;
  std::string id;  // Idempotency key; empty: the broker assigns one.
  std::string payload;
  std::map<std::string, std::string> headers;
  // Whole milliseconds. A time in the past (by the broker's clock) becomes
  // now; the receipt says when the message is due.
  absl::Time deliver_at;
  // For dead letters: storage::MessageRecord's dead_letter_* fields.
  uint32_t dead_letter_attempts = 0;
  std::string dead_letter_group;
  // The message's deadline (whole milliseconds): from then on it is not
  // delivered to a group, nor redelivered; it leaves the group, dropped or,
  // with `dead_letter_on_expire`, published to `<topic>.dlq`, and counted
  // (hourglass_expired_total). InfiniteFuture: none.
  absl::Time expire_at = absl::InfiniteFuture();
  bool dead_letter_on_expire = false;
};

struct PublishReceipt {
  std::string id;
  absl::Time deliver_at;
  bool duplicate = false;

  friend bool operator==(const PublishReceipt&,
                         const PublishReceipt&) = default;
};

// What Broker::CreateSnapshot wrote.
struct SnapshotInfo {
  std::string dir;
  uint64_t files = 0;
  uint64_t bytes = 0;
  // Of the store copied: a snapshot opens as this store did.
  uint32_t format_version = 0;
  std::string store_id;
  absl::Time started_at;  // Every write that completed before it is in.
  absl::Duration took;
  // 0 for a snapshot of one store (a single node's, a cluster of one
  // shard's); for a cluster snapshot (node/cluster_snapshot.h), its shards,
  // and store_id is empty (each shard is a store of its own).
  int shards = 0;
};

// What the broker says of itself.
struct BrokerInfo {
  uint32_t format_version = 0;  // Of its store (storage/README.md).
  std::string store_id;
  // OK while the store takes writes; otherwise the failure that made it
  // refuse them (StoreHealth).
  absl::Status store_health;
};

// The broker as its clients see it: the one interface the gRPC services in
// api/ call. Requests arrive validated (api/validation.h); answers go to
// callbacks, so that no caller's thread waits on the store: writes are
// answered when durable, and reads (the admin queries) run on a thread of
// the broker's own.
//
// Callbacks run on one of the broker's threads (or at once on the caller's,
// for an answer known without I/O), must not block, and may outlive
// nothing but the broker. Each runs exactly once.
//
// Thread-safe. Engine (engine.h) is the implementation.
class Broker {
 public:
  template <typename T>
  using Callback = absl::AnyInvocable<void(T) &&>;

  virtual ~Broker() = default;

  // ---- Producers.

  // Stores every message durably, or none. `done` gets one receipt per
  // message in order: an id already pending in the topic (or earlier in the
  // batch) gets the first message's receipt with `duplicate` set, and
  // nothing new is stored for it. ABORTED if a publish with one of the ids
  // is still in progress (retry); RESOURCE_EXHAUSTED when the disk is full;
  // UNAVAILABLE when the store failed.
  virtual void Publish(
      std::vector<NewMessage> messages,
      Callback<absl::StatusOr<std::vector<PublishReceipt>>> done) = 0;

  // Cancels a message that is scheduled and not yet due. NOT_FOUND if there
  // is none (unknown id, already due, cancelled or acked); ABORTED if a
  // publish or cancel of it is still being written (retry).
  virtual void Cancel(std::string topic, std::string id,
                      Callback<absl::Status> done) = 0;

  // Moves a scheduled message to `deliver_at` (whole milliseconds; the past
  // means now), atomically. `done` gets the new receipt; NOT_FOUND and
  // ABORTED as Cancel; INVALID_ARGUMENT, and nothing changes, if the
  // message has a deadline (NewMessage::expire_at) at or before the new time.
  virtual void Reschedule(std::string topic, std::string id,
                          absl::Time deliver_at,
                          Callback<absl::StatusOr<PublishReceipt>> done) = 0;

  // ---- Consumers (consumer.h says what a Consumer receives).

  // Adds `consumer` to its group, registering the group if it does not
  // exist and `options.may_create_group`. `done` gets the consumer's id;
  // NOT_FOUND for a group that does not exist and may not be created;
  // RESOURCE_EXHAUSTED past the groups-per-topic limit; UNAVAILABLE while
  // shutting down.
  virtual void Subscribe(SubscribeOptions options,
                         std::shared_ptr<Consumer> consumer,
                         Callback<absl::StatusOr<ConsumerId>> done) = 0;
  // Removes a consumer; its unacknowledged deliveries return to its group
  // at once. Unknown ids are ignored.
  virtual void Unsubscribe(ConsumerId id) = 0;
  // Acknowledges deliveries of the consumer by message id; ids not in
  // flight on it are counted and ignored.
  virtual void Ack(ConsumerId id,
                   absl::Span<const std::string_view> message_ids) = 0;
  // Takes a delivery back, to be delivered again after `delay` (at once if
  // not positive).
  virtual void Nack(ConsumerId id, std::string_view message_id,
                    absl::Duration delay) = 0;
  // The consumer's stream wrote `deliveries` of what it was sent, `bytes`
  // (DeliveryBytes) in all, to the network.
  virtual void Written(ConsumerId id, size_t deliveries, size_t bytes) = 0;

  // ---- Admin queries, answered from a thread of the broker's own.

  // Every topic with pending messages or groups, in name order; or only
  // `topic` (NOT_FOUND if it has neither).
  virtual void Stats(
      std::optional<std::string> topic,
      Callback<absl::StatusOr<std::vector<TopicStats>>> done) = 0;
  // A page of a topic's messages in one state, in due order.
  virtual void ListMessages(ListQuery query,
                            Callback<absl::StatusOr<ListPage>> done) = 0;
  // The schedule histogram of a topic: for each bucket of `query`, how many
  // of its messages are scheduled (published, not yet due) to come due in
  // it. Reads exact counts kept per minute, hour and day
  // (storage/schedule_counts.h), not the messages: a bucket of whole days
  // costs a read per day. A topic without scheduled messages, or unknown,
  // gets every bucket at 0.
  virtual void GetSchedule(
      ScheduleQuery query,
      Callback<absl::StatusOr<std::vector<ScheduleBucket>>> done) = 0;
  // One message by id with the first `preview_bytes` of its payload;
  // NOT_FOUND if the topic holds no pending message with that id.
  virtual void GetMessage(std::string topic, std::string id,
                          size_t preview_bytes,
                          Callback<absl::StatusOr<MessageView>> done) = 0;

  // ---- Admin tasks.

  // Registers a group; `done` gets when it was created. ALREADY_EXISTS if
  // it exists; RESOURCE_EXHAUSTED past the groups-per-topic limit.
  virtual void CreateGroup(std::string topic, std::string group,
                           Callback<absl::StatusOr<absl::Time>> done) = 0;
  // Deletes a group: its streams end with NOT_FOUND; `done` gets how many
  // ready and in-flight entries went. NOT_FOUND if there is no such group.
  virtual void DeleteGroup(std::string topic, std::string group,
                           Callback<absl::StatusOr<uint64_t>> done) = 0;
  // Publishes dead letters of `<topic>.dlq` (all, or those with `ids`)
  // back to `topic`, due now; `done` gets how many moved. A message of
  // `<topic>.dlq` scheduled for later is no dead letter until due. NOT_FOUND,
  // and nothing moves, if an id is not a dead letter of the topic;
  // UNAVAILABLE if letters stayed busy too long (the others moved).
  virtual void Redrive(std::string topic, std::vector<std::string> ids,
                       Callback<absl::StatusOr<uint64_t>> done) = 0;
  // Deletes the topic's scheduled messages, its ready ones, or both, a
  // chunk at a time; `done` gets how many messages went.
  virtual void Purge(std::string topic, bool scheduled, bool ready,
                     Callback<absl::StatusOr<uint64_t>> done) = 0;

  // ---- Operations.

  // Writes a consistent copy of the store into `dir`, a new directory on
  // the broker's machine: every write that completed before the call, and
  // nothing half-written (MessageStore::Checkpoint). Writes go on
  // meanwhile. Errors as Checkpoint's: INVALID_ARGUMENT for a relative path,
  // ALREADY_EXISTS, NOT_FOUND for a missing parent, UNIMPLEMENTED for a
  // store without files, RESOURCE_EXHAUSTED, UNAVAILABLE.
  virtual void CreateSnapshot(std::string dir,
                              Callback<absl::StatusOr<SnapshotInfo>> done) = 0;

  // Answers at once, without I/O.
  virtual BrokerInfo Info() = 0;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_BROKER_H_
